/** The webhooks plugin's SQL: the outbox (dispatch records), their attempts, previous secrets. */
import type { Db } from '../../core/db.ts';
import { PostgresDb } from '../../core/db-postgres.ts';
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
   * `held` (in flight here, or finished and not written yet).
   */
  claim(
    sessionId: number,
    now: number,
    claim: { limit: number; owner: string; leaseMs: number; perSession: number; held: readonly number[] },
  ): Promise<{ rows: DueRow[]; atLimit: boolean }> {
    const { owner, held } = claim;
    const db = this.db;
    if (!(db instanceof PostgresDb)) return this.#due(sessionId, now, claim.limit, held);
    const take = async (tx: Db) => {
      // Live leases of every instance (this one's in flight included; its own limit is the caller's).
      const busy =
        (await tx.value<number>("SELECT COUNT(*) FROM webhooks_dispatches WHERE session_id = ? AND status = 'pending' AND lease_until > ?", [
          sessionId,
          now,
        ])) ?? 0;
      const room = Math.min(claim.limit, claim.perSession - busy);
      // At the session's limit over all instances: a slot freed wakes the dispatchers (see complete).
      const atLimit = claim.perSession - busy <= claim.limit;
      if (room <= 0) return { rows: [], atLimit };
      const rows = await tx.all<DueRow & { next_attempt_at: number }>(
        `UPDATE webhooks_dispatches SET leased_by = ?, lease_until = ? WHERE id IN (
           SELECT id FROM webhooks_dispatches WHERE session_id = ? AND status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
             AND id <> ALL(?::bigint[])
           ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED)
         RETURNING id, session_id, webhook_id, url, body, attempt_count, next_attempt_at`,
        [owner, now + claim.leaseMs, sessionId, now, now, held, room],
      );
      rows.sort((a, b) => a.next_attempt_at - b.next_attempt_at || a.id - b.id);
      return { rows: rows.map(({ next_attempt_at: _at, ...row }) => row), atLimit };
    };
    // One claim per session at a time over all instances: the session's advisory lock, then READ
    // COMMITTED, so the count sees the leases the claim before committed (a SERIALIZABLE snapshot
    // taken before the lock was granted would not).
    return db.withAdvisoryLock(LOCK_SPACE * 2 ** 21 + (sessionId % 2 ** 21), take);
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
    return (
      await this.db.run("UPDATE webhooks_dispatches SET lease_until = ? WHERE id = ANY(?::bigint[]) AND leased_by = ? AND status = 'pending'", [
        until,
        ids,
        owner,
      ])
    ).changes;
  }

  /** Gives back the leases `owner` holds on deliveries not finished (a shutdown): another instance takes them at once. */
  async release(owner: string): Promise<number> {
    return (await this.db.run("UPDATE webhooks_dispatches SET leased_by = NULL, lease_until = NULL WHERE leased_by = ? AND status = 'pending'", [owner]))
      .changes;
  }

  /**
   * Writes the outcomes of finished attempts, all in one transaction, and releases their leases.
   * An outcome whose lease another instance took over meanwhile (this one outlived it) is not
   * written: that instance delivers again. Returns the ids written.
   */
  complete(completions: readonly Completion[], now: number, owner: string): Promise<Set<number>> {
    return this.db.transaction(async (tx) => {
      const written = new Set<number>();
      const sessions = new Set<number>();
      for (const c of completions) {
        const changed = (
          await tx.run(
            `UPDATE webhooks_dispatches SET status = ?, attempt_count = ?, last_status_code = CASE WHEN CAST(? AS INTEGER) = 1 THEN CAST(? AS INTEGER) ELSE last_status_code END, last_error = ?,
               next_attempt_at = ?, url = COALESCE(?, url), updated_at = ?, finished_at = ?, leased_by = NULL, lease_until = NULL
             WHERE id = ? AND status = 'pending' AND (leased_by IS NULL OR leased_by = ?)`,
            [
              c.status,
              c.number,
              c.recordAttempt ? 1 : 0,
              c.statusCode,
              c.status === 'delivered' ? null : c.error,
              c.status === 'pending' ? c.nextAttemptAt : null,
              c.url,
              now,
              c.status === 'pending' ? null : now,
              c.dispatchId,
              owner,
            ],
          )
        ).changes;
        if (!changed) continue;
        written.add(c.dispatchId);
        sessions.add(c.sessionId);
        if (c.recordAttempt) {
          await tx.run(
            'INSERT INTO webhooks_attempts (dispatch_id, number, started_at, duration_ms, status_code, error, response) VALUES (?, ?, ?, ?, ?, ?, ?)',
            [c.dispatchId, c.number, c.startedAt, c.durationMs, c.statusCode, c.error, c.response],
          );
        }
      }
      // A slot of each of these sessions is free: every instance's dispatcher may take the next (at the commit).
      if (tx.engine === 'postgres') for (const sessionId of sessions) await tx.run('SELECT pg_notify(?, ?)', [WAKE_CHANNEL, String(sessionId)]);
      return written;
    });
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
