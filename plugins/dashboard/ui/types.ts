/** The shapes the dashboard reads from the API (the fields it uses). */

export type Role = 'owner' | 'admin' | 'member';

export interface Org {
  id: string;
  slug: string;
  name: string;
  role: Role;
}

export interface User {
  id: string;
  email: string | null;
  name: string | null;
}

export interface App {
  id: string;
  teamId: string;
  name: string;
  bucketName: string;
  storageLimit: number | null;
  createdAt: string;
  updatedAt: string;
  storedBytes: number;
  fileCount: number;
  unregisteredBytes: number;
  unregisteredCount: number;
  /** Bytes in parts of unfinished multipart uploads; null where the store is not counted live (s3). */
  pendingBytes: number | null;
  usedBytes: number;
  usageCheckedAt: string | null;
}

export interface ApiToken {
  id: string;
  name: string;
  tokenPrefix: string;
  lastUsedAt: string | null;
  createdAt: string;
}

export interface StoredFile {
  id: string;
  appId: string;
  key: string;
  name: string;
  size: number;
  type: string;
  uploadedAt: string;
}

export interface Pagination {
  page: number;
  pageSize: number;
  total: number;
  totalPages: number;
}

export type SessionStatus = 'connecting' | 'connected' | 'disconnected' | 'need_scan' | 'logged_out' | 'expired';

export interface Session {
  id: number;
  name: string;
  phone_number: string;
  status: SessionStatus;
  /** Why the session has its status (a failed attempt, a close code), or null. */
  status_reason: string | null;
  type: 'whatsapp' | 'sandbox';
  account_protection: boolean;
  log_messages: boolean;
  webhook_url: string | null;
  webhook_enabled: boolean;
  webhook_events: string[] | null;
  api_key: string;
  webhook_secret?: string;
  created_at: string;
  updated_at: string;
}

/** Laravel's paginator, which the messaging API's lists use. */
export interface Paginated<T> {
  current_page: number;
  data: T[];
  per_page: number;
  total: number;
  last_page: number;
}

export interface Dispatch {
  id: number;
  event_id: number;
  webhook_id: string;
  session_id: number;
  event: string;
  url: string;
  status: 'pending' | 'delivered' | 'abandoned';
  in_flight: boolean;
  attempt_count: number;
  max_attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  redelivery_of: number | null;
  created_at: string;
  finished_at: string | null;
}

export interface Attempt {
  number: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response: string | null;
}

export interface Pat {
  id: number;
  name: string;
  hint: string;
  user_id: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
}

export interface Member {
  userId: string;
  email: string | null;
  name: string | null;
  role: Role;
  since: string;
}

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  invitedAt: string;
  expiresAt: string;
}

export interface ReceivedInvitation {
  id: string;
  org: { id: string; slug: string; name: string };
  role: Role;
  invitedBy: { name: string | null; email: string | null } | null;
  expiresAt: string;
}
