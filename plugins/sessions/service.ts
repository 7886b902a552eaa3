/**
 * The sessions service: session lookups scoped by organization, the credential checks every
 * route starts with, the event recorder (SQLite row + in-transaction subscribers + post-commit
 * listeners), and the {@link NetworkHost} that network adapters report through.
 */
import type { Context } from 'koa';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Credential } from '../../core/api.ts';
import { WharfError } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import type { UserPrincipal } from '../identity/types.ts';
import { type EventName, VIEW_OF_CHAT } from './events.ts';
import type { MessageKey, NetworkAdapter, NetworkHost, ReceiptStatus } from './networks/types.ts';
import { type Actor, type SessionsStore, STATUS_RANK } from './store.ts';
import type {
  ActingSession,
  EventListener,
  EventSubscriber,
  PatPrincipal,
  SessionEvent,
  SessionKeyPrincipal,
  SessionRecord,
  SessionsService,
  SessionStatus,
  SessionType,
  WebhookSecretRotationHook,
  WebhookSettings,
  WebhookUrlCheck,
} from './types.ts';

/** Credential kinds of account-level operations: a PAT, or a signed-in user (dashboard, CLI). */
export const ACCOUNT_KINDS = ['pat', 'session', 'oauth'] as const;
export const NEEDS_PAT = 'personal access token';
export const NEEDS_SESSION_KEY = 'session API key';

/** Who is calling an account-level operation, and for which organization. */
export interface Account {
  orgId: string;
  userId: string;
  actor: Actor;
}

export class Sessions implements SessionsService {
  readonly store: SessionsStore;
  readonly host: NetworkHost;
  readonly #log: Logger;
  readonly #subscribers: EventSubscriber[] = [];
  readonly #listeners: EventListener[] = [];
  readonly #urlChecks: WebhookUrlCheck[] = [];
  readonly #rotationHooks: WebhookSecretRotationHook[] = [];
  readonly #networks = new Map<SessionType, NetworkAdapter>();
  readonly #protection: RateLimiterMemory;
  #depth = 0;
  #pending: SessionEvent[] = [];

  constructor(store: SessionsStore, log: Logger, options: { accountProtectionSeconds: number }) {
    this.store = store;
    this.#log = log;
    this.#protection = new RateLimiterMemory({ keyPrefix: 'account-protection', points: 1, duration: options.accountProtectionSeconds });
    this.host = this.#makeHost();
  }

  registerNetwork(type: SessionType, adapter: NetworkAdapter): void {
    this.#networks.set(type, adapter);
  }

  networks(): NetworkAdapter[] {
    return [...this.#networks.values()];
  }

  // SessionsService

  get(id: number): SessionRecord | undefined {
    return this.store.session(id);
  }

  webhookSettings(id: number): WebhookSettings | undefined {
    const session = this.store.session(id);
    if (!session) return undefined;
    return {
      sessionId: id,
      orgId: session.orgId,
      url: session.webhookUrl,
      enabled: session.webhookEnabled,
      events: session.webhookEvents,
      secret: this.store.secrets(id).webhookSecret,
      signing: session.webhookSigning,
    };
  }

  transaction<T>(fn: () => T): T {
    const mark = this.#pending.length;
    this.#depth++;
    let result: T;
    try {
      result = this.store.db.transaction(fn)();
    } catch (err) {
      this.#pending.length = mark;
      throw err;
    } finally {
      this.#depth--;
    }
    if (this.#depth === 0 && !this.store.db.inTransaction) this.#flush();
    return result;
  }

  emit(sessionId: number, event: EventName, data: unknown): SessionEvent {
    return this.transaction(() => {
      const session = this.store.session(sessionId);
      if (!session) throw new Error(`event ${event} for unknown session ${sessionId}`);
      const now = new Date();
      const raw = JSON.stringify({ event, sessionId, timestamp: now.getTime(), data: data ?? null });
      const createdAt = now.toISOString();
      const id = this.store.insertEvent(sessionId, session.orgId, event, raw, createdAt);
      const recorded: SessionEvent = { id, sessionId, orgId: session.orgId, event, payload: JSON.parse(raw), createdAt };
      for (const subscriber of this.#subscribers) subscriber(recorded, this.store.db);
      this.#pending.push(recorded);
      return recorded;
    });
  }

  onEvent(fn: EventSubscriber): () => void {
    this.#subscribers.push(fn);
    return () => remove(this.#subscribers, fn);
  }

  afterEvent(fn: EventListener): () => void {
    this.#listeners.push(fn);
    return () => remove(this.#listeners, fn);
  }

  events(sessionId: number, options?: { afterId?: number; limit?: number; event?: EventName }): SessionEvent[] {
    return this.store.events(sessionId, options);
  }

  addWebhookUrlCheck(check: WebhookUrlCheck): void {
    this.#urlChecks.push(check);
  }

  onWebhookSecretRotated(fn: WebhookSecretRotationHook): () => void {
    this.#rotationHooks.push(fn);
    return () => remove(this.#rotationHooks, fn);
  }

  /**
   * Replaces a session's webhook secret in one transaction with the rotation hooks and the audit
   * row; returns the new secret and until when the old one still signs deliveries (null: not kept).
   */
  rotateWebhookSecret(session: SessionRecord, actor: Actor, secret: string): { secret: string; previousValidUntil: Date | null } {
    return this.transaction(() => {
      const rotatedAt = new Date();
      const previousSecret = this.store.secrets(session.id).webhookSecret;
      this.store.setWebhookSecret(session.id, secret, rotatedAt.toISOString());
      let previousValidUntil: Date | null = null;
      for (const hook of this.#rotationHooks) {
        const until = hook({ sessionId: session.id, orgId: session.orgId, previousSecret, rotatedAt }, this.store.db)?.previousValidUntil;
        if (until && (!previousValidUntil || until > previousValidUntil)) previousValidUntil = until;
      }
      this.audit(session, actor, 'session.webhook_secret_rotated', { previous_valid_until: previousValidUntil?.toISOString() ?? null });
      return { secret, previousValidUntil };
    });
  }

  network(session: SessionRecord): NetworkAdapter | undefined {
    return this.#networks.get(session.type);
  }

  /**
   * The two credentials of the messaging API, for route declarations. `account`: a personal access
   * token or a signed-in user (dashboard, CLI), loaded as the organization it acts in (403 when a
   * user has none selected); `sessionKey`: a session API key, loaded as its session and network.
   * Each leaves what it loaded in `ctx.state` too (`account`, `acting`).
   */
  readonly credentials: { account: Credential<Account>; sessionKey: Credential<ActingSession> } = {
    account: {
      kinds: ACCOUNT_KINDS,
      needs: NEEDS_PAT,
      schemes: ['personalAccessToken'],
      load: (ctx, principal) => (ctx.state.account = this.#account(ctx, principal as PatPrincipal | UserPrincipal)),
    },
    sessionKey: {
      kinds: ['sessionKey'],
      needs: NEEDS_SESSION_KEY,
      schemes: ['sessionApiKey'],
      load: (ctx, principal) => {
        const session = this.store.session((principal as SessionKeyPrincipal).sessionId);
        if (!session) throw new WharfError('unauthorized', 'Invalid or expired credential');
        return (ctx.state.acting = { session, network: this.network(session) });
      },
    },
  };

  #account(ctx: Context, principal: PatPrincipal | UserPrincipal): Account {
    const address = ctx.ip || null;
    if (principal.kind === 'pat') {
      return { orgId: principal.orgId, userId: principal.userId, actor: { kind: 'pat', id: String(principal.patId), userId: principal.userId, address } };
    }
    if (!principal.orgId) {
      throw new WharfError('forbidden', 'No organization selected: choose one (PUT /auth/active-org) or send X-Service-Org');
    }
    return { orgId: principal.orgId, userId: principal.userId, actor: { kind: principal.kind, id: principal.userId, userId: principal.userId, address } };
  }

  /** A session of the caller's organization by path id; 404 alike for a missing and a foreign one. */
  sessionOf(account: Account, idParam: string | undefined): SessionRecord {
    const id = /^[1-9]\d{0,15}$/.test(idParam ?? '') ? Number(idParam) : Number.NaN;
    const session = Number.isSafeInteger(id) ? this.store.sessionInOrg(id, account.orgId) : undefined;
    if (!session) throw new WharfError('not_found', 'Session not found');
    return session;
  }

  audit(session: { id: number; orgId: string }, actor: Actor, action: string, details: Record<string, unknown> | null = null): void {
    this.store.audit(session.id, session.orgId, action, actor, details, new Date().toISOString());
  }

  /** Runs the registered webhook URL checks; the first complaint, or null. */
  async checkWebhookUrl(url: string): Promise<string | null> {
    for (const check of this.#urlChecks) {
      const problem = await check(url);
      if (problem) return problem;
    }
    return null;
  }

  /** Account protection: one send per interval per session, else 429 with Retry-After. */
  async protectAccount(session: SessionRecord): Promise<void> {
    if (!session.accountProtection) return;
    try {
      await this.#protection.consume(String(session.id));
    } catch (res) {
      if (!(res instanceof RateLimiterRes)) throw res;
      const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
      throw new WharfError('rate_limited', `Account protection is on for this session: one message every ${this.#protection.duration} seconds`, { retryAfter });
    }
  }

  /** A session log row without a status change (restarts, say). */
  sessionLog(sessionId: number, eventType: string, status: SessionStatus, reason: string | null = null): void {
    this.store.statusLog(sessionId, eventType, status, reason, new Date().toISOString());
  }

  #flush(): void {
    const events = this.#pending;
    this.#pending = [];
    for (const event of events) {
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch (err) {
          this.#log.error({ err, event: event.event, eventId: event.id }, 'event listener failed');
        }
      }
    }
  }

  #makeHost(): NetworkHost {
    const store = this.store;
    const now = () => new Date().toISOString();
    const host: NetworkHost = {
      transaction: (fn) => this.transaction(fn),
      session: (id) => store.session(id),
      emit: (sessionId, event, data) => {
        this.emit(sessionId, event, data);
      },
      setStatus: (sessionId, status, reason) => {
        this.transaction(() => {
          const session = store.session(sessionId);
          if (!session || session.status === status) return;
          const at = now();
          store.setStatus(sessionId, status, at);
          store.statusLog(sessionId, 'status_change', status, reason ?? null, at);
          this.emit(sessionId, 'session.status', reason ? { status, reason } : { status });
        });
      },
      qrUpdated: (sessionId, qr) => {
        this.emit(sessionId, 'qrcode.updated', { qr });
      },
      sent: (sessionId, msgId, key, message, timestamp) => {
        this.transaction(() => {
          const session = store.session(sessionId);
          if (!session) return;
          store.messageSent(sessionId, msgId, key, session.logMessages ? message : null, timestamp, now());
          this.emit(sessionId, 'messages.upsert', { key, message, pushName: session.name, messageTimestamp: timestamp });
          this.emit(sessionId, 'message.sent', { key, message, status: 'sent', msgId });
        });
      },
      failed: (sessionId, msgId, error) => {
        this.transaction(() => {
          const row = store.message(sessionId, msgId);
          if (!row) return;
          store.messageFailed(sessionId, msgId, error, now());
          this.emit(sessionId, 'messages.update', [{ key: JSON.parse(row.remote_key) as MessageKey, update: { status: 'error' }, msgId }]);
        });
      },
      receipt: (sessionId, key, status: ReceiptStatus, userJid) => {
        this.transaction(() => {
          const row = store.messageByKey(sessionId, key.id);
          if (row && STATUS_RANK[status] > STATUS_RANK[row.status] && row.status !== 'failed') {
            store.messageStatus(row.id, status, now());
            this.emit(sessionId, 'messages.update', [{ key, update: { status }, msgId: row.id }]);
          }
          this.emit(sessionId, 'message-receipt.update', [{ key, receipt: { userJid, status, t: Math.floor(Date.now() / 1000) }, ...(row ? { msgId: row.id } : {}) }]);
        });
      },
      inbound: (sessionId, message) => {
        return this.transaction(() => {
          const session = store.session(sessionId);
          if (!session) return false;
          if (message.chat === 'group' && session.ignoreGroups) return false;
          if (message.chat === 'newsletter' && session.ignoreChannels) return false;
          if (message.chat === 'broadcast' && session.ignoreBroadcasts) return false;
          const data = { key: message.key, message: message.message, pushName: message.pushName, messageTimestamp: message.messageTimestamp };
          this.emit(sessionId, 'messages.upsert', data);
          this.emit(sessionId, 'messages.received', data);
          if (message.chat !== 'broadcast') this.emit(sessionId, VIEW_OF_CHAT[message.chat], data);
          return true;
        });
      },
    };
    return host;
  }
}

/** 409 unless the session has a network adapter and is connected. */
export function requireConnected(session: SessionRecord, network: NetworkAdapter | undefined): asserts network is NetworkAdapter {
  if (!network) {
    throw new WharfError(
      'not_connected',
      `Session ${session.id} is not connected: this build has no network adapter for ${session.type} sessions yet, so they stay disconnected (use a sandbox session to test)`,
    );
  }
  if (session.status !== 'connected') {
    throw new WharfError('not_connected', `Session ${session.id} is not connected (status: ${session.status}); connect it and poll GET /api/status`);
  }
}

function remove<T>(list: T[], item: T): void {
  const i = list.indexOf(item);
  if (i >= 0) list.splice(i, 1);
}
