/**
 * `wharf migrate-data --to postgres://...`: moves an instance's data from its SQLite database
 * into an empty PostgreSQL database, generically over the plugins (it knows none by name).
 *
 * Everything happens in one PostgreSQL transaction, under the migrations' advisory lock (an
 * instance starting on the target meanwhile waits, then finds everything applied): the target is
 * checked to be empty, every enabled plugin's migrations run on it, then every table present on
 * both sides is copied (the columns present on both sides), parents before children (the target's
 * foreign keys), from one read snapshot of the SQLite file, in multi-row INSERT batches (the
 * source is read with an iterator, so a table of millions of rows is never held in memory).
 * Identity columns are inserted with OVERRIDING SYSTEM VALUE and their sequences set past the
 * largest copied value (and past SQLite's AUTOINCREMENT counter, so deleted ids stay unused). The target's own triggers are off during the copy (ALTER TABLE ...
 * DISABLE TRIGGER USER, transactional): the copied rows already carry what triggers would derive
 * (counters, for example), which would otherwise count twice. Row counts are compared per table
 * before the commit: a difference rolls everything back.
 *
 * Not copied: `_migrations` (the target records its own), SQLite's internal tables, its full-text
 * (FTS5) tables and their shadow tables, and any table or column the target does not have (each
 * listed in the result with its row count, so nothing is left behind unsaid).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AnyPlugin } from './config.ts';
import { openDatabase, type Database, type Db } from './db.ts';
import { openPostgres, type PostgresDb } from './db-postgres.ts';
import { maskPassword } from './backup.ts';
import { MIGRATION_LOCK_KEY, migrate, migrationSets } from './migrations.ts';
import { runningServer } from './serve-pid.ts';

/** Refused or failed, with nothing written to the target: one line for the operator. */
export class MigrateDataError extends Error {
  override name = 'MigrateDataError';
}

export interface MigrateDataOptions {
  /** The SQLite database file of the instance. */
  source: string;
  /** The instance's data dir: its running server is looked for there, and its keys named. */
  dataDir: string;
  /** postgres://USER:PASSWORD@HOST:PORT/DATABASE, an empty database. */
  to: string;
  /** The enabled plugins, in setup order: each must run on PostgreSQL; their migrations run on the target. */
  plugins: readonly Pick<AnyPlugin, 'name' | 'engines' | 'migrations'>[];
  /** Rows per INSERT at most (also bounded by PostgreSQL's 65535 parameters). Default 1000. */
  batchRows?: number;
  connectTimeoutMs?: number;
}

export interface CopiedTable {
  table: string;
  /** Rows in the source, equal to the rows in the target (checked before the commit). */
  rows: number;
}

export interface SkippedTable {
  table: string;
  /** Rows left in SQLite; null for full-text index tables (derived from other tables). */
  rows: number | null;
  reason: string;
}

export interface MigrateDataResult {
  /** The target URL, password masked. */
  target: string;
  /** Migrations applied on the target. */
  migrations: number;
  tables: CopiedTable[];
  /** Columns of copied tables the target does not have, with how many rows hold a value there. */
  skippedColumns: { table: string; column: string; rows: number }[];
  skipped: SkippedTable[];
  /** Tables only the target has (its migrations made them; nothing copied into them, triggers off during the copy). */
  targetOnly: string[];
  rows: number;
  ms: number;
  /** The key files that must go with the data. */
  keys: { dir: string; files: string[] };
}

const PG_MAX_PARAMETERS = 65_535;

/** "name" as an SQL identifier, on either engine. */
const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The checks that need neither database: the URL, the plugins, the running server, the source file. */
function preflight(options: MigrateDataOptions): void {
  let url: URL | undefined;
  try {
    url = new URL(options.to);
  } catch {
    // said below
  }
  if (!url || !/^postgres(ql)?:$/.test(url.protocol) || !url.hostname || url.pathname.length < 2) {
    throw new MigrateDataError('--to must be a PostgreSQL URL: postgres://USER:PASSWORD@HOST:PORT/DATABASE');
  }
  const unported = options.plugins.filter((p) => !p.engines?.includes('postgres')).map((p) => p.name);
  if (unported.length) {
    throw new MigrateDataError(
      `plugin${unported.length > 1 ? 's' : ''} ${unported.join(', ')} ${unported.length > 1 ? 'do' : 'does'} not run on PostgreSQL yet: nothing copied (disable ${unported.length > 1 ? 'them' : 'it'} to move the rest; ${unported.length > 1 ? 'their' : 'its'} tables then stay in SQLite)`,
    );
  }
  const server = runningServer(options.dataDir);
  if (server) {
    throw new MigrateDataError(
      `a server is running on ${options.dataDir} (pid ${server.pid}${server.url ? `, ${server.url}` : ''}): stop it first, so that nothing is written during the move (if none runs, remove ${server.file})`,
    );
  }
  if (!fs.existsSync(options.source)) throw new MigrateDataError(`no Wharf database at ${options.source}: is the data dir right?`);
}

interface SourceTable {
  name: string;
  columns: string[];
  /** A full-text table or one of its shadow tables. */
  derived: boolean;
}

/** The source's tables (not views): ordinary ones with their columns (not generated ones), and the full-text ones. */
function sourceTables(db: Database): SourceTable[] {
  const list = db.prepare('PRAGMA table_list').all() as { schema: string; name: string; type: string }[];
  return list
    .filter((t) => t.schema === 'main' && t.type !== 'view' && !t.name.startsWith('sqlite_'))
    .map((t) => ({
      name: t.name,
      derived: t.type === 'virtual' || t.type === 'shadow',
      columns:
        t.type === 'table'
          ? (db.prepare(`PRAGMA table_xinfo(${ident(t.name)})`).all() as { name: string; hidden: number }[]).filter((c) => c.hidden === 0).map((c) => c.name)
          : [],
    }));
}

interface TargetTable {
  columns: Set<string>;
  identity: boolean;
}

async function targetTables(tx: Db): Promise<Map<string, TargetTable>> {
  const rows = await tx.all<{ table_name: string; column_name: string; is_identity: string; is_generated: string }>(
    `SELECT c.table_name, c.column_name, c.is_identity, c.is_generated
       FROM information_schema.columns c
       JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`,
  );
  const tables = new Map<string, TargetTable>();
  for (const r of rows) {
    let t = tables.get(r.table_name);
    if (!t) tables.set(r.table_name, (t = { columns: new Set(), identity: false }));
    if (r.is_generated === 'ALWAYS') continue; // computed by the target
    t.columns.add(r.column_name);
    if (r.is_identity === 'YES') t.identity = true;
  }
  return tables;
}

/** Refuses a target with any row in any table (Wharf's or not) of its schema. */
async function checkEmpty(tx: Db, target: string): Promise<void> {
  const tables = await tx.all<{ table_name: string }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name",
  );
  for (const { table_name: name } of tables) {
    if (await tx.value(`SELECT 1 FROM ${ident(name)} LIMIT 1`)) {
      const what = name === '_migrations' ? 'has Wharf migrations applied (_migrations has rows)' : `is not empty (table ${name} has rows)`;
      throw new MigrateDataError(`the target database ${target} ${what}: migrate-data moves an instance into an empty database only`);
    }
  }
}

/** Tables in an order where every table comes after those its foreign keys point to. */
async function parentsFirst(tx: Db, tables: readonly string[]): Promise<string[]> {
  const edges = await tx.all<{ child: string; parent: string }>(
    `SELECT ch.relname AS child, pa.relname AS parent
       FROM pg_constraint c
       JOIN pg_class ch ON ch.oid = c.conrelid
       JOIN pg_class pa ON pa.oid = c.confrelid
       JOIN pg_namespace n ON n.oid = ch.relnamespace
      WHERE c.contype = 'f' AND n.nspname = current_schema()`,
  );
  const wanted = new Set(tables);
  const parents = new Map(tables.map((t) => [t, new Set<string>()]));
  for (const e of edges) if (e.child !== e.parent && wanted.has(e.child) && wanted.has(e.parent)) parents.get(e.child)!.add(e.parent);
  const order: string[] = [];
  const done = new Set<string>();
  const visiting = new Set<string>();
  const visit = (t: string) => {
    if (done.has(t)) return;
    if (visiting.has(t)) throw new MigrateDataError(`the foreign keys of ${t} form a cycle: cannot order the copy`);
    visiting.add(t);
    for (const p of [...parents.get(t)!].sort()) visit(p);
    visiting.delete(t);
    done.add(t);
    order.push(t);
  };
  for (const t of [...tables].sort()) visit(t);
  return order;
}

/** Copies one table in batches; returns the rows copied. */
async function copyTable(source: Database, tx: Db, table: string, columns: readonly string[], identity: boolean, batchRows: number): Promise<number> {
  const perBatch = Math.max(1, Math.min(batchRows, Math.floor(PG_MAX_PARAMETERS / columns.length)));
  const list = columns.map(ident).join(', ');
  const head = `INSERT INTO ${ident(table)} (${list})${identity ? ' OVERRIDING SYSTEM VALUE' : ''} VALUES `;
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const insert = (rows: number) => head + Array.from({ length: rows }, () => tuple).join(', ');
  const full = insert(perBatch);
  // Integers as BigInt, so values past 2^53 arrive whole; pg sends them as text.
  const read = source
    .prepare(`SELECT ${list} FROM ${ident(table)}`)
    .raw(true)
    .safeIntegers(true);
  let params: unknown[] = [];
  let inBatch = 0;
  let copied = 0;
  for (const row of read.iterate() as IterableIterator<unknown[]>) {
    for (const v of row) params.push(v);
    if (++inBatch === perBatch) {
      await tx.run(full, params);
      copied += inBatch;
      params = [];
      inBatch = 0;
    }
  }
  if (inBatch) {
    await tx.run(insert(inBatch), params);
    copied += inBatch;
  }
  return copied;
}

/**
 * Moves each sequence of `table` (identity or serial columns) past the largest value copied, and
 * past `floor`: SQLite's AUTOINCREMENT counter for the table, which may be beyond the largest id
 * when the last rows were deleted (their ids must not be handed out again).
 */
async function advanceSequences(tx: Db, table: string, columns: readonly string[], floor: number): Promise<void> {
  for (const column of columns) {
    const sequence = await tx.value<string | null>('SELECT pg_get_serial_sequence(?, ?)', [ident(table), column]);
    if (!sequence) continue;
    await tx.value(`SELECT setval(?::regclass, m) FROM (SELECT greatest(max(${ident(column)}), ?::bigint) AS m FROM ${ident(table)}) s WHERE m > 0`, [
      sequence,
      floor,
    ]);
  }
}

/** SQLite's AUTOINCREMENT counters (`sqlite_sequence`), by table; empty when no table uses AUTOINCREMENT. */
function autoincrementCounters(db: Database): Map<string, number> {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'").get();
  if (!exists) return new Map();
  return new Map((db.prepare('SELECT name, seq FROM sqlite_sequence').all() as { name: string; seq: number }[]).map((r) => [r.name, Number(r.seq)]));
}

const countRows = (db: Database, table: string) =>
  Number(
    db
      .prepare(`SELECT count(*) FROM ${ident(table)}`)
      .pluck()
      .get(),
  );

export async function migrateData(options: MigrateDataOptions): Promise<MigrateDataResult> {
  const started = performance.now();
  preflight(options);
  const target = maskPassword(options.to);
  let pg: PostgresDb;
  try {
    pg = await openPostgres(options.to, { poolSize: 1, connectTimeoutMs: options.connectTimeoutMs ?? 5000 });
  } catch (err) {
    throw new MigrateDataError((err as Error).message);
  }
  let source: Database;
  try {
    source = openDatabase(options.source, { mustExist: true });
  } catch (err) {
    await pg.close();
    throw new MigrateDataError(`cannot open ${options.source}: ${(err as Error).message}`);
  }
  const sets = migrationSets(options.plugins);
  try {
    // One snapshot of the source for the whole copy.
    source.exec('BEGIN');
    const result = await pg.withAdvisoryLock(MIGRATION_LOCK_KEY, async (tx) => {
      await checkEmpty(tx, target);
      const applied = await migrate(tx, sets);
      const onTarget = await targetTables(tx);
      const copies: { table: string; columns: string[]; identity: boolean; rows: number }[] = [];
      const skipped: SkippedTable[] = [];
      const skippedColumns: MigrateDataResult['skippedColumns'] = [];
      for (const t of sourceTables(source)) {
        const there = onTarget.get(t.name);
        if (t.derived) skipped.push({ table: t.name, rows: null, reason: 'SQLite full-text index (the target has its own search)' });
        else if (t.name === '_migrations') skipped.push({ table: t.name, rows: countRows(source, t.name), reason: 'the target records its own migrations' });
        else if (!there) skipped.push({ table: t.name, rows: countRows(source, t.name), reason: 'not on the target (no enabled plugin creates it there)' });
        else {
          const columns = t.columns.filter((c) => there.columns.has(c));
          for (const c of t.columns.filter((c) => !there.columns.has(c))) {
            const rows = Number(
              source
                .prepare(`SELECT count(*) FROM ${ident(t.name)} WHERE ${ident(c)} IS NOT NULL`)
                .pluck()
                .get(),
            );
            skippedColumns.push({ table: t.name, column: c, rows });
          }
          copies.push({ table: t.name, columns, identity: there.identity, rows: countRows(source, t.name) });
        }
      }
      const order = await parentsFirst(
        tx,
        copies.map((c) => c.table),
      );
      const byName = new Map(copies.map((c) => [c.table, c]));
      const counters = autoincrementCounters(source);
      for (const { table } of copies) await tx.exec(`ALTER TABLE ${ident(table)} DISABLE TRIGGER USER`);
      const tables: CopiedTable[] = [];
      for (const name of order) {
        const c = byName.get(name)!;
        const copied = c.rows && c.columns.length ? await copyTable(source, tx, name, c.columns, c.identity, options.batchRows ?? 1000) : 0;
        const there = Number(await tx.value(`SELECT count(*) FROM ${ident(name)}`));
        if (copied !== c.rows || there !== c.rows) {
          throw new MigrateDataError(`${name}: ${c.rows} rows in SQLite but ${there} in the target after the copy; nothing committed`);
        }
        await advanceSequences(tx, name, c.columns, counters.get(name) ?? 0);
        tables.push({ table: name, rows: c.rows });
      }
      for (const { table } of copies) await tx.exec(`ALTER TABLE ${ident(table)} ENABLE TRIGGER USER`);
      skipped.sort((a, b) => a.table.localeCompare(b.table));
      const copied = new Set(order);
      const targetOnly = [...onTarget.keys()].filter((t) => !copied.has(t) && t !== '_migrations').sort();
      return { migrations: applied.length, tables, skipped, skippedColumns, targetOnly };
    });
    const keysDir = path.join(options.dataDir, 'keys');
    const keyFiles = fs.existsSync(keysDir) ? fs.readdirSync(keysDir).filter((f) => !f.endsWith('.tmp')) : [];
    return {
      target,
      ...result,
      rows: result.tables.reduce((n, t) => n + t.rows, 0),
      ms: Math.round(performance.now() - started),
      keys: { dir: keysDir, files: keyFiles.sort() },
    };
  } catch (err) {
    if (err instanceof MigrateDataError) throw err;
    throw new MigrateDataError(`copy to ${target} failed, nothing committed: ${(err as Error).message}`);
  } finally {
    if (source.inTransaction) source.exec('COMMIT');
    source.close();
    await pg.close();
  }
}
