/**
 * `wharf migrate-data` throughput (issue 15): a SQLite database with ROWS app tokens (the tokens
 * plugin's table: an identity column on PostgreSQL, 8 columns) moved into a fresh PostgreSQL
 * database (the test server of test/pg/postgres.sh) by core/migrate-data.ts, at a few batch sizes;
 * the baseline is PostgreSQL filling the same table from generate_series on its own (no client,
 * no SQLite): the floor of writing those rows. Peak RSS shows the table is not held in memory.
 * Usage: node bench/run.ts migrate-data (BENCH_MIGRATE_ROWS to change the row count)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openSqlite } from '../core/db-sqlite.ts';
import { migrateData } from '../core/migrate-data.ts';
import { migrate } from '../core/migrations.ts';
import { migrations } from '../plugins/tokens/migrations.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { fmt } from './lib.ts';

const plugin = { name: 'tokens', engines: ['sqlite', 'postgres'] as const, migrations };

export async function run(): Promise<string> {
  const rows = Number(process.env.BENCH_MIGRATE_ROWS ?? 1_000_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-migrate-'));
  const file = path.join(dir, 'wharf.db');
  const db = openSqlite(file);
  await migrate(db, [{ plugin: 'tokens', migrations }]);
  const now = new Date().toISOString();
  db.raw.transaction(() => {
    const insert = db.raw.prepare(
      'INSERT INTO tokens_app_tokens (id, app_id, name, token_hash, token_prefix, last_used_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    for (let i = 0; i < rows; i++)
      insert.run(`tok-${i}`, `app-${i % 100}`, `token ${i}`, `${i.toString(16).padStart(64, '0')}`, `wh_${i % 1000}`, i % 2 ? now : null, now);
  })();
  await db.close();
  const sqliteBytes = fs.statSync(file).size;

  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  const lines = ['| what | rows | seconds | rows/s | ratio to the baseline | peak RSS |', '|---|---:|---:|---:|---:|---:|'];
  try {
    // Baseline: the server fills the same table by itself.
    const base = await freshDatabase();
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    await client.query(migrations[0]!.postgres!);
    const b0 = performance.now();
    await client.query(
      `INSERT INTO tokens_app_tokens (id, app_id, name, token_hash, token_prefix, last_used_at, created_at)
       SELECT 'tok-' || i, 'app-' || (i % 100), 'token ' || i, lpad(to_hex(i), 64, '0'), 'wh_' || (i % 1000), CASE WHEN i % 2 = 1 THEN $1 END, $1
         FROM generate_series(0, $2::int - 1) i`,
      [now, rows],
    );
    const baseline = (performance.now() - b0) / 1000;
    await client.end();
    lines.push(`| baseline: INSERT ... SELECT FROM generate_series (server side) | ${rows} | ${fmt(baseline)} | ${fmt(rows / baseline, 0)} | 1.00 | |`);
    for (const batchRows of [250, 1000, 4000]) {
      const to = await freshDatabase();
      global.gc?.();
      peak = 0;
      const t0 = performance.now();
      const result = await migrateData({ source: file, dataDir: dir, to, plugins: [plugin], batchRows });
      const seconds = (performance.now() - t0) / 1000;
      if (result.rows !== rows) throw new Error(`copied ${result.rows} of ${rows}`);
      lines.push(
        `| migrate-data, ${batchRows} rows per INSERT${batchRows === 1000 ? ' (the default)' : ''} | ${rows} | ${fmt(seconds)} | ${fmt(rows / seconds, 0)} | ${fmt(seconds / baseline)} | ${fmt(peak / 2 ** 20, 0)} MiB |`,
      );
    }
  } finally {
    clearInterval(sample);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return `${lines.join('\n')}\n\nSQLite file ${fmt(sqliteBytes / 2 ** 20, 0)} MiB; peak RSS: of the whole process (Node, the modules, the pg pool) while that copy ran. PostgreSQL 15 on loopback, the same machine.`;
}
