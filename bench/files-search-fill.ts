/**
 * Bulk fills for the files-search benchmark (issue 17): file rows inserted straight into the
 * database, exactly as `POST /api/files` records them (test/bench/files-search-fill.test.ts
 * compares every search table with rows inserted one at a time through the triggers), in minutes
 * for a million rows instead of the triggers' 20+.
 * - SQLite: the triggers on storage_files are dropped for each batch of 100,000 rows and put back
 *   in the same transaction; what they would have written is written in bulk instead: the rows
 *   (rowids in the app's range), the trigram index (FTS5 inserts, one batch), the short-gram
 *   index documents and the per-app gram counts (computed here, one upsert per distinct gram),
 *   the app's counters.
 * - PostgreSQL: the rows go in by INSERT ... SELECT FROM unnest(arrays) (20,000 a statement,
 *   the statement-level counter trigger and the generated short_grams column as for any insert);
 *   the two GIN indexes are dropped before and built after (CREATE INDEX, then ANALYZE), the state
 *   an index reaches once its pending list is merged (VACUUM).
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import type pg from 'pg';

/** A file row as the benchmark generates it. */
export interface BenchFile {
  key: string;
  name: string;
  size: number;
  at: string;
}

/** The distinct substrings of `name` of 1 to `max` characters (code points, as SQLite's substr()). */
export function gramsOf(name: string, max: number): Set<string> {
  const chars = [...name];
  const grams = new Set<string>();
  for (let i = 0; i < chars.length; i++) for (let n = 1; n <= max && i + n <= chars.length; n++) grams.add(chars.slice(i, i + n).join(''));
  return grams;
}

/** storage_files_ngrams' document for a name: its 1-2 character grams as hex tokens (migration 003's shortGramDocument). */
const shortGramDocument = (name: string) => [...gramsOf(name, 2)].map((g) => Buffer.from(g).toString('hex').toUpperCase()).join(' ');

const SQLITE_BATCH = 100_000;

/** Inserts `count` rows (`file(i)`) into an app on SQLite in bulk (see the module comment). */
export function bulkFillSqlite(db: Database.Database, appId: string, count: number, file: (i: number) => BenchFile, batchSize = SQLITE_BATCH): void {
  const triggers = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'storage_files'").all() as {
    name: string;
    sql: string;
  }[];
  const insertFile = db.prepare(
    `INSERT INTO storage_files (seq, id, app_id, key, name, size, type, uploaded_at)
     VALUES (@seq, @id, @appId, @key, @name, @size, 'application/octet-stream', @at)`,
  );
  const insertName = db.prepare('INSERT INTO storage_files_names (rowid, name) VALUES (?, ?)');
  const insertGrams = db.prepare('INSERT INTO storage_files_ngrams (rowid, grams) VALUES (?, ?)');
  const addGram = db.prepare('INSERT INTO storage_search_grams (app_id, gram, n) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n');
  const cached = db.prepare('SELECT count(*) FROM storage_search_counts WHERE app_id = ?').pluck();
  const app = db.prepare('SELECT seq * 4294967296 + next_file AS first FROM storage_apps WHERE id = ?').pluck();
  const counters = db.prepare('UPDATE storage_apps SET stored_bytes = stored_bytes + ?, file_count = file_count + ?, next_file = next_file + ? WHERE id = ?');
  const batch = db.transaction((from: number, to: number) => {
    if (cached.get(appId) !== 0) throw new Error('bulkFillSqlite: the app has cached search counts; the bulk fill does not update them');
    for (const t of triggers) db.exec(`DROP TRIGGER ${t.name}`);
    const first = app.get(appId) as number;
    const grams = new Map<string, number>();
    let bytes = 0;
    for (let i = from; i < to; i++) {
      const f = file(i);
      const seq = first + (i - from);
      insertFile.run({ seq, id: randomUUID(), appId, key: f.key, name: f.name, size: f.size, at: f.at });
      insertName.run(seq, f.name);
      insertGrams.run(seq, shortGramDocument(f.name));
      for (const g of gramsOf(f.name, 3)) grams.set(g, (grams.get(g) ?? 0) + 1);
      bytes += f.size;
    }
    for (const [g, n] of grams) addGram.run(appId, g, n);
    counters.run(bytes, to - from, to - from, appId);
    for (const t of triggers) db.exec(t.sql);
  });
  for (let i = 0; i < count; i += batchSize) batch(i, Math.min(count, i + batchSize));
}

const PG_BATCH = 20_000;

/** Inserts `count` rows (`file(i)`) into an app on PostgreSQL in bulk (see the module comment). */
export async function bulkFillPostgres(client: pg.Client, appId: string, count: number, file: (i: number) => BenchFile): Promise<void> {
  const indexes = (
    await client.query<{ indexname: string; indexdef: string }>(
      "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'storage_files' AND indexdef LIKE '%USING gin%'",
    )
  ).rows;
  for (const i of indexes) await client.query(`DROP INDEX ${i.indexname}`);
  try {
    for (let from = 0; from < count; from += PG_BATCH) {
      const rows = Array.from({ length: Math.min(count, from + PG_BATCH) - from }, (_, k) => file(from + k));
      await client.query(
        `INSERT INTO storage_files (id, app_id, key, name, size, type, uploaded_at)
         SELECT id, $1, key, name, size, 'application/octet-stream', at FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[]) AS t(id, key, name, size, at)`,
        [appId, rows.map(() => randomUUID()), rows.map((r) => r.key), rows.map((r) => r.name), rows.map((r) => r.size), rows.map((r) => r.at)],
      );
    }
  } finally {
    await client.query("SET maintenance_work_mem = '512MB'");
    for (const i of indexes) await client.query(i.indexdef);
    await client.query('ANALYZE storage_files');
  }
}
