/** The storage plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';

/** Rows (key 0 .. length - 1) of a json_each over `text`'s character positions: a series without a CTE (triggers allow none). */
const positions = (text: string) => `json_each('[' || substr(replace(hex(zeroblob(length(${text}))), '00', ',0'), 2) || ']')`;
/**
 * The distinct substrings of `text` of the lengths in `lengths` (a JSON array), one row each as
 * `gram`: each at its first occurrence only (instr() finds it there), which dedupes without
 * DISTINCT's temporary b-tree.
 */
const gramsOf = (text: string, lengths = '[1,2,3]') => {
  const gram = `substr(${text}, p.key + 1, n.value)`;
  return `SELECT ${gram} AS gram FROM ${positions(text)} p, json_each('${lengths}') n WHERE p.key + n.value <= length(${text}) AND instr(${text}, ${gram}) = p.key + 1`;
};
/** The 1-2 gram index's document for `text`: its grams as tokens, each the hex of its UTF-8 bytes (the ascii tokenizer keeps [0-9A-F] runs whole). */
const shortGramDocument = (text: string) => `(SELECT group_concat(hex(gram), ' ') FROM (${gramsOf(text, '[1,2]')}))`;

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
  {
    id: '003-search-ngrams',
    up(db) {
      db.exec(`
        -- Search (issue 17), beside the trigram table of 001 (which serves terms of 3+ characters:
        -- a term is a phrase of its trigrams, exact, and its rarest trigrams find candidates).
        -- storage_files_ngrams: each name's 1- and 2-character substrings as tokens, rowids in
        -- the app's range as in storage_files_names, so 1-2 character terms look up one token.
        -- Contentless, no positions, no sizes: only doclists.
        CREATE VIRTUAL TABLE storage_files_ngrams USING fts5(
          grams, content = '', detail = 'none', columnsize = 0, tokenize = 'ascii'
        );

        -- Per app, how many files' names contain each 1-3 character gram: the exact total of any
        -- 1-3 character term, and the rarest trigram's count that picks a plan for longer ones.
        CREATE TABLE storage_search_grams (
          app_id TEXT NOT NULL REFERENCES storage_apps(id) ON DELETE CASCADE,
          gram TEXT NOT NULL,
          n INTEGER NOT NULL,
          PRIMARY KEY (app_id, gram)
        ) WITHOUT ROWID;

        -- Exact totals of broad terms of 4+ characters, cached on first use (a few per app, the
        -- oldest evicted) and kept exact by the triggers: each write to a file adjusts the app's
        -- cached terms its name contains.
        CREATE TABLE storage_search_counts (
          app_id TEXT NOT NULL REFERENCES storage_apps(id) ON DELETE CASCADE,
          term TEXT NOT NULL,
          n INTEGER NOT NULL,
          UNIQUE (app_id, term)
        );

        -- The time index carries the name: a broad term's page walks it in order, instr() on each
        -- entry, and stops at the page's end without reading the table.
        DROP INDEX storage_files_by_time;
        CREATE INDEX storage_files_by_time ON storage_files (app_id, uploaded_at, id, name);

        -- Beside 001's triggers (trigram index, app counters).
        CREATE TRIGGER storage_files_search_ai AFTER INSERT ON storage_files BEGIN
          INSERT INTO storage_files_ngrams (rowid, grams) VALUES (new.seq, ${shortGramDocument('new.name')});
          INSERT INTO storage_search_grams (app_id, gram, n) SELECT new.app_id, gram, 1 FROM (${gramsOf('new.name')}) WHERE true
            ON CONFLICT DO UPDATE SET n = n + 1;
          UPDATE storage_search_counts SET n = n + 1 WHERE app_id = new.app_id AND instr(new.name, term) > 0;
        END;
        CREATE TRIGGER storage_files_search_ad AFTER DELETE ON storage_files BEGIN
          INSERT INTO storage_files_ngrams (storage_files_ngrams, rowid, grams) VALUES ('delete', old.seq, ${shortGramDocument('old.name')});
          UPDATE storage_search_grams SET n = n - 1 WHERE app_id = old.app_id AND gram IN (${gramsOf('old.name')});
          UPDATE storage_search_counts SET n = n - 1 WHERE app_id = old.app_id AND instr(old.name, term) > 0;
        END;
        CREATE TRIGGER storage_files_search_au AFTER UPDATE OF name ON storage_files WHEN old.name != new.name BEGIN
          INSERT INTO storage_files_ngrams (storage_files_ngrams, rowid, grams) VALUES ('delete', old.seq, ${shortGramDocument('old.name')});
          INSERT INTO storage_files_ngrams (rowid, grams) VALUES (new.seq, ${shortGramDocument('new.name')});
          UPDATE storage_search_grams SET n = n - 1 WHERE app_id = old.app_id AND gram IN (${gramsOf('old.name')});
          INSERT INTO storage_search_grams (app_id, gram, n) SELECT new.app_id, gram, 1 FROM (${gramsOf('new.name')}) WHERE true
            ON CONFLICT DO UPDATE SET n = n + 1;
          UPDATE storage_search_counts SET n = n + (instr(new.name, term) > 0) - (instr(old.name, term) > 0)
            WHERE app_id = new.app_id AND (instr(new.name, term) > 0) != (instr(old.name, term) > 0);
        END;
      `);
      // Existing files: what the insert trigger does, one file at a time (the grams' subqueries
      // read the name as a parameter; SQL cannot correlate them with a scan).
      const index = db.prepare(`INSERT INTO storage_files_ngrams (rowid, grams) VALUES (@seq, ${shortGramDocument('@name')})`);
      const count = db.prepare(
        `INSERT INTO storage_search_grams (app_id, gram, n) SELECT @appId, gram, 1 FROM (${gramsOf('@name')}) WHERE true ON CONFLICT DO UPDATE SET n = n + 1`,
      );
      const batch = db.prepare('SELECT seq, app_id AS appId, name FROM storage_files WHERE seq > ? ORDER BY seq LIMIT 10000');
      for (let last = -1; ; ) {
        const files = batch.all(last) as { seq: number; appId: string; name: string }[];
        if (!files.length) break;
        for (const f of files) {
          index.run(f);
          count.run(f);
        }
        last = files.at(-1)!.seq;
      }
    },
  },
];
