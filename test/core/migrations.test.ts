// The migration runner on both engines (SQLite in a temporary file, PostgreSQL a fresh database on
// the test server, test/pg/postgres.sh), and whole starts on PostgreSQL: instances that start
// together on an empty database, a migration that fails. Issue 16 part 7 (BENCHMARKS.md): pending
// SQL migrations go to the server in batches, a migrated database is checked without the lock.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AnyPlugin } from '../../core/config.ts';
import { resolveConfig } from '../../core/config.ts';
import type { DbHandle } from '../../core/db.ts';
import { openPostgres } from '../../core/db-postgres.ts';
import { openSqlite } from '../../core/db-sqlite.ts';
import { loadKeys, prepareDataDir } from '../../core/keys.ts';
import { start } from '../../core/lifecycle.ts';
import { createLogger } from '../../core/logger.ts';
import { MIGRATION_LOCK_KEY, migrate, migrationSets, migrationStatus } from '../../core/migrations.ts';
import { definePlugin, type Migration } from '../../core/plugin.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { tempDir } from '../helpers/app.ts';
import { freePort } from '../helpers/cli.ts';
import { freshDatabase, postgresPlugins } from '../helpers/postgres.ts';

const quiet = createLogger('silent');
/** Advisory locks held or awaited in this test's database (pg_locks is the whole server's; other tests use it too). */
const OUR_ADVISORY_LOCKS =
  "SELECT COUNT(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

async function open(engine: 'sqlite' | 'postgres'): Promise<DbHandle> {
  if (engine === 'sqlite') return openSqlite(path.join(tempDir(), 'test.db'));
  return openPostgres(await freshDatabase(), { poolSize: 3, connectTimeoutMs: 5000 });
}

const tables = async (db: DbHandle, prefix: string) =>
  (
    await db.all<{ name: string }>(
      db.engine === 'postgres'
        ? 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE ? ORDER BY 1'
        : "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ORDER BY 1",
      [`${prefix}%`],
    )
  ).map((r) => r.name);

describe.each(['sqlite', 'postgres'] as const)('migrations on %s', (engine) => {
  it('runs SQL migrations in batches around code ones, in order, and records each once with its id as written', async () => {
    const db = await open(engine);
    try {
      const seen: string[] = [];
      const migrations: Migration[] = [
        // Ends in a line comment: the batch must not swallow what follows.
        { id: "001-o'brien", sql: 'CREATE TABLE b_one (id TEXT PRIMARY KEY) -- no semicolon, a comment last' },
        { id: '002-engine', sqlite: 'CREATE TABLE b_two (n INTEGER NOT NULL)', postgres: 'CREATE TABLE b_two (n BIGINT NOT NULL)' },
        {
          id: '003-code',
          async apply(tx) {
            // Sees what the batch before it created, in the same transaction.
            seen.push(...(await tables(tx as DbHandle, 'b_')));
            await tx.run('INSERT INTO b_two (n) VALUES (3)');
          },
        },
        { id: '004-sql', sql: "INSERT INTO b_one (id) SELECT 'after-' || n FROM b_two" },
        { id: '005-sql', sql: "CREATE TABLE b_five (id TEXT);\n-- two statements and a comment\nINSERT INTO b_five VALUES ('x');" },
      ];
      const sets = [{ plugin: "it's", migrations }];
      const applied = await migrate(db, sets);
      expect(applied.map((r) => r.id)).toEqual(["001-o'brien", '002-engine', '003-code', '004-sql', '005-sql']);
      expect(seen).toEqual(['b_one', 'b_two']);
      expect(await db.all('SELECT id FROM b_one')).toEqual([{ id: 'after-3' }]);
      expect(await db.value('SELECT COUNT(*) FROM b_five')).toBe(1);
      const recorded = await db.all<{ plugin: string; id: string; applied_at: string }>('SELECT plugin, id, applied_at FROM _migrations ORDER BY id');
      expect(recorded.map((r) => [r.plugin, r.id])).toEqual(migrations.map((m) => ["it's", m.id]));
      // One run, one time for all of them.
      expect(new Set(recorded.map((r) => r.applied_at)).size).toBe(1);
      expect((await migrationStatus(db, sets)).every((r) => r.appliedAt === recorded[0]!.applied_at)).toBe(true);
      expect(await migrate(db, sets)).toEqual([]);
    } finally {
      await db.close();
    }
  });

  it('names the migration that failed inside a batch, and leaves the database at the version before', async () => {
    const db = await open(engine);
    try {
      const first: Migration[] = [{ id: '001-base', sql: 'CREATE TABLE f_base (id TEXT)' }];
      await migrate(db, [{ plugin: 'f', migrations: first }]);
      const next: Migration[] = [
        ...first,
        { id: '002-fine', sql: 'CREATE TABLE f_two (id TEXT)' },
        { id: '003-broken', sql: 'CREATE TABLE f_three (id TEXT);\nINSERT INTO f_nowhere VALUES (1)' },
        { id: '004-fine', sql: 'CREATE TABLE f_four (id TEXT)' },
      ];
      const err = (await migrate(db, [{ plugin: 'f', migrations: next }]).catch((e: unknown) => e)) as Error;
      expect(err.message).toMatch(/^migration f\/003-broken failed: .*f_nowhere/);
      expect((await migrationStatus(db, [{ plugin: 'f', migrations: next }])).map((r) => [r.id, r.appliedAt !== null])).toEqual([
        ['001-base', true],
        ['002-fine', false],
        ['003-broken', false],
        ['004-fine', false],
      ]);
      expect(await tables(db, 'f_')).toEqual(['f_base']);
      // Fixed, it applies.
      next[2] = { id: '003-broken', sql: 'CREATE TABLE f_three (id TEXT)' };
      expect((await migrate(db, [{ plugin: 'f', migrations: next }])).map((r) => r.id)).toEqual(['002-fine', '003-broken', '004-fine']);
    } finally {
      await db.close();
    }
  });
});

describe('migrations on PostgreSQL: the advisory lock', () => {
  it('checks a migrated database without the lock, and waits for it when something is pending', async () => {
    const url = await freshDatabase();
    const db = await openPostgres(url, { poolSize: 3, connectTimeoutMs: 5000 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      const sets = [{ plugin: 'l', migrations: [{ id: '001', sql: 'CREATE TABLE l_one (id TEXT)' }] as Migration[] }];
      await migrate(db, sets);
      // Another instance migrating holds the lock (for as long as it likes).
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      const waited = new Promise((resolve) => setTimeout(resolve, 15_000, 'waited for the lock'));
      expect(await Promise.race([migrate(db, sets), waited])).toEqual([]);
      // With something pending, the migration waits for the lock...
      const more = [{ plugin: 'l', migrations: [...sets[0]!.migrations, { id: '002', sql: 'CREATE TABLE l_two (id TEXT)' }] }];
      let done = false;
      const pending = migrate(db, more).finally(() => (done = true));
      await expect.poll(async () => (await holder.query(`${OUR_ADVISORY_LOCKS} AND NOT granted`)).rows[0].n).toBe(1);
      expect(done).toBe(false);
      // ... and applies once it has it.
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      expect((await pending).map((r) => r.id)).toEqual(['002']);
    } finally {
      await holder.end();
      await db.close();
    }
  });
});

describe('migrations on PostgreSQL: the commit', () => {
  it("commits the runner's own transaction without waiting for the WAL flush, and leaves the connection as it was", async () => {
    const url = await freshDatabase();
    // The test server runs with synchronous_commit off; a production server with it on.
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`ALTER DATABASE ${admin.escapeIdentifier(new URL(url).pathname.slice(1))} SET synchronous_commit = on`);
    await admin.end();
    // One connection: the migration's and every query after it.
    const db = await openPostgres(url, { poolSize: 1, connectTimeoutMs: 5000 });
    try {
      expect(await db.value('SHOW synchronous_commit')).toBe('on');
      const inside: unknown[] = [];
      const migrations: Migration[] = [
        { id: '001', sql: 'CREATE TABLE c_one (id TEXT)' },
        {
          id: '002',
          async apply(tx) {
            inside.push(await tx.value('SHOW synchronous_commit'));
          },
        },
      ];
      expect((await migrate(db, [{ plugin: 'c', migrations }])).map((r) => r.id)).toEqual(['001', '002']);
      expect(inside).toEqual(['off']);
      expect(await db.value('SHOW synchronous_commit')).toBe('on');
      expect(await db.transaction((tx) => tx.value('SHOW synchronous_commit'))).toBe('on');
      expect(await db.value('SELECT COUNT(*) FROM _migrations')).toBe(2);
    } finally {
      await db.close();
    }
  });
});

describe('starts on PostgreSQL', () => {
  const ported = new Set(postgresPlugins().runs);
  const plugins = builtinPlugins.filter((p) => ported.has(p.name));

  async function startOn(url: string, dataDir: string, extra: AnyPlugin[] = []) {
    const config = resolveConfig([...plugins, ...extra], {
      env: {
        WHARF_DATABASE__URL: url,
        WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0',
      },
      flags: { listen: `127.0.0.1:${await freePort()}`, dataDir },
    });
    return start(config, { listen: true, log: quiet });
  }

  /** Two data dirs with the same keys: instances of one database (README, several instances). */
  function twoDataDirs(): [string, string] {
    const a = tempDir();
    const b = tempDir();
    prepareDataDir(a);
    loadKeys(a);
    fs.cpSync(path.join(a, 'keys'), path.join(b, 'keys'), { recursive: true });
    return [a, b];
  }

  const extraPlugin = (migrations: Migration[]) =>
    definePlugin({
      name: 'extra',
      description: 'migrations for the test',
      engines: ['sqlite', 'postgres'],
      config: z.strictObject({}),
      migrations,
      setup: () => ({}),
    }) as AnyPlugin;

  it('two instances starting together on an empty database both come up, the schema migrated once', async () => {
    const url = await freshDatabase();
    const [a, b] = twoDataDirs();
    const [one, two] = await Promise.all([startOn(url, a), startOn(url, b)]);
    try {
      for (const running of [one, two]) expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
      const rows = await one.data.all<{ plugin: string; id: string; applied_at: string }>('SELECT plugin, id, applied_at FROM _migrations');
      const expected = migrationSets(one.config.order).flatMap((s) => s.migrations.map((m) => `${s.plugin}/${m.id}`));
      expect(rows.map((r) => `${r.plugin}/${r.id}`).sort()).toEqual(expected.sort());
      // Applied by one of them, in one run: the other found nothing pending under the lock.
      expect(new Set(rows.map((r) => r.applied_at)).size).toBe(1);
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('a failing migration stops the start with its name, the database stays at the version before, the lock is free', async () => {
    const url = await freshDatabase();
    const [dataDir] = twoDataDirs();
    const v1: Migration[] = [{ id: '001-table', sql: 'CREATE TABLE extra_things (id TEXT PRIMARY KEY)' }];
    const first = await startOn(url, dataDir, [extraPlugin(v1)]);
    const before = await first.data.all('SELECT plugin, id, applied_at FROM _migrations ORDER BY plugin, id');
    await first.close();

    const v2: Migration[] = [
      ...v1,
      { id: '002-column', sql: 'ALTER TABLE extra_things ADD COLUMN name TEXT' },
      { id: '003-broken', sql: 'ALTER TABLE extra_things ADD COLUMN nope NOT_A_TYPE' },
    ];
    await expect(startOn(url, dataDir, [extraPlugin(v2)])).rejects.toThrow(
      /^database migration failed: migration extra\/003-broken failed: type "not_a_type" does not exist$/,
    );
    const db = await openPostgres(url, { poolSize: 1, connectTimeoutMs: 5000 });
    try {
      expect(await db.all('SELECT plugin, id, applied_at FROM _migrations ORDER BY plugin, id')).toEqual(before);
      expect(await db.all("SELECT column_name FROM information_schema.columns WHERE table_name = 'extra_things'")).toEqual([{ column_name: 'id' }]);
      expect(await db.value(OUR_ADVISORY_LOCKS)).toBe(0);
    } finally {
      await db.close();
    }
    // Fixed, the next start applies both.
    v2[2] = { id: '003-broken', sql: 'ALTER TABLE extra_things ADD COLUMN nope TEXT' };
    const fixed = await startOn(url, dataDir, [extraPlugin(v2)]);
    try {
      expect((await migrationStatus(fixed.data, [{ plugin: 'extra', migrations: v2 }])).every((r) => r.appliedAt !== null)).toBe(true);
    } finally {
      await fixed.close();
    }
  });
});
