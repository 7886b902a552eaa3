/** The webhooks plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';
import { onPostgres } from '../sessions/migrations.ts';

/** 001-webhooks */
const S001 = `
        -- The outbox: one row per event per matching subscription, written in the transaction that
        -- records the event, and the dispatch record the API shows. body holds the exact bytes
        -- sent (and signed) on every attempt. Times are Unix milliseconds. No foreign key to the
        -- sessions plugin's tables: a plugin reaches another only through its service.
        CREATE TABLE webhooks_dispatches (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          org_id TEXT NOT NULL,
          session_id INTEGER NOT NULL,
          event_id INTEGER NOT NULL,
          webhook_id TEXT NOT NULL,
          event TEXT NOT NULL,
          url TEXT NOT NULL,
          body TEXT NOT NULL,
          status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'abandoned')),
          attempt_count INTEGER NOT NULL DEFAULT 0,
          last_status_code INTEGER,
          last_error TEXT,
          next_attempt_at INTEGER,
          redelivery_of INTEGER,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          finished_at INTEGER
        );
        -- The dispatcher's queue: due deliveries of a session, oldest first.
        CREATE INDEX webhooks_dispatches_due ON webhooks_dispatches (session_id, next_attempt_at, id) WHERE status = 'pending';
        CREATE INDEX webhooks_dispatches_by_org ON webhooks_dispatches (org_id, id);
        CREATE INDEX webhooks_dispatches_by_session ON webhooks_dispatches (org_id, session_id, id);
        CREATE INDEX webhooks_dispatches_by_event ON webhooks_dispatches (event_id);
        CREATE INDEX webhooks_dispatches_finished ON webhooks_dispatches (created_at) WHERE status != 'pending';

        -- Every completed attempt of a dispatch: status code, duration, error, first KiB of the answer.
        CREATE TABLE webhooks_attempts (
          dispatch_id INTEGER NOT NULL REFERENCES webhooks_dispatches(id) ON DELETE CASCADE,
          number INTEGER NOT NULL,
          started_at INTEGER NOT NULL,
          duration_ms INTEGER NOT NULL,
          status_code INTEGER,
          error TEXT,
          response TEXT,
          PRIMARY KEY (dispatch_id, number)
        ) WITHOUT ROWID;

        -- The webhook secret a session had before its last rotation, encrypted with the data-dir
        -- key, while it still signs deliveries (the grace period).
        CREATE TABLE webhooks_previous_secrets (
          session_id INTEGER PRIMARY KEY,
          secret_enc TEXT NOT NULL,
          expires_at INTEGER NOT NULL
        );
      `;

const LEASES = `
  ALTER TABLE webhooks_dispatches ADD COLUMN leased_by TEXT;
  ALTER TABLE webhooks_dispatches ADD COLUMN lease_until INTEGER;
`;

/**
 * PostgreSQL: a claim in one round trip (see WebhooksStore.claim). The function takes the
 * session's advisory lock for its transaction, then counts the live leases and leases the due
 * rows in statements of its own: a VOLATILE function takes a fresh snapshot for each statement
 * under READ COMMITTED, so the count sees the leases the claim before it committed (one statement
 * taking the lock in a subquery would not: its snapshot is taken before the lock is granted).
 * Refused under another isolation level, where the snapshot is the transaction's. Returns the
 * leased rows, then one row with id NULL: the live leases counted before, and, when nothing more
 * can be taken now (the session's limit reached over all instances, or fewer rows due than room),
 * when the next one can be (a due time, or the end of a lease: NULL for none).
 */
const CLAIM_FUNCTION = `
  CREATE FUNCTION webhooks_claim(p_session BIGINT, p_now BIGINT, p_until BIGINT, p_owner TEXT, p_held BIGINT[], p_limit BIGINT, p_per_session BIGINT, p_lock BIGINT)
  RETURNS TABLE (id BIGINT, session_id BIGINT, webhook_id TEXT, url TEXT, body TEXT, attempt_count BIGINT, next_attempt_at BIGINT, busy BIGINT, later BIGINT)
  LANGUAGE plpgsql VOLATILE AS $$
  #variable_conflict use_column
  DECLARE
    n_busy BIGINT;
    n_room BIGINT;
    n_taken BIGINT := 0;
    n_later BIGINT;
  BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
      RAISE EXCEPTION 'webhooks_claim needs READ COMMITTED (a fresh snapshot after the lock), not %', current_setting('transaction_isolation');
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    SELECT COUNT(*) INTO n_busy FROM webhooks_dispatches d WHERE d.session_id = p_session AND d.status = 'pending' AND d.lease_until > p_now;
    n_room := LEAST(p_limit, p_per_session - n_busy);
    IF n_room > 0 THEN
      RETURN QUERY UPDATE webhooks_dispatches d SET leased_by = p_owner, lease_until = p_until WHERE d.id IN (
          SELECT q.id FROM webhooks_dispatches q WHERE q.session_id = p_session AND q.status = 'pending' AND q.next_attempt_at <= p_now
            AND (q.lease_until IS NULL OR q.lease_until <= p_now) AND q.id <> ALL(p_held)
          ORDER BY q.next_attempt_at, q.id LIMIT n_room FOR UPDATE SKIP LOCKED)
        RETURNING d.id, d.session_id, d.webhook_id, d.url, d.body, d.attempt_count, d.next_attempt_at, NULL::BIGINT, NULL::BIGINT;
      GET DIAGNOSTICS n_taken = ROW_COUNT;
    END IF;
    IF n_busy + n_taken >= p_per_session OR n_taken < n_room THEN
      SELECT MIN(CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > d.next_attempt_at THEN d.lease_until ELSE d.next_attempt_at END) INTO n_later
        FROM webhooks_dispatches d WHERE d.session_id = p_session AND d.status = 'pending'
          AND CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > d.next_attempt_at THEN d.lease_until ELSE d.next_attempt_at END > p_now;
    END IF;
    RETURN QUERY SELECT NULL::BIGINT, NULL::BIGINT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, n_busy, n_later;
  END
  $$
`;

export const migrations: Migration[] = [
  {
    id: '001-webhooks',
    sqlite: S001,
    postgres: onPostgres(S001),
  },
  {
    // Leases: the instance delivering a pending dispatch (leased_by) and until when (lease_until,
    // Unix ms); an expired lease is taken over by another instance (see WebhooksStore.claim).
    id: '002-leases',
    sqlite: LEASES,
    postgres: onPostgres(LEASES),
  },
  {
    // The claim as one function call (one round trip instead of six, BENCHMARKS.md issue 16 part 8).
    id: '003-claim-function',
    sqlite: '-- nothing: SQLite has one process, which claims nothing',
    postgres: CLAIM_FUNCTION,
  },
  {
    // No query looks dispatches up by their event (the API shows event_id, lists by organization,
    // session and status): the index only cost every outbox write and every outcome an index entry
    // (BENCHMARKS.md, issue 16 part 11).
    id: '004-drop-by-event',
    sqlite: 'DROP INDEX IF EXISTS webhooks_dispatches_by_event',
    postgres: 'DROP INDEX IF EXISTS webhooks_dispatches_by_event',
  },
];
