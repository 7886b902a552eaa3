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
  // (Not a read that fails without the table: pg's pool closes a connection whose query failed.)
  const sql =
    db.engine === 'postgres'
      ? "SELECT to_regclass('_migrations') IS NOT NULL"
      : "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'";
  return Boolean(await db.value(sql));
}

/**
 * The first statement of the migration transaction on PostgreSQL when it is the runner's own
 * (not a caller's): its commit does not wait for the WAL to reach the disk (on a fresh database
 * the WAL of the whole schema, some 220 relations and their catalog rows). Durability is kept:
 * PostgreSQL writes the WAL in order and a later commit that waits (every other transaction of
 * Wharf's, the first start's keys check included) flushes it up to its own commit record, so past
 * the migration's; nothing written after the migrations can then be on the disk without them. A
 * crash before that flush loses the migration transaction whole (it is one transaction, its
 * `_migrations` rows included), and the next start finds it pending and runs it again.
 * `SET LOCAL`: the setting ends with the transaction, the pool's connection is as before.
 */
const ASYNC_COMMIT = 'SET LOCAL synchronous_commit = off';

type Applied = Map<string, string>;
const key = (plugin: string, id: string) => `${plugin}\0${id}`;

async function readApplied(db: Db): Promise<Applied> {
  const rows = await db.all<{ plugin: string; id: string; applied_at: string }>('SELECT plugin, id, applied_at FROM _migrations');
  return new Map(rows.map((row) => [key(row.plugin, row.id), row.applied_at]));
}

function status(sets: readonly MigrationSet[], applied: Applied): MigrationRow[] {
  return sets.flatMap((set) =>
    [...set.migrations]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((m) => ({ plugin: set.plugin, id: m.id, appliedAt: applied.get(key(set.plugin, m.id)) ?? null })),
  );
}

/** Every known migration with the time it was applied, or null when pending. */
export async function migrationStatus(db: Db, sets: readonly MigrationSet[]): Promise<MigrationRow[]> {
  return status(sets, (await hasTable(db)) ? await readApplied(db) : new Map());
}

/** A migration's SQL on `engine`, or undefined when it is code (`apply`, `up`). */
function sqlOf(migration: Migration, engine: Db['engine']): string | undefined {
  return migration.sql ?? (engine === 'postgres' ? migration.postgres : migration.sqlite);
}

async function apply(db: Db, tx: Db, migration: Migration): Promise<void> {
  const sql = sqlOf(migration, tx.engine);
  if (sql !== undefined) return tx.exec(sql);
  if (migration.apply) return migration.apply(tx);
  if (migration.up) {
    if (!(db instanceof SqliteDb)) throw new Error('a synchronous up(db) migration runs on SQLite only');
    return migration.up(db.raw);
  }
  throw new Error(`no SQL for ${tx.engine} and no code`);
}

/** A SQL string literal (plugin names and migration ids are the plugins' own, never a request's). */
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** A batch of several migrations failed: which one is not known; they run again one at a time to name it. */
class BatchFailed extends Error {}

/**
 * Applies every pending migration, in plugin order then id order, in one transaction.
 * Returns what it applied. A failure rolls everything back and names the migration. Given a
 * transaction (`Db` inside one), the migrations join it (`wharf migrate-data` copies in the same one).
 *
 * Round trips, which a start on PostgreSQL waits for (BENCHMARKS.md, issue 16 part 7): a database
 * with nothing pending (every restart) is two queries, without the lock or a transaction (rows of
 * `_migrations` are committed ones, so what they say is applied stays applied). Otherwise, under
 * the lock and in the transaction, what is pending is read again (another instance may just have
 * applied it) and consecutive SQL migrations go to the server as one multi-statement query, with
 * the records of what was applied so far in one INSERT (a fresh database: a few queries instead
 * of two per migration). When such a batch fails, the transaction is rolled back and the
 * migrations run again one at a time, so the error names the one that failed.
 */
export async function migrate(db: Db, sets: readonly MigrationSet[]): Promise<MigrationRow[]> {
  const handle = db instanceof PostgresDb || db instanceof SqliteDb;
  if (handle && !(await migrationStatus(db, sets)).some((m) => m.appliedAt === null)) return [];
  const run = (batched: boolean) => async (tx: Db) => {
    await tx.exec(handle && tx.engine === 'postgres' ? `${ASYNC_COMMIT};\n${CREATE_TABLE}` : CREATE_TABLE);
    const pending = status(sets, await readApplied(tx)).filter((m) => m.appliedAt === null);
    const now = new Date().toISOString();
    const migrationOf = (row: MigrationRow) => sets.find((s) => s.plugin === row.plugin)!.migrations.find((m) => m.id === row.id)!;
    // The records of what was applied, written with the next batch or at the end, in one INSERT.
    let unrecorded: MigrationRow[] = [];
    const records = () => {
      const values = unrecorded.map((r) => `(${literal(r.plugin)}, ${literal(r.id)}, ${literal(now)})`).join(', ');
      unrecorded = [];
      return `INSERT INTO _migrations (plugin, id, applied_at) VALUES ${values}`;
    };
    for (let i = 0; i < pending.length; ) {
      const row = pending[i]!;
      const migration = migrationOf(row);
      // This migration and the SQL ones after it, in one query.
      const batch = [row];
      const sql = batched ? sqlOf(migration, tx.engine) : undefined;
      if (sql !== undefined) {
        const statements = [sql];
        for (let next = pending[i + 1]; next; next = pending[i + batch.length]) {
          const more = sqlOf(migrationOf(next), tx.engine);
          if (more === undefined) break;
          statements.push(more);
          batch.push(next);
        }
        unrecorded.push(...batch);
        statements.push(records());
        try {
          // A newline before each `;`: a migration may end in a line comment.
          await tx.exec(statements.join('\n;\n'));
        } catch (err) {
          if (batch.length > 1) throw new BatchFailed('a batch of migrations failed', { cause: err });
          throw new Error(`migration ${row.plugin}/${row.id} failed: ${(err as Error).message}`, { cause: err });
        }
      } else {
        try {
          await apply(db, tx, migration);
        } catch (err) {
          throw new Error(`migration ${row.plugin}/${row.id} failed: ${(err as Error).message}`, { cause: err });
        }
        unrecorded.push(row);
      }
      for (const r of batch) r.appliedAt = now;
      i += batch.length;
    }
    if (unrecorded.length) await tx.exec(records());
    return pending;
  };
  const inTransaction = (batched: boolean) => (db instanceof PostgresDb ? db.withAdvisoryLock(MIGRATION_LOCK_KEY, run(batched)) : db.transaction(run(batched)));
  // Inside a caller's transaction a failed batch cannot be undone here: one at a time.
  if (!handle) return inTransaction(false);
  try {
    return await inTransaction(true);
  } catch (err) {
    if (err instanceof BatchFailed) return inTransaction(false);
    throw err;
  }
}
