/** The sessions plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';

export const migrations: Migration[] = [
  {
    id: '001-sessions',
    up(db) {
      db.exec(`
        -- Messaging sessions. Secrets are stored encrypted with the data-dir key (context bound
        -- to the session id); the API key is also stored as SHA-256 for lookup.
        CREATE TABLE sessions_sessions (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          org_id TEXT NOT NULL,
          type TEXT NOT NULL CHECK (type IN ('whatsapp', 'sandbox')),
          name TEXT NOT NULL,
          phone_number TEXT NOT NULL,
          status TEXT NOT NULL,
          account_protection INTEGER NOT NULL DEFAULT 0,
          log_messages INTEGER NOT NULL DEFAULT 1,
          webhook_url TEXT,
          webhook_enabled INTEGER NOT NULL DEFAULT 0,
          webhook_events TEXT,
          webhook_secret_enc TEXT NOT NULL,
          webhook_signing TEXT NOT NULL DEFAULT 'secret' CHECK (webhook_signing IN ('secret', 'hmac')),
          read_incoming_messages INTEGER NOT NULL DEFAULT 0,
          auto_reject_calls INTEGER NOT NULL DEFAULT 0,
          ignore_groups INTEGER NOT NULL DEFAULT 0,
          ignore_channels INTEGER NOT NULL DEFAULT 0,
          ignore_broadcasts INTEGER NOT NULL DEFAULT 0,
          always_online INTEGER NOT NULL DEFAULT 0,
          proxy_url_enc TEXT,
          api_key_enc TEXT NOT NULL,
          api_key_hash TEXT NOT NULL UNIQUE,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL,
          UNIQUE (org_id, phone_number)
        );
        CREATE INDEX sessions_sessions_by_org ON sessions_sessions (org_id, id);

        -- Personal access tokens: only the SHA-256 of the token is kept.
        CREATE TABLE sessions_pats (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          org_id TEXT NOT NULL,
          user_id TEXT NOT NULL,
          name TEXT NOT NULL,
          token_hash TEXT NOT NULL UNIQUE,
          hint TEXT NOT NULL,
          created_by TEXT NOT NULL,
          created_at TEXT NOT NULL,
          last_used_at TEXT,
          expires_at TEXT,
          revoked_at TEXT
        );
        CREATE INDEX sessions_pats_by_org ON sessions_pats (org_id, id);

        -- Outgoing messages (the message log). request/message hold content only when the
        -- session logs messages; the key and status are always kept (message info, edit, delete).
        CREATE TABLE sessions_messages (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          key_id TEXT NOT NULL,
          jid TEXT NOT NULL,
          recipient TEXT NOT NULL,
          type TEXT NOT NULL,
          status TEXT NOT NULL,
          remote_key TEXT NOT NULL,
          request TEXT,
          message TEXT,
          error TEXT,
          attempts INTEGER NOT NULL DEFAULT 1,
          message_timestamp INTEGER,
          deleted_at TEXT,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX sessions_messages_by_key ON sessions_messages (session_id, key_id);
        CREATE INDEX sessions_messages_by_session ON sessions_messages (session_id, id);

        -- Every event of every session, as delivered: payload is {event, sessionId, timestamp, data}.
        CREATE TABLE sessions_events (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id INTEGER NOT NULL,
          org_id TEXT NOT NULL,
          event TEXT NOT NULL,
          payload TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_events_by_session ON sessions_events (session_id, id);
        CREATE INDEX sessions_events_by_time ON sessions_events (created_at);

        -- Connection history (WasenderAPI's session logs).
        CREATE TABLE sessions_status_logs (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          event_type TEXT NOT NULL,
          status TEXT NOT NULL,
          reason TEXT,
          occurred_at TEXT NOT NULL
        );
        CREATE INDEX sessions_status_logs_by_session ON sessions_status_logs (session_id, id);

        -- Who did what to a session. Kept when the session is deleted.
        CREATE TABLE sessions_audit_logs (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id INTEGER NOT NULL,
          org_id TEXT NOT NULL,
          action TEXT NOT NULL,
          actor_kind TEXT NOT NULL,
          actor_id TEXT,
          user_id TEXT,
          details TEXT,
          address TEXT,
          created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_audit_logs_by_session ON sessions_audit_logs (session_id, id);

        -- The sandbox network's state, per organization.
        CREATE TABLE sessions_sandbox_lids (
          pn TEXT PRIMARY KEY,
          lid TEXT NOT NULL UNIQUE
        );
        CREATE TABLE sessions_sandbox_messages (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          key_id TEXT NOT NULL,
          from_me INTEGER NOT NULL,
          chat TEXT NOT NULL,
          remote_key TEXT NOT NULL,
          message TEXT NOT NULL,
          origin_session_id INTEGER,
          read_at TEXT,
          created_at TEXT NOT NULL,
          PRIMARY KEY (session_id, key_id)
        );
        CREATE INDEX sessions_sandbox_messages_by_key ON sessions_sandbox_messages (key_id);
        CREATE TABLE sessions_sandbox_contacts (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          jid TEXT NOT NULL,
          name TEXT,
          notify TEXT,
          blocked INTEGER NOT NULL DEFAULT 0,
          updated_at TEXT NOT NULL,
          PRIMARY KEY (session_id, jid)
        );
        CREATE TABLE sessions_sandbox_groups (
          jid TEXT PRIMARY KEY,
          org_id TEXT NOT NULL,
          subject TEXT NOT NULL,
          description TEXT,
          owner_jid TEXT,
          announce INTEGER NOT NULL DEFAULT 0,
          restrict_info INTEGER NOT NULL DEFAULT 0,
          invite_code TEXT NOT NULL UNIQUE,
          created_at TEXT NOT NULL
        );
        CREATE TABLE sessions_sandbox_group_members (
          group_jid TEXT NOT NULL REFERENCES sessions_sandbox_groups(jid) ON DELETE CASCADE,
          jid TEXT NOT NULL,
          admin TEXT,
          PRIMARY KEY (group_jid, jid)
        );
        -- Media bytes: uploads (plain) and the sandbox CDN's encrypted copies.
        CREATE TABLE sessions_sandbox_media (
          id TEXT PRIMARY KEY,
          org_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('upload', 'cdn')),
          mimetype TEXT NOT NULL,
          file_name TEXT,
          bytes BLOB NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_sandbox_media_by_time ON sessions_sandbox_media (created_at);
      `);
    },
  },
  {
    id: '002-media-urls',
    up(db) {
      db.exec(`
        -- Public, expiring media URLs: uploads (GET /api/media/{id}; the network adapter keeps
        -- the bytes, so bytes is NULL) and decrypted media (GET /api/decrypted-media/{id}; the
        -- plaintext is kept here). The id is unguessable: it is the only credential of the URL.
        CREATE TABLE sessions_media (
          id TEXT PRIMARY KEY,
          kind TEXT NOT NULL CHECK (kind IN ('upload', 'decrypted')),
          org_id TEXT NOT NULL,
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          mimetype TEXT NOT NULL,
          file_name TEXT,
          size INTEGER NOT NULL,
          bytes BLOB,
          expires_at TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_media_by_expiry ON sessions_media (expires_at);
      `);
    },
  },
  {
    id: '003-whatsapp',
    up(db) {
      db.exec(`
        -- The WhatsApp network's state (Baileys), per session; every row goes with its session.
        -- The paired account: Baileys' credentials, encrypted with the data-dir key (context bound
        -- to the session), whether pairing completed, whether to reconnect at start, who it is.
        CREATE TABLE sessions_whatsapp_accounts (
          session_id INTEGER PRIMARY KEY REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          creds_enc TEXT NOT NULL,
          registered INTEGER NOT NULL DEFAULT 0,
          resume INTEGER NOT NULL DEFAULT 0,
          me_jid TEXT,
          me_lid TEXT,
          me_name TEXT,
          updated_at TEXT NOT NULL
        );
        -- Signal keys (pre-keys, sessions, sender keys, app-state keys, LID mappings, ...), each
        -- encrypted with the data-dir key, bound to (session, type, id). A set is one transaction.
        CREATE TABLE sessions_whatsapp_keys (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          type TEXT NOT NULL,
          id TEXT NOT NULL,
          value_enc TEXT NOT NULL,
          PRIMARY KEY (session_id, type, id)
        ) WITHOUT ROWID;
        -- Messages sent and received, bounded per session: WhatsApp's retry requests, replies,
        -- poll votes and media re-requests read them; msg_id links a send to the message log,
        -- acked says the server acknowledged it (the log row was moved to sent).
        CREATE TABLE sessions_whatsapp_messages (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          key_id TEXT NOT NULL,
          remote_jid TEXT NOT NULL,
          from_me INTEGER NOT NULL,
          msg_id INTEGER,
          acked INTEGER NOT NULL DEFAULT 0,
          key TEXT NOT NULL,
          message BLOB,
          timestamp INTEGER NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX sessions_whatsapp_messages_by_key ON sessions_whatsapp_messages (session_id, key_id);
        CREATE INDEX sessions_whatsapp_messages_by_time ON sessions_whatsapp_messages (created_at);
        -- LID <-> phone number, as the network revealed them to this session.
        CREATE TABLE sessions_whatsapp_lids (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          lid TEXT NOT NULL,
          pn TEXT NOT NULL,
          PRIMARY KEY (session_id, lid)
        ) WITHOUT ROWID;
        CREATE INDEX sessions_whatsapp_lids_by_pn ON sessions_whatsapp_lids (session_id, pn);
        CREATE TABLE sessions_whatsapp_contacts (
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          jid TEXT NOT NULL,
          lid TEXT,
          name TEXT,
          notify TEXT,
          img_url TEXT,
          blocked INTEGER NOT NULL DEFAULT 0,
          updated_at TEXT NOT NULL,
          PRIMARY KEY (session_id, jid)
        ) WITHOUT ROWID;
        -- Files uploaded to send later (POST /api/upload); pruned after upload_ttl_hours.
        CREATE TABLE sessions_whatsapp_uploads (
          id TEXT PRIMARY KEY,
          org_id TEXT NOT NULL,
          session_id INTEGER NOT NULL REFERENCES sessions_sessions(id) ON DELETE CASCADE,
          mimetype TEXT NOT NULL,
          file_name TEXT,
          bytes BLOB NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX sessions_whatsapp_uploads_by_time ON sessions_whatsapp_uploads (created_at);
      `);
    },
  },
  {
    id: '004-status-reason',
    up(db) {
      db.exec(`
        -- Why the session has its status (the reason of its last status change or reconnect
        -- attempt), shown as status_reason: the session log keeps the history, this the latest.
        ALTER TABLE sessions_sessions ADD COLUMN status_reason TEXT;
      `);
    },
  },
  {
    id: '005-log-retention',
    up(db) {
      db.exec(`
        -- The hourly prune deletes session and audit logs by age (session_log_retention_days,
        -- audit_log_retention_days): a session failing to connect writes a row per attempt.
        CREATE INDEX sessions_status_logs_by_time ON sessions_status_logs (occurred_at);
        CREATE INDEX sessions_audit_logs_by_time ON sessions_audit_logs (created_at);
      `);
    },
  },
];
