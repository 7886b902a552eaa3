/**
 * The sessions service: what other plugins get (`SessionsService`: session lookups, the event
 * recorder and its subscriptions, the credentials, the networks) and what the plugin's own
 * services share: the organization-scoped session lookup, the audit log, the webhook URL checks
 * and secret rotation hooks, and the check that a session can use its network.
 */
import { WharfError } from '../../core/errors.ts';
import { canonicalEvent, type EventName } from './events.ts';
import type { MessagingCredentials } from './credentials.ts';
import { networkHost } from './network-host.ts';
import { notConnectedMessage } from './networks/not-connected.ts';
import type { NetworkAdapter, NetworkHost } from './networks/types.ts';
import { type EventRecorder, remove } from './recorder.ts';
import { AUDIT_LOG, auditRow, type SessionsStore } from './store.ts';
import type {
  Account,
  ActingSession,
  Actor,
  EmittedEvent,
  EventListener,
  EventRowSubscriber,
  EventRowTable,
  EventSubscriber,
  SessionEvent,
  SessionRecord,
  SessionsService,
  SessionStatus,
  SessionType,
  WebhookSecretRotation,
  WebhookSecretRotationHook,
  WebhookUrlCheck,
} from './types.ts';

/** A session that can use its network now: it has an adapter and is connected. */
export interface ConnectedSession {
  session: SessionRecord;
  network: NetworkAdapter;
  actor: Actor;
}

export class Sessions implements SessionsService {
  readonly store: SessionsStore;
  readonly credentials: MessagingCredentials;
  readonly #recorder: EventRecorder;
  readonly #urlChecks: WebhookUrlCheck[] = [];
  readonly #rotationHooks: WebhookSecretRotationHook[] = [];
  readonly #networks = new Map<SessionType, { adapter: NetworkAdapter; host: NetworkHost }>();

  constructor(store: SessionsStore, recorder: EventRecorder, credentials: (sessions: Sessions) => MessagingCredentials) {
    this.store = store;
    this.#recorder = recorder;
    this.credentials = credentials(this);
  }

  /** Adds a network: `build` gets the host the adapter reports through. */
  registerNetwork(type: SessionType, build: (host: NetworkHost) => NetworkAdapter): NetworkAdapter {
    const host = networkHost(type, this.store, this.#recorder);
    const adapter = build(host);
    this.#networks.set(type, { adapter, host });
    return adapter;
  }

  networks(): NetworkAdapter[] {
    return [...this.#networks.values()].map((n) => n.adapter);
  }

  /** The host a network's adapter reports through, to report for it (a session connected at creation). */
  host(type: SessionType): NetworkHost | undefined {
    return this.#networks.get(type)?.host;
  }

  // SessionsService

  get(id: number): Promise<SessionRecord | undefined> {
    return this.store.session(id);
  }

  webhookSecret(id: number): Promise<string | undefined> {
    return this.store.webhookSecret(id);
  }

  transaction<T>(fn: () => Promise<T>, sessions?: readonly number[]): Promise<T> {
    return this.#recorder.transaction(fn, sessions);
  }

  emit(sessionId: number, event: EventName, data: unknown): Promise<EmittedEvent> {
    return this.#recorder.emit(sessionId, event, data);
  }

  onEvent(fn: EventSubscriber): () => void {
    return this.#recorder.onEvent(fn);
  }

  onEventRow(table: EventRowTable, fn: EventRowSubscriber): () => void {
    return this.#recorder.onEventRow(table, fn);
  }

  afterEvent(fn: EventListener): () => void {
    return this.#recorder.afterEvent(fn);
  }

  events(sessionId: number, options?: { afterId?: number; limit?: number; event?: EventName }): Promise<SessionEvent[]> {
    return this.store.events(sessionId, options);
  }

  canonicalEvent(name: string): EventName | undefined {
    return canonicalEvent(name);
  }

  addWebhookUrlCheck(check: WebhookUrlCheck): void {
    this.#urlChecks.push(check);
  }

  onWebhookSecretRotated(fn: WebhookSecretRotationHook): () => void {
    this.#rotationHooks.push(fn);
    return () => remove(this.#rotationHooks, fn);
  }

  network(session: SessionRecord): NetworkAdapter | undefined {
    return this.#networks.get(session.type)?.adapter;
  }

  // Shared by the plugin's services

  /** Runs the registered webhook URL checks; the first complaint, or null. */
  async checkWebhookUrl(url: string): Promise<string | null> {
    for (const check of this.#urlChecks) {
      const problem = await check(url);
      if (problem) return problem;
    }
    return null;
  }

  /** Runs the rotation hooks (inside the rotating transaction); until when the previous secret still signs, or null. */
  async secretRotated(rotation: WebhookSecretRotation): Promise<Date | null> {
    let previousValidUntil: Date | null = null;
    for (const hook of this.#rotationHooks) {
      const until = (await hook(rotation, this.store.db.scope?.tx ?? this.store.db))?.previousValidUntil;
      if (until && (!previousValidUntil || until > previousValidUntil)) previousValidUntil = until;
    }
    return previousValidUntil;
  }

  /** A session of the caller's organization by path id; 404 alike for a missing and a foreign one. */
  async sessionOf(account: Account, idParam: string | undefined): Promise<SessionRecord> {
    const id = /^[1-9]\d{0,15}$/.test(idParam ?? '') ? Number(idParam) : Number.NaN;
    const session = Number.isSafeInteger(id) ? await this.store.sessionInOrg(id, account.orgId) : undefined;
    if (!session) throw new WharfError('not_found', 'Session not found');
    return session;
  }

  /** The acting session with its network; 409 unless it has an adapter and is connected. */
  connected(acting: ActingSession): ConnectedSession {
    const { session, network, actor } = acting;
    requireConnected(session, network);
    return { session, network, actor };
  }

  /** Writes an audit row: inside a transaction, with its events (on PostgreSQL in their statement, see EventRecorder.defer). */
  async audit(session: { id: number; orgId: string }, actor: Actor, action: string, details: Record<string, unknown> | null = null): Promise<void> {
    const now = new Date().toISOString();
    if (this.#recorder.defer(AUDIT_LOG, auditRow(session.id, session.orgId, action, actor, details, now))) return;
    await this.store.audit(session.id, session.orgId, action, actor, details, now);
  }

  /** A session log row without a status change (restarts, say). */
  sessionLog(sessionId: number, eventType: string, status: SessionStatus, reason: string | null = null): Promise<void> {
    return this.store.statusLog(sessionId, eventType, status, reason, new Date().toISOString());
  }
}

/** 409 unless the session has a network adapter and is connected. */
export function requireConnected(session: SessionRecord, network: NetworkAdapter | undefined): asserts network is NetworkAdapter {
  requireAdapter(session, network);
  if (session.status !== 'connected') throw new WharfError('not_connected', notConnectedMessage(session));
}

/** 409 when this build has no adapter for the session's network (`whatsapp`, until its adapter lands). */
export function requireAdapter(session: SessionRecord, network: NetworkAdapter | undefined): asserts network is NetworkAdapter {
  if (!network) {
    throw new WharfError(
      'not_connected',
      `Session ${session.id} is not connected: this build has no network adapter for ${session.type} sessions yet, so they stay disconnected (use a sandbox session to test)`,
    );
  }
}
