/**
 * What the sessions plugin gives the rest of Wharf: the session record, the two credential
 * principals (`pat`, `sessionKey`), the recorded event, and the service other plugins build on
 * (the webhooks plugin imports this file and nothing else of the sessions plugin). The network
 * adapter contract, which this file refers to, is `networks/types.ts`.
 */
import type { Credential } from '../../core/api.ts';
import type { Db } from '../../core/db.ts';
import type { EventName } from './events.ts';
import type { NetworkAdapter, NetworkSession } from './networks/types.ts';

export type { EventName } from './events.ts';
export type { SessionStatus } from './networks/types.ts';

export type SessionType = 'whatsapp' | 'sandbox';

/** How webhook deliveries are signed: the secret itself in `X-Webhook-Signature`, or an HMAC-SHA256 of the body. */
export type SigningMode = 'secret' | 'hmac';

/** A session as the plugin and its dependents see it (secrets are read through dedicated methods). */
export interface SessionRecord extends NetworkSession {
  type: SessionType;
  accountProtection: boolean;
  logMessages: boolean;
  webhookUrl: string | null;
  webhookEnabled: boolean;
  /** null: no events; []: every event; otherwise the canonical names subscribed to. */
  webhookEvents: EventName[] | null;
  webhookSigning: SigningMode;
  ignoreGroups: boolean;
  ignoreChannels: boolean;
  ignoreBroadcasts: boolean;
  createdAt: string;
  /** Changes whenever the row does (settings, status, key, secret): a cache of anything read from it is stale once it differs. */
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

/** Who did something to a session, for its audit log. */
export interface Actor {
  kind: 'pat' | 'session' | 'oauth' | 'sessionKey' | 'system';
  id: string | null;
  userId: string | null;
  /** The caller's IP address. */
  address: string | null;
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

/**
 * An event as subscribers and listeners get it: the recorded row and the session as the
 * recording transaction read it, webhook and signing settings included, so a subscriber needs
 * no read of its own.
 */
export interface EmittedEvent extends SessionEvent {
  session: SessionRecord;
  /** The payload as recorded: JSON, the text `payload` is parsed from (on first use). */
  raw: string;
}

/**
 * Called inside the transaction that records the event; a throw rolls the event (and the
 * operation that emitted it) back. A subscriber writes with `tx`, the recording transaction, so
 * its writes commit with the event, or not at all. On PostgreSQL the transaction may run again
 * after a serialization failure (and the subscriber with it): no effects outside the database.
 */
export type EventSubscriber = (event: EmittedEvent, tx: Db) => Promise<void> | void;

/**
 * A table whose rows another plugin writes with events (the webhooks outbox), in the statement
 * that records them: on PostgreSQL the events of a transaction and their rows are one statement.
 */
export interface EventRowTable {
  name: string;
  /** Its columns (the event's id apart) with their PostgreSQL types, in the order of a row's values. */
  columns: readonly (readonly [name: string, type: 'bigint' | 'text'])[];
  /** The column that takes the event's id (none: rows written with a transaction's events, of no event, like its audit rows). */
  eventId?: string;
  /** PostgreSQL: the channel NOTIFYed, at the commit, with each row's value of `column` (as text). */
  notify?: { channel: string; column: string };
}

/** A row of an {@link EventRowTable} for one event: its values, and what to call with its id once written (in the transaction). */
export interface EventRow {
  values: readonly unknown[];
  written(id: number): void;
}

/**
 * Called when an event is emitted, before it is written (its `id` is not known yet): the row to
 * write with it, or undefined. Runs again with the transaction after a serialization failure.
 */
export type EventRowSubscriber = (event: EmittedEvent) => EventRow | undefined;
/** Called after the transaction that recorded the event has committed. */
export type EventListener = (event: EmittedEvent) => void;
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
 * Called inside the transaction that replaces a webhook secret (a throw rolls it back; writes
 * through the hook's own store join it). Returns until when the previous secret still signs
 * deliveries, if the hook keeps it for a grace period.
 */
export type WebhookSecretRotationHook = (rotation: WebhookSecretRotation, tx: Db) => Promise<{ previousValidUntil?: Date } | undefined>;

/** The caller of an account-level operation: a personal access token or a signed-in user, in one organization. */
export interface Account {
  orgId: string;
  userId: string;
  actor: Actor;
}

/** The session a session API key acts for, and the network that carries it. */
export interface ActingSession {
  session: SessionRecord;
  /** Undefined for a type without an adapter in this build (`whatsapp` for now). */
  network: NetworkAdapter | undefined;
  /** The key, for the session's audit log. */
  actor: Actor;
}

export interface SessionsService {
  /** A session by id, whatever its organization (callers scope by `orgId` themselves). */
  get(id: number): Promise<SessionRecord | undefined>;
  /** A session's webhook secret, decrypted; undefined when the session is gone. */
  webhookSecret(id: number): Promise<string | undefined>;
  /**
   * Records an event of a session and runs the subscribers in the same transaction; the
   * post-commit listeners run once the outermost transaction commits.
   */
  emit(sessionId: number, event: EventName, data: unknown): Promise<EmittedEvent>;
  /**
   * Runs `fn` in one transaction (nesting joins it); events emitted inside are announced after
   * the commit. On PostgreSQL `fn` may run again after a serialization failure. `sessions`: the
   * sessions whose events or messages it writes; transactions naming a common session run one
   * after another (on every instance), so a burst through one session queues instead of meeting
   * serialization failures (ignored when nested: the outermost call's sessions hold).
   */
  transaction<T>(fn: () => Promise<T>, sessions?: readonly number[]): Promise<T>;
  /** Subscribes inside the recording transaction, once the event is written (its id known). Returns an unsubscribe function. */
  onEvent(fn: EventSubscriber): () => void;
  /** Writes a row of `table` with each event `fn` answers one for, in the statement recording the event (the webhooks outbox). Returns an unsubscribe function. */
  onEventRow(table: EventRowTable, fn: EventRowSubscriber): () => void;
  /** Subscribes after commit (wake a dispatcher, say). Returns an unsubscribe function. */
  afterEvent(fn: EventListener): () => void;
  /** Recorded events of a session after `afterId`, oldest first. */
  events(sessionId: number, options?: { afterId?: number; limit?: number; event?: EventName }): Promise<SessionEvent[]>;
  /** The canonical name of an event name or WasenderAPI alias; undefined when it is neither. */
  canonicalEvent(name: string): EventName | undefined;
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
  readonly credentials: { account: Credential<Account>; sessionKey: Credential<ActingSession> };
  /** The adapter of a session's network, or undefined when this build has none for its type. */
  network(session: SessionRecord): NetworkAdapter | undefined;
}

declare module '../../core/plugin.ts' {
  interface Services {
    sessions: SessionsService;
  }
}
