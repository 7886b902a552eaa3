/** The storage plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';

export const migrations: Migration[] = [
  {
    id: '001-apps-files-uploads',
    up(db) {
      db.exec(`
        -- stored_bytes and file_count follow storage_files through the triggers below, so the
        -- storage limit and the list total never scan an app's files.
        -- deleting = 1 while the bucket is being emptied: the app is gone for every route.
        -- seq numbers the app; its files get the rowids seq * 2^32 + next_file, so each app owns
        -- one rowid range of the full-text index and a search reads only its own app's entries.
        CREATE TABLE storage_apps (
          id TEXT PRIMARY KEY,
          seq INTEGER NOT NULL UNIQUE,
          next_file INTEGER NOT NULL DEFAULT 0,
          org_id TEXT NOT NULL,
          name TEXT NOT NULL,
          bucket_name TEXT NOT NULL UNIQUE,
          storage_limit INTEGER,
          stored_bytes INTEGER NOT NULL DEFAULT 0,
          file_count INTEGER NOT NULL DEFAULT 0,
          deleting INTEGER NOT NULL DEFAULT 0,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL
        );
        CREATE INDEX storage_apps_by_org ON storage_apps (org_id, created_at, id);

        -- seq: the integer rowid the full-text index refers to (in the app's range); id: the public UUID.
        CREATE TABLE storage_files (
          seq INTEGER PRIMARY KEY,
          id TEXT NOT NULL UNIQUE,
          app_id TEXT NOT NULL REFERENCES storage_apps(id) ON DELETE CASCADE,
          key TEXT NOT NULL,
          name TEXT NOT NULL,
          size INTEGER NOT NULL,
          type TEXT NOT NULL,
          uploaded_at TEXT NOT NULL,
          UNIQUE (app_id, key)
        );
        -- Paging: (app, uploadedAt, id), the id breaking ties so pages never repeat or skip.
        CREATE INDEX storage_files_by_time ON storage_files (app_id, uploaded_at, id);

        -- Case-sensitive substring search on names: trigrams, kept in step by triggers.
        CREATE VIRTUAL TABLE storage_files_names USING fts5(
          name, content = 'storage_files', content_rowid = 'seq', tokenize = 'trigram case_sensitive 1'
        );
        CREATE TRIGGER storage_files_ai AFTER INSERT ON storage_files BEGIN
          INSERT INTO storage_files_names (rowid, name) VALUES (new.seq, new.name);
          UPDATE storage_apps SET stored_bytes = stored_bytes + new.size, file_count = file_count + 1, next_file = next_file + 1 WHERE id = new.app_id;
        END;
        CREATE TRIGGER storage_files_ad AFTER DELETE ON storage_files BEGIN
          INSERT INTO storage_files_names (storage_files_names, rowid, name) VALUES ('delete', old.seq, old.name);
          UPDATE storage_apps SET stored_bytes = stored_bytes - old.size, file_count = file_count - 1 WHERE id = old.app_id;
        END;
        CREATE TRIGGER storage_files_au AFTER UPDATE OF name, size ON storage_files BEGIN
          INSERT INTO storage_files_names (storage_files_names, rowid, name) VALUES ('delete', old.seq, old.name);
          INSERT INTO storage_files_names (rowid, name) VALUES (new.seq, new.name);
          UPDATE storage_apps SET stored_bytes = stored_bytes - old.size + new.size WHERE id = new.app_id;
        END;

        -- Uploads issued by phase 1 and not completed yet: their bytes count against the limit
        -- until expires_at; then the reaper marks them 'reaping', deletes their objects and the rows.
        CREATE TABLE storage_uploads (
          app_id TEXT NOT NULL REFERENCES storage_apps(id) ON DELETE CASCADE,
          key TEXT NOT NULL,
          size INTEGER NOT NULL,
          type TEXT NOT NULL,
          state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'reaping')),
          created_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          PRIMARY KEY (app_id, key)
        );
        CREATE INDEX storage_uploads_by_expiry ON storage_uploads (expires_at);
      `);
    },
  },
  {
    id: '002-bucket-usage',
    up(db) {
      db.exec(`
        -- What the last reconciliation found in the bucket besides the records (drivers that do
        -- not count usage live: s3): objects with no file record and no unfinished upload at
        -- their key. usage_checked_at: when that listing started; null before the first.
        ALTER TABLE storage_apps ADD COLUMN unregistered_bytes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE storage_apps ADD COLUMN unregistered_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE storage_apps ADD COLUMN usage_checked_at TEXT;
      `);
    },
  },
];
