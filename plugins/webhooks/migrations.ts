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
];
