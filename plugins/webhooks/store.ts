/** The webhooks plugin's SQL: the outbox (dispatch records), their attempts, previous secrets. */
import type { Database } from '../../core/db.ts';

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

/** The outcome of one attempt, written with the dispatch's new state in one statement pair. */
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

const COLUMNS = `id, org_id, session_id, event_id, webhook_id, event, url, status, attempt_count, last_status_code, last_error,
  next_attempt_at, redelivery_of, created_at, updated_at, finished_at`;

export class WebhooksStore {
  readonly db: Database;
  readonly #s;

  constructor(db: Database) {
    this.db = db;
    this.#s = {
      insert: db.prepare(
        `INSERT INTO webhooks_dispatches (org_id, session_id, event_id, webhook_id, event, url, body, status, next_attempt_at, redelivery_of, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)`,
      ),
      due: db.prepare(
        `SELECT id, session_id, webhook_id, url, body, attempt_count FROM webhooks_dispatches
         WHERE session_id = ? AND status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
      ),
      nextDue: db.prepare("SELECT MIN(next_attempt_at) AS due FROM webhooks_dispatches WHERE session_id = ? AND status = 'pending' AND next_attempt_at > ?"),
      dueBySession: db.prepare("SELECT session_id, MIN(next_attempt_at) AS due FROM webhooks_dispatches WHERE status = 'pending' GROUP BY session_id"),
      attempt: db.prepare(
        'INSERT INTO webhooks_attempts (dispatch_id, number, started_at, duration_ms, status_code, error, response) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      complete: db.prepare(
        `UPDATE webhooks_dispatches SET status = ?, attempt_count = ?, last_status_code = CASE ? WHEN 1 THEN ? ELSE last_status_code END, last_error = ?,
           next_attempt_at = ?, url = COALESCE(?, url), updated_at = ?, finished_at = ? WHERE id = ? AND status = 'pending'`,
      ),
      abandonSession: db.prepare(
        `UPDATE webhooks_dispatches SET status = 'abandoned', last_error = ?, next_attempt_at = NULL, updated_at = ?, finished_at = ?
         WHERE session_id = ? AND status = 'pending'`,
      ),
      get: db.prepare(`SELECT ${COLUMNS} FROM webhooks_dispatches WHERE id = ? AND org_id = ?`),
      body: db.prepare('SELECT body FROM webhooks_dispatches WHERE id = ?'),
      attempts: db.prepare('SELECT * FROM webhooks_attempts WHERE dispatch_id = ? ORDER BY number'),
      prune: db.prepare("DELETE FROM webhooks_dispatches WHERE status != 'pending' AND created_at < ?"),
      setPrevious: db.prepare(
        'INSERT INTO webhooks_previous_secrets (session_id, secret_enc, expires_at) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET secret_enc = excluded.secret_enc, expires_at = excluded.expires_at',
      ),
      previous: db.prepare('SELECT secret_enc, expires_at FROM webhooks_previous_secrets WHERE session_id = ? AND expires_at > ?'),
      prunePrevious: db.prepare('DELETE FROM webhooks_previous_secrets WHERE expires_at <= ?'),
    };
  }

  enqueue(
    input: { orgId: string; sessionId: number; eventId: number; webhookId: string; event: string; url: string; body: string; redeliveryOf?: number },
    now: number,
  ): number {
    const info = this.#s.insert.run(
      input.orgId,
      input.sessionId,
      input.eventId,
      input.webhookId,
      input.event,
      input.url,
      input.body,
      now,
      input.redeliveryOf ?? null,
      now,
      now,
    );
    return Number(info.lastInsertRowid);
  }

  /** Due deliveries of a session, oldest first (including those in flight, which the caller skips). */
  due(sessionId: number, now: number, limit: number): DueRow[] {
    return this.#s.due.all(sessionId, now, limit) as DueRow[];
  }

  /** When the session's next not-yet-due delivery is due, or null. */
  nextDue(sessionId: number, now: number): number | null {
    return (this.#s.nextDue.get(sessionId, now) as { due: number | null }).due;
  }

  /** Every session with pending deliveries and the earliest due time of each. */
  dueBySession(): { session_id: number; due: number }[] {
    return this.#s.dueBySession.all() as { session_id: number; due: number }[];
  }

  /** Writes the outcomes of finished attempts, all in one transaction. */
  complete(completions: readonly Completion[], now: number): void {
    this.db.transaction(() => {
      for (const c of completions) {
        const changed = this.#s.complete.run(
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
        ).changes;
        if (changed && c.recordAttempt) this.#s.attempt.run(c.dispatchId, c.number, c.startedAt, c.durationMs, c.statusCode, c.error, c.response);
      }
    })();
  }

  /** Abandons every pending delivery of a session (it was deleted). */
  abandonSession(sessionId: number, reason: string, now: number): number {
    return this.#s.abandonSession.run(reason, now, now, sessionId).changes;
  }

  get(id: number, orgId: string): DispatchRow | undefined {
    return this.#s.get.get(id, orgId) as DispatchRow | undefined;
  }

  body(id: number): string | undefined {
    return (this.#s.body.get(id) as { body: string } | undefined)?.body;
  }

  attempts(dispatchId: number): AttemptRow[] {
    return this.#s.attempts.all(dispatchId) as AttemptRow[];
  }

  list(filter: ListFilter, page: number, perPage: number): { rows: DispatchRow[]; total: number } {
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
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE ${clause}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT ${COLUMNS} FROM webhooks_dispatches WHERE ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`)
      .all(...args, perPage, (page - 1) * perPage) as DispatchRow[];
    return { rows, total };
  }

  /** Deletes finished dispatch records created before `before` (with their attempts) and expired previous secrets. */
  prune(before: number, now: number): number {
    const n = this.#s.prune.run(before).changes;
    this.#s.prunePrevious.run(now);
    return n;
  }

  setPreviousSecret(sessionId: number, secretEnc: string, expiresAt: number): void {
    this.#s.setPrevious.run(sessionId, secretEnc, expiresAt);
  }

  /** The previous webhook secret of a session (encrypted) and until when it signs, while it does. */
  previousSecret(sessionId: number, now: number): { secret_enc: string; expires_at: number } | undefined {
    return this.#s.previous.get(sessionId, now) as { secret_enc: string; expires_at: number } | undefined;
  }
}
