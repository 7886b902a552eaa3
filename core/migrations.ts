/**
 * Migrations, per plugin, recorded in `_migrations(plugin, id, applied_at)`; all pending ones run
 * in one transaction, so a failing migration leaves the database as it was. A migration is SQL
 * for both engines (`sql`), SQL per engine (`sqlite` and `postgres`), async code on the data
 * layer (`apply(db)`), or, for plugins not yet ported (contract 1.0), synchronous code on the
 * SQLite connection (`up(db)`). On PostgreSQL the run holds an advisory lock, so instances that
 * start together migrate one after the other (the second finds nothing pending).
 */
import type { Db } from './db.ts';
import { CORE_MIGRATIONS } from './keys-check.ts';
import { PostgresDb } from './db-postgres.ts';
import { SqliteDb } from './db-sqlite.ts';
import type { Migration } from './plugin.ts';

/** A plugin's migrations, or the core's own under the name `core`. */
export interface MigrationSet {
  plugin: string;
  migrations: readonly Migration[];
}

export interface MigrationRow {
  plugin: string;
  id: string;
  appliedAt: string | null;
}

/** The core's migrations, then those of `plugins` (the enabled ones, in setup order). */
export function migrationSets(plugins: readonly { name: string; migrations?: readonly Migration[] }[]): MigrationSet[] {
  return [
    { plugin: 'core', migrations: CORE_MIGRATIONS },
    ...plugins.filter((p) => p.migrations?.length).map((p) => ({ plugin: p.name, migrations: p.migrations! })),
  ];
}

/** The key of the advisory lock migrations hold on PostgreSQL ("whrf" as a 32-bit number). */
export const MIGRATION_LOCK_KEY = 0x77687266;

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS _migrations (
  plugin TEXT NOT NULL,
  id TEXT NOT NULL,
  applied_at TEXT NOT NULL,
  PRIMARY KEY (plugin, id)
)`;

async function hasTable(db: Db): Promise<boolean> {
  const sql =
    db.engine === 'postgres'
      ? "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '_migrations'"
      : "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'";
  return (await db.value(sql)) !== undefined;
}

/** Every known migration with the time it was applied, or null when pending. */
export async function migrationStatus(db: Db, sets: readonly MigrationSet[]): Promise<MigrationRow[]> {
  const applied = new Map<string, string>();
  if (await hasTable(db)) {
    for (const row of await db.all<{ plugin: string; id: string; applied_at: string }>('SELECT plugin, id, applied_at FROM _migrations')) {
      applied.set(`${row.plugin}\0${row.id}`, row.applied_at);
    }
  }
  return sets.flatMap((set) =>
    [...set.migrations]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((m) => ({ plugin: set.plugin, id: m.id, appliedAt: applied.get(`${set.plugin}\0${m.id}`) ?? null })),
  );
}

async function apply(db: Db, tx: Db, migration: Migration): Promise<void> {
  if (migration.sql !== undefined) return tx.exec(migration.sql);
  const perEngine = tx.engine === 'postgres' ? migration.postgres : migration.sqlite;
  if (perEngine !== undefined) return tx.exec(perEngine);
  if (migration.apply) return migration.apply(tx);
  if (migration.up) {
    if (!(db instanceof SqliteDb)) throw new Error('a synchronous up(db) migration runs on SQLite only');
    return migration.up(db.raw);
  }
  throw new Error(`no SQL for ${tx.engine} and no code`);
}

/**
 * Applies every pending migration, in plugin order then id order, in one transaction.
 * Returns what it applied. A failure rolls everything back and names the migration. Given a
 * transaction (`Db` inside one), the migrations join it (`wharf migrate-data` copies in the same one).
 */
export async function migrate(db: Db, sets: readonly MigrationSet[]): Promise<MigrationRow[]> {
  const run = async (tx: Db) => {
    await tx.exec(CREATE_TABLE);
    const pending = (await migrationStatus(tx, sets)).filter((m) => m.appliedAt === null);
    const now = new Date().toISOString();
    for (const row of pending) {
      const migration = sets.find((s) => s.plugin === row.plugin)!.migrations.find((m) => m.id === row.id)!;
      try {
        await apply(db, tx, migration);
      } catch (err) {
        throw new Error(`migration ${row.plugin}/${row.id} failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.run('INSERT INTO _migrations (plugin, id, applied_at) VALUES (?, ?, ?)', [row.plugin, row.id, now]);
      row.appliedAt = now;
    }
    return pending;
  };
  return db instanceof PostgresDb ? db.withAdvisoryLock(MIGRATION_LOCK_KEY, run) : db.transaction(run);
}
