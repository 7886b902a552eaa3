/**
 * What the storage plugin gives the rest of Wharf: its records as the API shows them, the
 * service other plugins reach it through, and the `appToken` principal its file routes accept.
 * The principal is declared here, by the plugin that consumes it, so storage needs nothing from
 * the plugin that produces it (tokens, which depends on storage).
 */
import type { Credential } from '../../core/api.ts';
import type { Db } from '../../core/db.ts';
import type { StorageConnection } from './drivers/types.ts';

/** An app as Wharf keeps it: `orgId` is the owning organization. */
export interface AppRecord {
  id: string;
  orgId: string;
  name: string;
  bucketName: string;
  /** Bytes; null = unlimited. */
  storageLimit: number | null;
  createdAt: string;
  updatedAt: string;
}

/** An app as the API shows it: the spec calls the owning organization `teamId`. */
export type App = Omit<AppRecord, 'orgId'> & { teamId: string };

/** A file record as the API shows it. */
export interface FileRecord {
  id: string;
  appId: string;
  key: string;
  name: string;
  size: number;
  type: string;
  uploadedAt: string;
}

/** A caller acting for one app: an app API token (`svc_live_...`) as Bearer or in a body. */
export interface AppTokenPrincipal {
  kind: 'appToken';
  appId: string;
  orgId: string;
}

declare module '../../core/auth.ts' {
  interface PrincipalKinds {
    appToken: AppTokenPrincipal;
  }
}

export interface StorageService {
  /** The spec's "Session" credential for route declarations: a dashboard session, loaded as its active organization's id (400 without one). */
  readonly credentials: { dashboardSession: Credential<string> };
  /** An app by id, or undefined when it does not exist or is being deleted. */
  getApp(appId: string): Promise<AppRecord | undefined>;
  /** The app if it belongs to `orgId`; undefined otherwise (never tells another organization's app apart from a missing one). */
  getAppInOrg(appId: string, orgId: string): Promise<AppRecord | undefined>;
  /** Connection details of the store for holders of the app's tokens (the public endpoint). Throws a 503 WharfError when storage is not configured. */
  connectionFor(app: AppRecord): StorageConnection;
  /**
   * Runs `listener` inside the transaction that deletes an app's records, after its bucket is
   * gone: plugins remove what they keep about the app (tokens) there, on `tx`, atomically with
   * the app. On PostgreSQL the transaction may run again: only database writes on `tx`.
   */
  onAppDeleted(listener: (appId: string, tx: Db) => Promise<void>): void;
}

declare module '../../core/plugin.ts' {
  interface Services {
    storage: StorageService;
  }
}
