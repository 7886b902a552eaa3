/**
 * Migration 003-search-ngrams (issue 17) on an existing database: 1,000,000 file records written
 * under migrations 001 and 002 (names as bench/files-search.ts makes them), then 003 applied
 * as the server would at start, in its transaction. Reports its wall and CPU time and what the
 * database weighs before and after. Usage: node bench/run.ts files-search-migration
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Database } from '../core/db.ts';
import { openSqlite } from '../core/db-sqlite.ts';
import { migrate } from '../core/migrations.ts';
import { migrations } from '../plugins/storage/migrations.ts';
import { fillFiles } from './files-search.ts';
import { fmt } from './lib.ts';

const mib = (db: Database) => (db.prepare('SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()').pluck().get() as number) / 2 ** 20;

export async function run(options: { files?: number } = {}): Promise<string> {
  const files = options.files ?? 1_000_000;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-migration-'));
  try {
    const data = openSqlite(path.join(dir, 'wharf.db'));
    const db = data.raw;
    const before = migrations.filter((m) => m.id < '003');
    await migrate(data, [{ plugin: 'storage', migrations: before }]);
    db.exec(`INSERT INTO storage_apps (id, seq, org_id, name, bucket_name, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 1, 'org', 'bench', 'bench-bucket', 'now', 'now')`);
    const fillMs = fillFiles(db, '00000000-0000-4000-8000-000000000001', files);
    db.exec('VACUUM');
    const sizeBefore = mib(db);
    const cpu = process.cpuUsage();
    const started = performance.now();
    await migrate(data, [{ plugin: 'storage', migrations }]);
    const wall = performance.now() - started;
    const used = process.cpuUsage(cpu);
    db.exec('VACUUM');
    const sizeAfter = mib(db);
    // The same rows again, now under 003's triggers: what a write costs with the search index.
    db.exec(`INSERT INTO storage_apps (id, seq, org_id, name, bucket_name, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000002', 2, 'org', 'bench2', 'bench-bucket-2', 'now', 'now')`);
    const fillAfterMs = fillFiles(db, '00000000-0000-4000-8000-000000000002', Math.min(files, 100_000));
    db.close();
    return [
      '| files | 003 wall (s) | 003 CPU (s) | database before (MiB) | after (MiB) | insert before (µs a row) | insert after (µs a row) |',
      '|---|---|---|---|---|---|---|',
      `| ${files.toLocaleString('en')} | ${fmt(wall / 1000, 1)} | ${fmt((used.user + used.system) / 1e6, 1)} | ${fmt(sizeBefore, 0)} | ${fmt(sizeAfter, 0)} | ${fmt((fillMs * 1000) / files, 0)} | ${fmt((fillAfterMs * 1000) / Math.min(files, 100_000), 0)} |`,
      '',
      '(inserts: rows in transactions of 1,000 through the triggers, as bench/files-search.ts fills; "after" on 100,000 rows of a second app)',
    ].join('\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
