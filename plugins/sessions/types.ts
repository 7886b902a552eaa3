/**
 * What the sessions plugin gives the rest of Wharf: the session record, the two credential
 * principals (`pat`, `sessionKey`), the recorded event, and the service that the webhooks plugin
 * and the routes for contacts, groups, media and presence build on.
 */
import type { Credential } from '../../core/api.ts';
import type { Database } from '../../core/db.ts';
import type { EventName } from './events.ts';
import type { NetworkAdapter } from './networks/types.ts';

export type SessionType = 'whatsapp' | 'sandbox';
export const SESSION_TYPES: readonly SessionType[] = ['whatsapp', 'sandbox'];

/** WasenderAPI's status values. */
export type SessionStatus = 'connecting' | 'connected' | 'disconnected' | 'need_scan' | 'logged_out' | 'expired';

/** How webhook deliveries are signed: the secret itself in `X-Webhook-Signature`, or an HMAC-SHA256 of the body. */
export type SigningMode = 'secret' | 'hmac';

/** A session as the plugin and its dependents see it (secrets are read through dedicated methods). */
export interface SessionRecord {
  id: number;
  orgId: string;
  name: string;
  /** E.164 with a leading `+`. */
  phoneNumber: string;
  type: SessionType;
  status: SessionStatus;
  accountProtection: boolean;
  logMessages: boolean;
  webhookUrl: string | null;
  webhookEnabled: boolean;
  /** null: no events; []: every event; otherwise the canonical names subscribed to. */
  webhookEvents: EventName[] | null;
  webhookSigning: SigningMode;
  readIncomingMessages: boolean;
  autoRejectCalls: boolean;
  ignoreGroups: boolean;
  ignoreChannels: boolean;
  ignoreBroadcasts: boolean;
  alwaysOnline: boolean;
  createdAt: string;
  updatedAt: string;
}

/** A personal access token acting for its user in one organization. */
export interface PatPrincipal {
  kind: 'pat';
  patId: number;
  orgId: string;
  userId: string;
}

/** A session API key: acts as that session's account. */
export interface SessionKeyPrincipal {
  kind: 'sessionKey';
  sessionId: number;
  orgId: string;
}

declare module '../../core/auth.ts' {
  interface PrincipalKinds {
    pat: PatPrincipal;
    sessionKey: SessionKeyPrincipal;
  }
}

/** The body of a webhook delivery, exactly: `timestamp` is Unix milliseconds. */
export interface EventPayload {
  event: EventName;
  sessionId: number;
  timestamp: number;
  data: unknown;
}

/** An event as recorded in `sessions_events`. */
export interface SessionEvent {
  id: number;
  sessionId: number;
  orgId: string;
  event: EventName;
  payload: EventPayload;
  /** ISO 8601. */
  createdAt: string;
}

/** What the webhooks plugin needs to decide and sign a delivery. */
export interface WebhookSettings {
  sessionId: number;
  orgId: string;
  url: string | null;
  enabled: boolean;
  /** null: no events; []: every event. */
  events: EventName[] | null;
  /** The webhook secret, decrypted. */
  secret: string;
  signing: SigningMode;
}

/** Called inside the transaction that records the event; a throw rolls the event back. */
export type EventSubscriber = (event: SessionEvent, db: Database) => void;
/** Called after the transaction that recorded the event has committed. */
export type EventListener = (event: SessionEvent) => void;
/** Checks a webhook URL being saved: a message (answered as a 422 on `webhook_url`) or null when fine. */
export type WebhookUrlCheck = (url: string) => Promise<string | null> | string | null;

/** A webhook secret that was just replaced (`POST /api/whatsapp-sessions/{id}/rotate-webhook-secret`). */
export interface WebhookSecretRotation {
  sessionId: number;
  orgId: string;
  /** The secret that was current until now, decrypted. */
  previousSecret: string;
  rotatedAt: Date;
}
/**
 * Called inside the transaction that replaces a webhook secret (a throw rolls it back). Returns
 * until when the previous secret still signs deliveries, if the hook keeps it for a grace period.
 */
export type WebhookSecretRotationHook = (rotation: WebhookSecretRotation, db: Database) => { previousValidUntil?: Date } | void;

/** The session a session API key acts for, and the network that carries it. */
export interface ActingSession {
  session: SessionRecord;
  /** Undefined for a type without an adapter in this build (`whatsapp` for now). */
  network: NetworkAdapter | undefined;
}

export interface SessionsService {
  /** A session by id, whatever its organization (callers scope by `orgId` themselves). */
  get(id: number): SessionRecord | undefined;
  webhookSettings(id: number): WebhookSettings | undefined;
  /**
   * Records an event of a session and runs the subscribers in the same transaction; the
   * post-commit listeners run once the outermost transaction commits.
   */
  emit(sessionId: number, event: EventName, data: unknown): SessionEvent;
  /** Runs `fn` in one SQLite transaction (nesting allowed); events emitted inside are announced after the commit. */
  transaction<T>(fn: () => T): T;
  /** Subscribes inside the recording transaction (the webhooks outbox). Returns an unsubscribe function. */
  onEvent(fn: EventSubscriber): () => void;
  /** Subscribes after commit (wake a dispatcher, say). Returns an unsubscribe function. */
  afterEvent(fn: EventListener): () => void;
  /** Recorded events of a session after `afterId`, oldest first. */
  events(sessionId: number, options?: { afterId?: number; limit?: number; event?: EventName }): SessionEvent[];
  /** Adds a check run on every webhook URL saved through the session routes. */
  addWebhookUrlCheck(check: WebhookUrlCheck): void;
  /** Subscribes to webhook secret rotations (the webhooks plugin keeps the old secret for a grace period). */
  onWebhookSecretRotated(fn: WebhookSecretRotationHook): () => void;
  /**
   * The messaging API's credentials, for route declarations (other plugins' account-level routes
   * use `account`): `account` loads the caller's organization from a personal access token or a
   * signed-in user, `sessionKey` the session of a session API key; 401 / 403 per the credential
   * rules otherwise.
   */
  readonly credentials: { account: Credential<{ orgId: string; userId: string }>; sessionKey: Credential<ActingSession> };
  /** The adapter of a session's network, or undefined when this build has none for its type. */
  network(session: SessionRecord): NetworkAdapter | undefined;
}

declare module '../../core/plugin.ts' {
  interface Services {
    sessions: SessionsService;
  }
}
