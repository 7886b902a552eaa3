/**
 * SQLite through better-sqlite3: WAL, a busy timeout, foreign keys on. Migrations are code,
 * per plugin, recorded in `_migrations(plugin, id, applied_at)`; all pending ones run in one
 * transaction, so a failing migration leaves the database as it was.
 */
import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { nativeSqliteBinding } from './native.ts';

export type Database = BetterSqlite3.Database;

/** A plugin's migrations, or the core's own under the name `core`. */
export interface MigrationSet {
  plugin: string;
  migrations: readonly { id: string; up(db: Database): void }[];
}

export interface OpenOptions {
  busyTimeoutMs?: number;
  readonly?: boolean;
}

export function openDatabase(file: string, options: OpenOptions = {}): Database {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const binding = nativeSqliteBinding();
  const db = new BetterSqlite3(file, {
    timeout: options.busyTimeoutMs ?? 5000,
    readonly: options.readonly ?? false,
    ...(binding ? { nativeBinding: binding as unknown as string } : {}),
  });
  if (!options.readonly) db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  // Statement journals and savepoint sub-journals (nested transactions, statements that may
  // fail midway) in memory: on disk each one is a temporary file created and deleted per
  // transaction, several system calls each (BENCHMARKS.md, issue 16). They hold only what one
  // transaction changes and are never needed after a crash.
  db.pragma('temp_store = MEMORY');
  return db;
}

function ensureTable(db: Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS _migrations (
    plugin TEXT NOT NULL,
    id TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (plugin, id)
  )`);
}

export interface MigrationRow {
  plugin: string;
  id: string;
  appliedAt: string | null;
}

/** Every known migration with the time it was applied, or null when pending. */
export function migrationStatus(db: Database, sets: readonly MigrationSet[]): MigrationRow[] {
  const applied = new Map<string, string>();
  const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").get();
  if (hasTable) {
    for (const row of db.prepare('SELECT plugin, id, applied_at FROM _migrations').all() as {
      plugin: string;
      id: string;
      applied_at: string;
    }[]) {
      applied.set(`${row.plugin}\0${row.id}`, row.applied_at);
    }
  }
  return sets.flatMap((set) =>
    [...set.migrations]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((m) => ({ plugin: set.plugin, id: m.id, appliedAt: applied.get(`${set.plugin}\0${m.id}`) ?? null })),
  );
}

/**
 * Applies every pending migration, in plugin order then id order, in one transaction.
 * Returns what it applied. A failure rolls everything back and names the migration.
 */
export function migrate(db: Database, sets: readonly MigrationSet[]): MigrationRow[] {
  const run = db.transaction(() => {
    ensureTable(db);
    const pending = migrationStatus(db, sets).filter((m) => m.appliedAt === null);
    const insert = db.prepare('INSERT INTO _migrations (plugin, id, applied_at) VALUES (?, ?, ?)');
    const now = new Date().toISOString();
    for (const row of pending) {
      const migration = sets.find((s) => s.plugin === row.plugin)!.migrations.find((m) => m.id === row.id)!;
      try {
        migration.up(db);
      } catch (err) {
        throw new Error(`migration ${row.plugin}/${row.id} failed: ${(err as Error).message}`, { cause: err });
      }
      insert.run(row.plugin, row.id, now);
      row.appliedAt = now;
    }
    return pending;
  });
  return run.immediate();
}
