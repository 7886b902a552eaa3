/** The webhooks plugin's SQL: the outbox (dispatch records), their attempts, previous secrets. */
import type { Db } from '../../core/db.ts';
import type { EventRowTable } from '../sessions/types.ts';

export type DispatchStatus = 'pending' | 'delivered' | 'abandoned';

export interface DispatchRow {
  id: number;
  org_id: string;
  session_id: number;
  event_id: number;
  webhook_id: string;
  event: string;
  url: string;
  status: DispatchStatus;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: number | null;
  redelivery_of: number | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** What the dispatcher needs to make an attempt. */
export interface DueRow {
  id: number;
  session_id: number;
  webhook_id: string;
  url: string;
  body: string;
  attempt_count: number;
}

export interface AttemptRow {
  dispatch_id: number;
  number: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response: string | null;
}

/** The outcome of one attempt, written with the dispatch's new state (and its lease released) in one statement pair. */
export interface Completion {
  dispatchId: number;
  sessionId: number;
  /** The attempt's number (1-based). */
  number: number;
  startedAt: number;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  response: string | null;
  /** The dispatch's state after this attempt. */
  status: DispatchStatus;
  /** For a pending dispatch: when the next attempt is due. */
  nextAttemptAt: number | null;
  /** Where the attempt went (the session's URL at the time), or null to leave the record's as is. */
  url: string | null;
  /** False when nothing was sent (the delivery was dropped): no attempt row, the count unchanged. */
  recordAttempt: boolean;
}

export interface ListFilter {
  orgId: string;
  sessionId?: number;
  status?: DispatchStatus;
  event?: string;
  /** created_at >= from (Unix ms). */
  from?: number;
  /** created_at < to (Unix ms). */
  to?: number;
}

/** The high bits of the advisory lock a claim takes per session ("whkd"; the session id in the low 21 bits). */
const LOCK_SPACE = 0x77686b64;

/** The advisory lock a claim of this session's deliveries holds (PostgreSQL). */
export const claimLockKey = (sessionId: number) => LOCK_SPACE * 2 ** 21 + (sessionId % 2 ** 21);

/** The channel an instance announces new deliveries on (PostgreSQL NOTIFY, payload: the session id). */
export const WAKE_CHANNEL = 'wharf_webhooks';

/** A delivery to write into the outbox (beside the event's id). */
export interface NewDispatch {
  orgId: string;
  sessionId: number;
  webhookId: string;
  event: string;
  url: string;
  body: string;
  redeliveryOf?: number;
}

/**
 * The outbox as the sessions plugin writes it with each event (`onEventRow`), in the statement
 * recording the events; a row's values are {@link outboxRow}'s. On PostgreSQL every instance's
 * dispatcher wakes at the commit (the NOTIFY is delivered then, or never).
 */
export const OUTBOX: EventRowTable = {
  name: 'webhooks_dispatches',
  columns: [
    ['org_id', 'text'],
    ['session_id', 'bigint'],
    ['webhook_id', 'text'],
    ['event', 'text'],
    ['url', 'text'],
    ['body', 'text'],
    ['status', 'text'],
    ['next_attempt_at', 'bigint'],
    ['redelivery_of', 'bigint'],
    ['created_at', 'bigint'],
    ['updated_at', 'bigint'],
  ],
  eventId: 'event_id',
  notify: { channel: WAKE_CHANNEL, column: 'session_id' },
};

/** The values of a pending delivery, in the order of {@link OUTBOX}'s columns, due at `now`. */
export function outboxRow(input: NewDispatch, now: number): unknown[] {
  return [input.orgId, input.sessionId, input.webhookId, input.event, input.url, input.body, 'pending', now, input.redeliveryOf ?? null, now, now];
}

const ENQUEUE = `INSERT INTO ${OUTBOX.name} (${OUTBOX.columns.map(([name]) => name).join(', ')}, ${OUTBOX.eventId})
  VALUES (${OUTBOX.columns.map(() => '?').join(', ')}, ?)`;
const ENQUEUE_NOTIFY = `WITH written AS (${ENQUEUE} RETURNING id) SELECT id, pg_notify(?, ?) FROM written`;

/** When a pending delivery can next be taken: its due time, or its lease's end if that is later. */
const TAKEABLE_AT = 'CASE WHEN lease_until IS NOT NULL AND lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END';

const COLUMNS = `id, org_id, session_id, event_id, webhook_id, event, url, status, attempt_count, last_status_code, last_error,
  next_attempt_at, redelivery_of, created_at, updated_at, finished_at`;

/** What a dispatch row says after an attempt with this outcome. */
function outcomeOf(c: Completion, now: number): { lastError: string | null; nextAttemptAt: number | null; finishedAt: number | null } {
  return {
    lastError: c.status === 'delivered' ? null : c.error,
    nextAttemptAt: c.status === 'pending' ? c.nextAttemptAt : null,
    finishedAt: c.status === 'pending' ? null : now,
  };
}

/**
 * PostgreSQL: a batch of outcomes in one statement (see WebhooksStore.complete). The NOTIFYs are
 * an uncorrelated subquery, run once when the first written row is returned (none when nothing
 * was written).
 */
const COMPLETE_ALL = `WITH input AS (
    SELECT * FROM unnest(?::bigint[], ?::text[], ?::bigint[], ?::boolean[], ?::bigint[], ?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::bigint[])
      AS t(id, status, number, record, status_code, last_error, next_attempt_at, url, started_at, duration_ms, error, response, finished_at)
  ), written AS (
    UPDATE webhooks_dispatches d SET status = i.status, attempt_count = i.number,
        last_status_code = CASE WHEN i.record THEN i.status_code ELSE d.last_status_code END, last_error = i.last_error,
        next_attempt_at = i.next_attempt_at, url = COALESCE(i.url, d.url), updated_at = ?, finished_at = i.finished_at, leased_by = NULL, lease_until = NULL
      FROM input i
      WHERE d.id = i.id AND d.status = 'pending' AND (d.leased_by IS NULL OR d.leased_by = ?)
      RETURNING d.id, d.session_id
  ), attempts AS (
    INSERT INTO webhooks_attempts (dispatch_id, number, started_at, duration_ms, status_code, error, response)
      SELECT i.id, i.number, i.started_at, i.duration_ms, i.status_code, i.error, i.response FROM input i JOIN written w ON w.id = i.id WHERE i.record
  )
  SELECT w.id, (SELECT COUNT(pg_notify(?, s.session_id::text)) FROM (SELECT DISTINCT session_id FROM written) s) AS notified FROM written w`;

/**
 * On the data layer, either engine. On PostgreSQL (instances may share the outbox) a delivery is
 * taken with a lease (`leased_by`, `lease_until`):
 * `claim` takes due deliveries of a session that no live lease holds, at most what the session's
 * concurrency leaves over all instances; an expired lease (its instance died) is taken over. On
 * PostgreSQL the claim locks the session (an advisory transaction lock) and skips rows another
 * transaction holds (`FOR UPDATE SKIP LOCKED`), so two instances never take one delivery at once.
 */
export class WebhooksStore {
  readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  /** Writes a delivery into the outbox with `db` (a redelivery; an event's is written with it, see {@link OUTBOX}). */
  async enqueue(input: NewDispatch & { eventId: number }, now: number, db: Db = this.db): Promise<number> {
    const values = [...outboxRow(input, now), input.eventId];
    // PostgreSQL: every instance's dispatcher wakes at the commit, NOTIFYed by the same statement.
    if (db.engine === 'postgres') return (await db.value<number>(ENQUEUE_NOTIFY, [...values, WAKE_CHANNEL, String(input.sessionId)]))!;
    return (await db.value<number>(`${ENQUEUE} RETURNING id`, values))!;
  }

  /**
   * Takes up to `limit` due deliveries of a session for `owner` until `now + leaseMs`, oldest
   * first, within what `perSession` leaves beside the live leases of every instance, skipping
   * `held` (in flight here, or finished and not written yet). `atLimit`: the session has no room
   * left over all instances once these are taken. `later` (PostgreSQL, when `atLimit` or fewer rows were due than
   * room): when the session's next delivery not takeable now can be taken, as `nextDue` says.
   */
  async claim(
    sessionId: number,
    now: number,
    claim: { limit: number; owner: string; leaseMs: number; perSession: number; held: readonly number[] },
  ): Promise<{ rows: DueRow[]; atLimit: boolean; later?: number | null }> {
    const db = this.db;
    if (db.engine !== 'postgres') return this.#due(sessionId, now, claim.limit, claim.held);
    // One round trip (migration 003-claim-function): under the session's advisory lock (one claim
    // per session at a time over all instances), the live leases of every instance counted with
    // a snapshot taken after the lock, so the count sees the leases the claim before committed;
    // then the due rows leased (`FOR UPDATE SKIP LOCKED`), then the next takeable time if needed.
    const result = await db.all<DueRow & { next_attempt_at: number; busy: number | null; later: number | null }>(
      'SELECT * FROM webhooks_claim(?, ?, ?, ?, ?::bigint[], ?, ?, ?)',
      [sessionId, now, now + claim.leaseMs, claim.owner, claim.held, claim.limit, claim.perSession, claimLockKey(sessionId)],
    );
    const meta = result.find((row) => row.id === null)!;
    const rows = result.filter((row) => row.id !== null);
    // The session's limit reached over all instances with what this claim took: a slot freed
    // wakes the dispatchers (see complete).
    const atLimit = meta.busy! + rows.length >= claim.perSession;
    rows.sort((a, b) => a.next_attempt_at - b.next_attempt_at || a.id - b.id);
    return {
      rows: rows.map(({ id, session_id, webhook_id, url, body, attempt_count }) => ({ id, session_id, webhook_id, url, body, attempt_count })),
      atLimit,
      later: meta.later,
    };
  }

  /**
   * SQLite, one process: due deliveries read as they are, no lease written (what is in flight is
   * held in the dispatcher's memory; the hot path stays one read). The held ones are skipped here.
   */
  async #due(sessionId: number, now: number, limit: number, held: readonly number[]): Promise<{ rows: DueRow[]; atLimit: boolean }> {
    const rows = await this.db.all<DueRow>(
      `SELECT id, session_id, webhook_id, url, body, attempt_count FROM webhooks_dispatches
       WHERE session_id = ? AND status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
      [sessionId, now, limit + held.length],
    );
    const skip = new Set(held);
    return { rows: rows.filter((r) => !skip.has(r.id)).slice(0, limit), atLimit: false };
  }

  /** When the session's next delivery not takeable now can be taken (its due time or its lease's end), or null. */
  async nextDue(sessionId: number, now: number): Promise<number | null> {
    return (
      (await this.db.value<number | null>(
        `SELECT MIN(${TAKEABLE_AT}) FROM webhooks_dispatches WHERE session_id = ? AND status = 'pending' AND ${TAKEABLE_AT} > ?`,
        [sessionId, now],
      )) ?? null
    );
  }

  /** Every session with pending deliveries and the earliest time one of them can be taken. */
  dueBySession(): Promise<{ session_id: number; due: number }[]> {
    return this.db.all<{ session_id: number; due: number }>(
      `SELECT session_id, MIN(${TAKEABLE_AT}) AS due FROM webhooks_dispatches WHERE status = 'pending' GROUP BY session_id`,
    );
  }

  /**
   * Extends to `until` the leases `owner` still holds on the deliveries `ids` (in flight, or
   * finished and not written yet): the heartbeat of a live instance, so that a slow attempt or a
   * delayed write never lets another instance take a delivery this one is still sending. A lease
   * another instance took meanwhile is left alone. Returns how many were renewed. PostgreSQL only
   * (SQLite's dispatcher writes no leases).
   */
  async renew(ids: readonly number[], owner: string, until: number): Promise<number> {
    if (ids.length === 0) return 0;
    // Rows locked now are skipped, never waited for: a batch of outcomes writing them (releasing
    // their leases) locks several in its own order, and waiting here could deadlock with it. A
    // lease skipped once is renewed at the next heartbeat, a third of a lease later.
    return (
      await this.db.run(
        `UPDATE webhooks_dispatches SET lease_until = ? WHERE id IN (
           SELECT id FROM webhooks_dispatches WHERE id = ANY(?::bigint[]) AND leased_by = ? AND status = 'pending' FOR UPDATE SKIP LOCKED)`,
        [until, ids, owner],
      )
    ).changes;
  }

  /** Gives back the leases `owner` holds on deliveries not finished (a shutdown): another instance takes them at once. */
  async release(owner: string): Promise<number> {
    return (await this.db.run("UPDATE webhooks_dispatches SET leased_by = NULL, lease_until = NULL WHERE leased_by = ? AND status = 'pending'", [owner]))
      .changes;
  }

  /**
   * Writes the outcomes of finished attempts, all at once (one transaction), and releases their
   * leases. An outcome whose lease another instance took over meanwhile (this one outlived it) is
   * not written: that instance delivers again. Returns the ids written. On PostgreSQL the whole
   * batch is one statement (the outcomes as arrays): one round trip, whatever its size.
   */
  complete(completions: readonly Completion[], now: number, owner: string): Promise<Set<number>> {
    if (completions.length === 0) return Promise.resolve(new Set());
    if (this.db.engine === 'postgres') return this.#completeAll(completions, now, owner);
    return this.db.transaction(async (tx) => {
      const written = new Set<number>();
      for (const c of completions) {
        const o = outcomeOf(c, now);
        const changed = (
          await tx.run(
            `UPDATE webhooks_dispatches SET status = ?, attempt_count = ?, last_status_code = CASE WHEN CAST(? AS INTEGER) = 1 THEN CAST(? AS INTEGER) ELSE last_status_code END, last_error = ?,
               next_attempt_at = ?, url = COALESCE(?, url), updated_at = ?, finished_at = ?, leased_by = NULL, lease_until = NULL
             WHERE id = ? AND status = 'pending' AND (leased_by IS NULL OR leased_by = ?)`,
            [c.status, c.number, c.recordAttempt ? 1 : 0, c.statusCode, o.lastError, o.nextAttemptAt, c.url, now, o.finishedAt, c.dispatchId, owner],
          )
        ).changes;
        if (!changed) continue;
        written.add(c.dispatchId);
        if (c.recordAttempt) {
          await tx.run(
            'INSERT INTO webhooks_attempts (dispatch_id, number, started_at, duration_ms, status_code, error, response) VALUES (?, ?, ?, ?, ?, ?, ?)',
            [c.dispatchId, c.number, c.startedAt, c.durationMs, c.statusCode, c.error, c.response],
          );
        }
      }
      return written;
    });
  }

  /**
   * PostgreSQL: the batch in one statement, atomic as any statement (every outcome of it is
   * written, or none): the dispatches updated from the arrays, their attempt rows inserted, and a
   * NOTIFY per session whose slot freed (delivered at the commit: every instance's dispatcher may
   * take the next). A statement that fails writes nothing; the dispatcher keeps the outcomes and
   * their leases and writes them again. No outcome is ever lost: until this statement commits,
   * each delivery stays pending with its lease, so a crash before then (of the process, or of the
   * database) means that the batch's deliveries are sent again once their leases expire, by any
   * instance, which the at-least-once contract allows (same webhook-id).
   */
  async #completeAll(completions: readonly Completion[], now: number, owner: string): Promise<Set<number>> {
    const outcomes = completions.map((c) => outcomeOf(c, now));
    const ids = await this.db.all<{ id: number }>(COMPLETE_ALL, [
      completions.map((c) => c.dispatchId),
      completions.map((c) => c.status),
      completions.map((c) => c.number),
      completions.map((c) => c.recordAttempt),
      completions.map((c) => c.statusCode),
      outcomes.map((o) => o.lastError),
      outcomes.map((o) => o.nextAttemptAt),
      completions.map((c) => c.url),
      completions.map((c) => c.startedAt),
      completions.map((c) => c.durationMs),
      completions.map((c) => c.error),
      completions.map((c) => c.response),
      outcomes.map((o) => o.finishedAt),
      now,
      owner,
      WAKE_CHANNEL,
    ]);
    return new Set(ids.map((row) => row.id));
  }

  /** Abandons every pending delivery of a session (it was deleted). */
  async abandonSession(sessionId: number, reason: string, now: number): Promise<number> {
    return (
      await this.db.run(
        `UPDATE webhooks_dispatches SET status = 'abandoned', last_error = ?, next_attempt_at = NULL, updated_at = ?, finished_at = ?, leased_by = NULL, lease_until = NULL
         WHERE session_id = ? AND status = 'pending'`,
        [reason, now, now, sessionId],
      )
    ).changes;
  }

  get(id: number, orgId: string): Promise<DispatchRow | undefined> {
    return this.db.one<DispatchRow>(`SELECT ${COLUMNS} FROM webhooks_dispatches WHERE id = ? AND org_id = ?`, [id, orgId]);
  }

  body(id: number): Promise<string | undefined> {
    return this.db.value<string>('SELECT body FROM webhooks_dispatches WHERE id = ?', [id]);
  }

  attempts(dispatchId: number): Promise<AttemptRow[]> {
    return this.db.all<AttemptRow>('SELECT * FROM webhooks_attempts WHERE dispatch_id = ? ORDER BY number', [dispatchId]);
  }

  async list(filter: ListFilter, page: number, perPage: number): Promise<{ rows: DispatchRow[]; total: number }> {
    const where = ['org_id = ?'];
    const args: unknown[] = [filter.orgId];
    if (filter.sessionId !== undefined) {
      where.push('session_id = ?');
      args.push(filter.sessionId);
    }
    if (filter.status !== undefined) {
      where.push('status = ?');
      args.push(filter.status);
    }
    if (filter.event !== undefined) {
      where.push('event = ?');
      args.push(filter.event);
    }
    if (filter.from !== undefined) {
      where.push('created_at >= ?');
      args.push(filter.from);
    }
    if (filter.to !== undefined) {
      where.push('created_at < ?');
      args.push(filter.to);
    }
    const clause = where.join(' AND ');
    const total = (await this.db.value<number>(`SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE ${clause}`, args)) ?? 0;
    const rows = await this.db.all<DispatchRow>(`SELECT ${COLUMNS} FROM webhooks_dispatches WHERE ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`, [
      ...args,
      perPage,
      (page - 1) * perPage,
    ]);
    return { rows, total };
  }

  /** Deletes finished dispatch records created before `before` (with their attempts) and expired previous secrets. */
  async prune(before: number, now: number): Promise<number> {
    const n = (await this.db.run("DELETE FROM webhooks_dispatches WHERE status != 'pending' AND created_at < ?", [before])).changes;
    await this.db.run('DELETE FROM webhooks_previous_secrets WHERE expires_at <= ?', [now]);
    return n;
  }

  /** Keeps a rotated-out secret (encrypted) until `expiresAt`, with `db`: the rotating transaction's. */
  async setPreviousSecret(sessionId: number, secretEnc: string, expiresAt: number, db: Db = this.db): Promise<void> {
    await db.run(
      'INSERT INTO webhooks_previous_secrets (session_id, secret_enc, expires_at) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET secret_enc = excluded.secret_enc, expires_at = excluded.expires_at',
      [sessionId, secretEnc, expiresAt],
    );
  }

  /** The previous webhook secret of a session (encrypted) and until when it signs, while it does. */
  previousSecret(sessionId: number, now: number): Promise<{ secret_enc: string; expires_at: number } | undefined> {
    return this.db.one<{ secret_enc: string; expires_at: number }>(
      'SELECT secret_enc, expires_at FROM webhooks_previous_secrets WHERE session_id = ? AND expires_at > ?',
      [sessionId, now],
    );
  }
}
