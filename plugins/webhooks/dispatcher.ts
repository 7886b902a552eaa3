/**
 * The dispatcher: takes due deliveries from the outbox and POSTs them, with bounded concurrency
 * overall and per session, round-robin over sessions so that one slow receiver holds at most its
 * own slots; records every attempt; reschedules failures with backoff and jitter (Retry-After
 * honoured within the schedule) and abandons a delivery after its last attempt.
 *
 * The outbox in the database is the only truth. On PostgreSQL a delivery is taken from it with a
 * lease (see `WebhooksStore.claim`): several instances on one database share the outbox, each
 * delivery goes out from one of them at a time, the per-session concurrency holds over all of
 * them, and a delivery whose instance died (its lease expired) is taken over. A delivery in
 * flight when its process dies is still pending, and is sent again (at least once). Outcomes are
 * written in batches (every few milliseconds, in one transaction) and release their leases; until
 * then their deliveries stay held in memory, so the queue never hands one out twice.
 *
 * On SQLite (one process) a new delivery starts in the turn its event's transaction commits,
 * from the row just written, when its session has nothing due before it and a slot is free; when
 * every slot of its session is taken, it waits in memory (in commit order) and starts the moment
 * one frees, in the turn the answer that freed it is read. Otherwise (a retry due first, every
 * slot overall taken, too many waiting), and after a restart, it is taken from the outbox in its
 * turn. A slot is held from the request until its answer is read; the outcome is written after,
 * in a batch that joins the group commit, and is not waited for. On PostgreSQL every
 * delivery is taken from the outbox with a claim (one round trip): this instance's dispatcher
 * wakes when the commit is announced in process (`committed`), the others at the NOTIFY the
 * recording transaction sends; a session is claimed only while this instance holds fewer of its
 * deliveries than its limit (a finished delivery's lease counts until its outcome is written),
 * and the outcomes of a batch are written in one statement.
 */
import type { Keys } from '../../core/keys.ts';
import { timeoutAfterIo } from '../../core/timers.ts';
import type { HttpClient } from './network.ts';
import type { Logger } from '../../core/logger.ts';
import type { SessionRecord, SessionsService } from '../sessions/types.ts';
import type { WebhooksConfig } from './config.ts';
import { signatureHeaders } from './signing.ts';
import type { Completion, DueRow, WebhooksStore } from './store.ts';

/** What the response excerpt on an attempt record keeps, in bytes. */
const EXCERPT_BYTES = 1024;
const USER_AGENT = 'Wharf-Webhooks/1';
/** Outcomes are written together: at most this many wait... */
const FLUSH_BATCH = 256;
/** ...for at most this long, in milliseconds (a crash meanwhile only means those are sent again). */
const FLUSH_DELAY_MS = 5;
/**
 * Deliveries waiting in memory for a slot of their session, over all sessions, at most (their
 * bodies are in memory): past this a session's waiting deliveries are left to the outbox's queue.
 */
const READY_MAX = 4096;

interface CachedSecrets {
  /** The session's updated_at when these were read. */
  stamp: string;
  secret: string;
  previous: string | undefined;
  /** Unix ms. */
  previousUntil: number;
}

export interface DispatcherDeps {
  store: WebhooksStore;
  sessions: SessionsService;
  keys: Keys;
  log: Logger;
  config: WebhooksConfig;
  http: HttpClient;
  /** Called after each attempt, for metrics. */
  observe?(outcome: 'delivered' | 'failed' | 'abandoned', durationMs: number): void;
  /** This instance, as the outbox's leases name it. */
  owner: string;
  /** Start a new delivery from the row just written, at the commit (one process: SQLite); else claim it from the outbox. */
  direct: boolean;
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
  response: string | null;
  retryAfterMs: number | null;
  success: boolean;
}

export const previousSecretContext = (sessionId: number) => `webhooks:previous_secret:${sessionId}`;

export class WebhookDispatcher {
  readonly #d: DispatcherDeps;
  readonly #maxDelayMs: number;
  /** Session id -> attempts of its deliveries in flight now. */
  readonly #running = new Map<number, number>();
  /** Session id -> ids of its deliveries in flight, or finished and not yet written: skipped when reading the queue. */
  readonly #held = new Map<number, Set<number>>();
  /** Dispatch id -> the controller that cuts its attempt short. */
  readonly #controllers = new Map<number, AbortController>();
  /** Session id -> when its earliest pending delivery is due (Unix ms); insertion order is the round-robin order. */
  readonly #due = new Map<number, number>();
  /**
   * The recorded event (the object the recorder hands to subscribers and, after the commit, to
   * listeners) -> the dispatch row written for it in a transaction not yet announced as committed.
   * Keyed by the object, not its id: a rolled-back transaction's id is given again to the next
   * event, and its entry is simply never looked up again.
   */
  readonly #enqueued = new WeakMap<object, DueRow>();
  /** Session id -> its decrypted secrets, valid while the session's updated_at is `stamp`. */
  readonly #secrets = new Map<number, CachedSecrets>();
  /**
   * Session id -> deliveries committed in this process (SQLite) while the session had all its
   * slots taken, in commit order: when one of its slots frees, the next starts from here at once,
   * without a read of the outbox or a wait for the next turn. Only while the session has nothing
   * due in the outbox before them (`#due`): once it has, the queue takes over and this list is
   * dropped (its rows are committed, so the queue's read finds them).
   */
  readonly #ready = new Map<number, DueRow[]>();
  /** The rows in #ready, over all sessions. */
  #readyCount = 0;
  /** Sessions marked due while a round of #fill was under way: their due time is not dropped by that round. */
  readonly #remarked = new Set<number>();
  /** Session id -> the session as read after the commit being announced now (kept until the next microtask). */
  readonly #fresh = new Map<number, Promise<SessionRecord | undefined>>();
  #completions: Completion[] = [];
  #active = 0;
  #pumpQueued = false;
  #flushTimer: NodeJS.Timeout | undefined;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #closing = false;
  #closed = false;
  /** A round of #fill is under way; `#refill`: another was asked for meanwhile. */
  #filling = false;
  #refill = false;
  #flushing: Promise<void> = Promise.resolve();
  #idle: (() => void) | undefined;

  constructor(deps: DispatcherDeps) {
    this.#d = deps;
    this.#maxDelayMs = Math.max(...deps.config.retry_schedule_seconds) * 1000;
  }

  /** Deliveries in flight now. */
  get active(): number {
    return this.#active;
  }

  /** Whether an attempt of this dispatch is in flight (or its outcome is being written) now. */
  inFlight(dispatchId: number, sessionId: number): boolean {
    return this.#held.get(sessionId)?.has(dispatchId) ?? false;
  }

  /**
   * Reads the outbox (after a restart: everything pending, including what was in flight) and
   * starts sending. On PostgreSQL a dead instance's leases are taken over when they expire (SQLite
   * writes none: one process holds what it sends in memory).
   */
  start(): Promise<void> {
    return this.resync();
  }

  /** Re-reads every session's earliest due time from the outbox (at start, and now and then as a safety net). */
  async resync(): Promise<void> {
    if (this.#closing) return;
    for (const { session_id, due } of await this.#d.store.dueBySession()) this.markDue(session_id, due);
  }

  /** A dispatch row was written for this event inside its transaction (`row`: the delivery, as the outbox holds it). */
  enqueued(event: object, row: DueRow): void {
    this.#enqueued.set(event, row);
  }

  /**
   * The event's transaction committed: its delivery is due now. When its session has no
   * delivery due before it and a slot is free, the delivery starts here, in the same turn as
   * the commit, from the row just written (no read of the outbox, no wait for the next turn);
   * otherwise it takes its turn in the queue.
   */
  committed(event: object, sessionId: number): void {
    const row = this.#enqueued.get(event);
    if (!row) return;
    this.#enqueued.delete(event);
    // A read of the queue that waited for this commit may have taken the row already.
    if (this.#closing || this.#held.get(sessionId)?.has(row.id)) return;
    const now = Date.now();
    const { config } = this.#d;
    const queued = this.#due.get(sessionId);
    if (this.#d.direct && (queued === undefined || queued > now)) {
      const ready = this.#ready.get(sessionId);
      if ((this.#running.get(sessionId) ?? 0) >= config.concurrency_per_session) {
        // Every slot of the session taken: the row waits in memory for the first one to free.
        if (this.#readyCount < READY_MAX) {
          if (ready) ready.push(row);
          else this.#ready.set(sessionId, [row]);
          this.#readyCount++;
          return;
        }
      } else if (!ready && this.#active < config.concurrency) {
        this.#start(row, this.#sessionNow(sessionId));
        return;
      }
      // Otherwise the queue serves the session (round-robin when every slot overall is taken).
      this.#dropReady(sessionId);
    }
    this.markDue(sessionId, now);
  }

  /**
   * The session as it is now (after the commit being announced, or the attempt just finished),
   * read once for every delivery of it started before the next microtask: its current URL,
   * subscription and signing apply to what is still to be sent.
   */
  #sessionNow(sessionId: number): Promise<SessionRecord | undefined> {
    let session = this.#fresh.get(sessionId);
    if (session === undefined) {
      session = this.#d.sessions.get(sessionId);
      if (this.#fresh.size === 0) queueMicrotask(() => this.#fresh.clear());
      this.#fresh.set(sessionId, session);
    }
    return session;
  }

  /**
   * A slot of the session just freed (SQLite): its next delivery waiting in memory starts now,
   * in the same turn, unless the outbox has something of the session due before it, or other
   * sessions wait for a slot of the overall limit (then the round-robin of the queue decides,
   * and the rows are left to the queue's read).
   */
  #startNext(sessionId: number): void {
    const ready = this.#ready.get(sessionId);
    if (!ready) return;
    const { config } = this.#d;
    const now = Date.now();
    const queued = this.#due.get(sessionId);
    if ((queued === undefined || queued > now) && (this.#running.get(sessionId) ?? 0) < config.concurrency_per_session && this.#active < config.concurrency) {
      // Other sessions can only be waiting for the slot freed now when every slot was taken.
      const contended = this.#active === config.concurrency - 1 && [...this.#due].some(([id, due]) => id !== sessionId && due <= now);
      if (!contended) {
        const row = ready.shift()!;
        this.#readyCount--;
        if (ready.length === 0) this.#ready.delete(sessionId);
        this.#start(row, this.#sessionNow(sessionId));
        return;
      }
    }
    this.#dropReady(sessionId);
    this.markDue(sessionId, now);
  }

  /** The queue of the outbox serves the session from now on: what waited in memory is committed, so its reads find it. */
  #dropReady(sessionId: number): void {
    this.#readyCount -= this.#ready.get(sessionId)?.length ?? 0;
    this.#ready.delete(sessionId);
  }

  /** The session's webhook secret changed: forget the cached one. */
  forgetSecrets(sessionId: number): void {
    this.#secrets.delete(sessionId);
  }

  /** The session has a delivery due at `at` (Unix ms). */
  markDue(sessionId: number, at: number): void {
    if (this.#closing) return;
    if (this.#filling) this.#remarked.add(sessionId);
    const current = this.#due.get(sessionId);
    if (current === undefined || at < current) this.#due.set(sessionId, at);
    this.#wakeAt(at);
  }

  #wakeAt(at: number): void {
    if (this.#closing) return;
    if (at <= Date.now()) {
      if (this.#pumpQueued) return;
      this.#pumpQueued = true;
      setImmediate(() => this.#pump());
      return;
    }
    if (at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(
      () => {
        this.#timerAt = Number.POSITIVE_INFINITY;
        this.#timer = undefined;
        this.#pump();
      },
      Math.min(at - Date.now(), 2 ** 31 - 1),
    );
  }

  #pump(): void {
    this.#pumpQueued = false;
    if (this.#closing) return;
    if (this.#filling) {
      this.#refill = true;
      return;
    }
    this.#filling = true;
    const round = async () => {
      if (this.#completions.length >= FLUSH_BATCH) await this.#flush();
      await this.#fill();
    };
    round()
      .catch((err: unknown) => {
        this.#d.log.error({ err }, 'webhook dispatcher failed to read or write the outbox; retrying in a second');
        this.#wakeAt(Date.now() + 1000);
      })
      .finally(() => {
        this.#filling = false;
        if (this.#refill) {
          this.#refill = false;
          this.#wakeAt(0);
        }
      });
  }

  async #fill(): Promise<void> {
    const { config, store, owner } = this.#d;
    const leaseMs = config.lease_seconds * 1000;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    const served: number[] = [];
    for (const [sessionId, due] of this.#due) {
      if (this.#active >= config.concurrency) break;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      const held = this.#held.get(sessionId);
      // On PostgreSQL a delivery's lease counts against its session's limit until its outcome is
      // written (released): what this instance holds, not only what is in flight. A claim before
      // that write would find no room (BENCHMARKS.md, issue 16 part 8: most claims were such).
      const inUse = this.#d.direct ? (this.#running.get(sessionId) ?? 0) : (held?.size ?? 0);
      const room = Math.min(config.concurrency_per_session - inUse, config.concurrency - this.#active);
      if (room <= 0) continue;
      let started = 0;
      // The session as it is now, read once for every delivery of it started in this round: its
      // current URL, subscription and signing apply to what is still to be sent.
      let session: Promise<SessionRecord | undefined> | undefined;
      this.#remarked.delete(sessionId);
      const {
        rows: claimed,
        atLimit,
        later: claimedLater,
      } = await store.claim(sessionId, now, {
        limit: room,
        owner,
        leaseMs,
        perSession: config.concurrency_per_session,
        held: [...(held ?? [])],
      });
      if (this.#closing) return;
      // The queue serves this session now: what waited in memory is committed, so this read (or
      // the next, while the session stays due) finds it.
      this.#dropReady(sessionId);
      for (const row of claimed) {
        // On SQLite the read waits for a pending group commit, whose announcement may have
        // started some of these rows directly meanwhile (`committed`): in flight already, or
        // their session now at its limit (no lease was written for what is left here).
        if (this.#held.get(sessionId)?.has(row.id)) continue;
        if (this.#d.direct && (this.#running.get(sessionId) ?? 0) >= config.concurrency_per_session) break;
        session ??= this.#d.sessions.get(sessionId);
        this.#start(row, session);
        started++;
      }
      // When nothing more of the session can be taken now: when it next can be. PostgreSQL's
      // claim answers that in its own round trip; SQLite reads it.
      const nextOf = async () => (claimedLater !== undefined ? claimedLater : store.nextDue(sessionId, now));
      if (atLimit) {
        // At its limit over all instances the session stays due: a slot freed here or elsewhere
        // (NOTIFY at the commit of an outcome) wakes this dispatcher, and so does the end of the
        // first live lease (an instance that died frees its slots then).
        const later = await nextOf();
        if (later !== null) next = Math.min(next, later);
      } else if (claimed.length < room) {
        // Nothing else can be taken now: wait for the next retry time (or lease end) of this
        // session, if any. Retry times not yet written are marked again when they are.
        const later = await nextOf();
        // Marked due again meanwhile (a row committed after the read, perhaps due at `now` itself,
        // which nextDue does not count): it stays due, for the next round.
        if (this.#remarked.has(sessionId)) next = Math.min(next, Date.now());
        else if (later === null) this.#due.delete(sessionId);
        else {
          this.#due.set(sessionId, later);
          next = Math.min(next, later);
        }
      }
      if (started) served.push(sessionId);
    }
    // Sessions just served go to the back of the round.
    for (const sessionId of served) {
      const due = this.#due.get(sessionId);
      if (due === undefined) continue;
      this.#due.delete(sessionId);
      this.#due.set(sessionId, due);
    }
    if (next !== Number.POSITIVE_INFINITY) this.#wakeAt(next);
  }

  /** Writes finished attempts in one transaction, then releases their ids and marks their retry times. */
  #flush(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#completions.length === 0) return this.#flushing;
    const batch = this.#completions;
    this.#completions = [];
    // One write at a time, in order; a failed write puts its outcomes back for the next one.
    const write = this.#flushing.then(() => this.#write(batch));
    this.#flushing = write.catch(() => {});
    return write;
  }

  async #write(batch: Completion[]): Promise<void> {
    try {
      await this.#d.store.complete(batch, Date.now(), this.#d.owner);
    } catch (err) {
      this.#completions.unshift(...batch);
      throw err;
    }
    for (const c of batch) {
      const held = this.#held.get(c.sessionId);
      held?.delete(c.dispatchId);
      if (held?.size === 0) this.#held.delete(c.sessionId);
      if (c.status === 'pending' && c.nextAttemptAt !== null) this.markDue(c.sessionId, c.nextAttemptAt);
    }
    // Leases released (PostgreSQL): what waited behind them can be taken now.
    if (!this.#d.direct && this.#due.size) this.#wakeAt(0);
  }

  #completed(completion: Completion): void {
    this.#completions.push(completion);
    if (this.#closing) return;
    if (this.#completions.length >= FLUSH_BATCH) this.#wakeAt(0);
    else {
      this.#flushTimer ??= setTimeout(() => {
        this.#flushTimer = undefined;
        if (this.#closing) return;
        this.#flush().catch((err: unknown) => {
          this.#d.log.error({ err }, 'writing webhook outcomes failed; retrying in a second');
          this.#flushTimer = setTimeout(() => this.#wakeAt(0), 1000);
        });
      }, FLUSH_DELAY_MS);
    }
    // The slot is free now: what the queue holds starts without waiting for the write.
    if (this.#due.size) this.#wakeAt(0);
  }

  #start(row: DueRow, session: Promise<SessionRecord | undefined>): void {
    this.#active++;
    this.#running.set(row.session_id, (this.#running.get(row.session_id) ?? 0) + 1);
    let held = this.#held.get(row.session_id);
    if (!held) this.#held.set(row.session_id, (held = new Set()));
    held.add(row.id);
    const controller = new AbortController();
    this.#controllers.set(row.id, controller);
    const number = row.attempt_count + 1;
    const startedAt = Date.now();
    this.#attempt(row, session, controller.signal).then(
      (result) => this.#finish(row, number, startedAt, result),
      (err: unknown) => this.#finish(row, number, startedAt, { kind: 'attempted', outcome: failure(null, describeError(err)) }),
    );
  }

  /**
   * Renews the leases of what this instance holds (in flight, or finished and not written yet);
   * run every third of the lease on PostgreSQL. A live instance keeps its deliveries however long
   * an attempt and its write take; only a dead one's leases run out.
   */
  async renewLeases(now = Date.now()): Promise<void> {
    if (this.#d.direct || this.#closed) return;
    const ids = [...this.#held.values()].flatMap((held) => [...held]);
    await this.#d.store.renew(ids, this.#d.owner, now + this.#d.config.lease_seconds * 1000);
  }

  #finish(row: DueRow, number: number, startedAt: number, result: AttemptResult): void {
    this.#active--;
    this.#controllers.delete(row.id);
    const running = (this.#running.get(row.session_id) ?? 1) - 1;
    if (running === 0) this.#running.delete(row.session_id);
    else this.#running.set(row.session_id, running);
    if (this.#closed) return;
    if (this.#active === 0) this.#idle?.();
    if (result.kind === 'interrupted') {
      // Cut short by shutdown: nothing is recorded, the delivery stays due and goes out after the restart.
      const held = this.#held.get(row.session_id);
      held?.delete(row.id);
      if (held?.size === 0) this.#held.delete(row.session_id);
      return;
    }
    // The slot is free: the session's next delivery waiting in memory takes it now.
    if (this.#d.direct && !this.#closing) this.#startNext(row.session_id);
    const now = Date.now();
    const durationMs = now - startedAt;
    if (result.kind === 'dropped') {
      this.#secrets.delete(row.session_id);
      this.#d.observe?.('abandoned', 0);
      this.#completed({
        dispatchId: row.id,
        sessionId: row.session_id,
        number: row.attempt_count,
        startedAt,
        durationMs: 0,
        statusCode: null,
        error: result.reason,
        response: null,
        status: 'abandoned',
        nextAttemptAt: null,
        url: null,
        recordAttempt: false,
      });
      return;
    }
    const { outcome, url } = result;
    const { config } = this.#d;
    let status: Completion['status'] = 'delivered';
    let nextAttemptAt: number | null = null;
    if (!outcome.success) {
      if (number >= config.max_attempts) status = 'abandoned';
      else {
        status = 'pending';
        nextAttemptAt = now + this.#delay(number, outcome.retryAfterMs);
      }
    }
    this.#d.observe?.(outcome.success ? 'delivered' : status === 'abandoned' ? 'abandoned' : 'failed', durationMs);
    this.#completed({
      dispatchId: row.id,
      sessionId: row.session_id,
      number,
      startedAt,
      durationMs,
      statusCode: outcome.statusCode,
      error: outcome.error,
      response: outcome.response,
      status,
      nextAttemptAt,
      url: url ?? null,
      recordAttempt: true,
    });
  }

  /** The wait after the n-th failed attempt: the schedule's entry with jitter, lengthened by Retry-After up to the schedule's longest wait. */
  #delay(failedAttempt: number, retryAfterMs: number | null): number {
    const { retry_schedule_seconds: schedule, retry_jitter: jitter } = this.#d.config;
    const base = schedule[Math.min(failedAttempt - 1, schedule.length - 1)]! * 1000;
    let delay = base * (1 - jitter + 2 * jitter * Math.random());
    if (retryAfterMs !== null) delay = Math.max(delay, Math.min(retryAfterMs, this.#maxDelayMs));
    return Math.max(1, Math.round(delay));
  }

  /** The session's secret and, during a rotation's grace period, its previous one; decrypted once per change of the session. */
  async #secretsOf(sessionId: number, stamp: string, now: number): Promise<{ secret: string; previous: string | undefined } | undefined> {
    let cached = this.#secrets.get(sessionId);
    if (!cached || cached.stamp !== stamp) {
      const secret = await this.#d.sessions.webhookSecret(sessionId);
      if (secret === undefined) return undefined;
      const previous = await this.#d.store.previousSecret(sessionId, now);
      cached = {
        stamp,
        secret,
        previous: previous && this.#d.keys.decrypt(previous.secret_enc, previousSecretContext(sessionId)),
        previousUntil: previous?.expires_at ?? 0,
      };
      this.#secrets.set(sessionId, cached);
    }
    return { secret: cached.secret, previous: cached.previousUntil > now ? cached.previous : undefined };
  }

  async #attempt(row: DueRow, pending: Promise<SessionRecord | undefined>, signal: AbortSignal): Promise<AttemptResult> {
    const { config } = this.#d;
    const session = await pending;
    if (!session) return { kind: 'dropped', reason: 'session deleted: not delivered' };
    if (!session.webhookEnabled) return { kind: 'dropped', reason: 'webhook disabled: not delivered' };
    if (!session.webhookUrl) return { kind: 'dropped', reason: 'webhook URL removed: not delivered' };
    const secrets = await this.#secretsOf(row.session_id, session.updatedAt, Date.now());
    if (!secrets) return { kind: 'dropped', reason: 'session deleted: not delivered' };
    // The session's current URL: a receiver moved meanwhile gets what is still to be sent.
    const url = new URL(session.webhookUrl);
    const body = Buffer.from(row.body);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      ...signatureHeaders({
        mode: session.webhookSigning,
        secret: secrets.secret,
        previousSecret: secrets.previous,
        webhookId: row.webhook_id,
        body,
        timestamp: Math.floor(Date.now() / 1000),
      }),
    };
    if (url.username || url.password) {
      headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    }
    const timeout = new AbortController();
    // After the I/O already received: on a stalled process an answer that came in time is not a timeout.
    const cancelTimeout = timeoutAfterIo(config.timeout_ms, () => timeout.abort(new AttemptTimeout(config.timeout_ms)));
    const onShutdown = () => timeout.abort(new Interrupted());
    signal.addEventListener('abort', onShutdown, { once: true });
    try {
      return { kind: 'attempted', url: session.webhookUrl, outcome: await this.#post(url, headers, body, timeout.signal) };
    } catch (err) {
      if (timeout.signal.reason instanceof Interrupted) return { kind: 'interrupted' };
      return { kind: 'attempted', url: session.webhookUrl, outcome: failure(null, describeError(timeout.signal.aborted ? timeout.signal.reason : err)) };
    } finally {
      cancelTimeout();
      signal.removeEventListener('abort', onShutdown);
    }
  }

  async #post(url: URL, headers: Record<string, string>, body: Buffer, signal: AbortSignal): Promise<Outcome> {
    const { config } = this.#d;
    const res = await this.#d.http.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers,
      body,
      signal,
      // The attempt's own deadline (the signal, see #attempt) decides; undici's timers, plain ones, are only a backstop.
      headersTimeout: config.timeout_ms + 1000,
      bodyTimeout: config.timeout_ms + 1000,
    });
    const statusCode = res.statusCode;
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let total = 0;
    let note: string | null = null;
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        total += chunk.length;
        if (keptBytes < EXCERPT_BYTES) {
          const part = chunk.subarray(0, EXCERPT_BYTES - keptBytes);
          kept.push(part);
          keptBytes += part.length;
        }
        if (total > config.response_read_limit_bytes) {
          note = `answer body longer than ${config.response_read_limit_bytes} bytes: cut off`;
          break;
        }
      }
    } catch (err) {
      if (signal.reason instanceof Interrupted) throw err;
      note = `answer body not read to its end: ${describeError(signal.aborted ? signal.reason : err)}`;
    } finally {
      if (!res.body.destroyed && note !== null) res.body.destroy();
    }
    const response = keptBytes ? Buffer.concat(kept).toString('utf8') : null;
    if (statusCode >= 200 && statusCode < 300) return { statusCode, error: note, response, retryAfterMs: null, success: true };
    const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
    let error: string;
    if (statusCode >= 300 && statusCode < 400) {
      const location = res.headers.location;
      error = `redirect not followed: the receiver answered ${statusCode}${location ? ` to ${String(location).slice(0, 300)}` : ''}`;
    } else error = `the receiver answered ${statusCode}`;
    return { statusCode, error: note ? `${error}; ${note}` : error, response, retryAfterMs, success: false };
  }

  /**
   * Stops taking work; lets deliveries in flight finish for up to `waitMs`, cuts the rest (they
   * stay pending and go out after the restart), and writes what finished.
   */
  async close(waitMs: number): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    clearTimeout(this.#timer);
    if (this.#active > 0 && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.#idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    for (const controller of this.#controllers.values()) controller.abort();
    // Let the cut attempts settle, so none records anything after the database is closed.
    while (this.#active > 0) await new Promise((r) => setImmediate(r));
    this.#closed = true;
    while (this.#filling) await new Promise((r) => setImmediate(r));
    try {
      await this.#flushing;
      await this.#flush();
      // What this instance still holds (cut short, or claimed and not started) is free at once for another instance.
      await this.#d.store.release(this.#d.owner);
    } catch (err) {
      this.#d.log.error({ err }, 'writing the last webhook outcomes failed; those deliveries will be sent again');
    }
  }
}

type AttemptResult = { kind: 'attempted'; outcome: Outcome; url?: string } | { kind: 'dropped'; reason: string } | { kind: 'interrupted' };

class AttemptTimeout extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = 'AttemptTimeout';
  }
}

class Interrupted extends Error {
  constructor() {
    super('interrupted by shutdown');
    this.name = 'Interrupted';
  }
}

function failure(statusCode: number | null, error: string): Outcome {
  return { statusCode, error, response: null, retryAfterMs: null, success: false };
}

/** Retry-After as milliseconds: delay-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return null;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** A short, stable description of why an attempt failed. */
export function describeError(err: unknown): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: unknown } | undefined;
  if (e instanceof AttemptTimeout) return e.message;
  switch (e?.code) {
    case 'WHARF_BLOCKED_ADDRESS':
      return e.message ?? 'refused address';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'connection reset by the receiver';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name does not resolve';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'timed out connecting';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'timed out waiting for the receiver';
    case 'UND_ERR_SOCKET':
      return 'connection closed by the receiver before it answered';
    default:
      break;
  }
  if (e?.cause && e.cause !== err) {
    const inner = e.cause as { code?: string };
    if (inner.code) return describeError(e.cause);
  }
  if (e instanceof AggregateError && e.errors.length) return describeError(e.errors[0]);
  return (e?.message ?? String(err)).slice(0, 500);
}
