// The data layer on both engines: the same calls, the same answers. SQLite in a temporary file,
// PostgreSQL a fresh database on the test server (test/pg/postgres.sh).
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConstraintError,
  ContentionError,
  type Database,
  DatabaseUnavailableError,
  type Db,
  type DbHandle,
  numberPlaceholders,
  openDatabase,
} from '../../core/db.ts';
import { finishInGroup, MAX_TRANSACTION_ATTEMPTS, openPostgres, PostgresDb, StaleAssumption } from '../../core/db-postgres.ts';
import { openSqlite, type SqliteDb } from '../../core/db-sqlite.ts';
import { syncConnection } from '../../core/lifecycle.ts';
import { toWharfError } from '../../core/errors.ts';
import { migrate, migrationStatus } from '../../core/migrations.ts';
import type { Migration } from '../../core/plugin.ts';
import { tempDir } from '../helpers/app.ts';
import { freshDatabase, legacyPluginDir, pgSentBehind, postgresPlugins } from '../helpers/postgres.ts';

const run = promisify(execFile);
const NODE = path.resolve('node_modules/.bin/node');

async function open(engine: 'sqlite' | 'postgres'): Promise<DbHandle> {
  if (engine === 'sqlite') return openSqlite(path.join(tempDir(), 'test.db'));
  return openPostgres(await freshDatabase(), { poolSize: 5, connectTimeoutMs: 5000 });
}

describe('placeholders for PostgreSQL', () => {
  it('numbers ? and @name, one number per name, and leaves literals, identifiers and comments alone', () => {
    expect(numberPlaceholders('SELECT * FROM t WHERE a = ? AND b = ?')).toEqual({ text: 'SELECT * FROM t WHERE a = $1 AND b = $2', names: null });
    expect(numberPlaceholders('SELECT \'?\', "@x", @a, @b, @a -- ? @c\n, /* ? */ x @> y')).toEqual({
      text: 'SELECT \'?\', "@x", $1, $2, $1 -- ? @c\n, /* ? */ x @> y',
      names: ['a', 'b'],
    });
    expect(() => numberPlaceholders('SELECT ?, @a')).toThrow(/either \? or @name/);
  });
});

describe.each(['sqlite', 'postgres'] as const)('the data layer on %s', (engine) => {
  let db: DbHandle;

  beforeAll(async () => {
    db = await open(engine);
    await db.exec(`
      CREATE TABLE parents (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER NOT NULL DEFAULT 0);
      CREATE TABLE children (id TEXT PRIMARY KEY, parent_id TEXT NOT NULL REFERENCES parents (id));
    `);
  });
  afterAll(async () => {
    await db?.close();
  });

  it('binds ? and @name, and returns rows, one row, a value and the changes', async () => {
    expect(db.engine).toBe(engine);
    await db.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['p1', 'Ada']);
    await db.run('INSERT INTO parents (id, name, n) VALUES (@id, @name, @n)', { id: 'p2', name: 'Grace', n: 2 });
    expect(await db.one('SELECT id, name, n FROM parents WHERE id = ?', ['p2'])).toEqual({ id: 'p2', name: 'Grace', n: 2 });
    expect(await db.one('SELECT id FROM parents WHERE id = ?', ['nobody'])).toBeUndefined();
    expect(await db.all('SELECT id FROM parents ORDER BY id')).toEqual([{ id: 'p1' }, { id: 'p2' }]);
    // COUNT(*) is a number on both (pg answers BIGINT as a string by default).
    expect(await db.value('SELECT COUNT(*) FROM parents')).toBe(2);
    expect(await db.value('SELECT n FROM parents WHERE name = @name AND n >= @min', { name: 'Grace', min: 1 })).toBe(2);
    expect(await db.value('SELECT n FROM parents WHERE id = ?', ['nobody'])).toBeUndefined();
    expect(await db.run('UPDATE parents SET n = n + 1', [])).toEqual({ changes: 2 });
    expect(await db.one('INSERT INTO parents (id, name) VALUES (?, ?) RETURNING id, n', ['p3', 'Edsger'])).toEqual({ id: 'p3', n: 0 });
  });

  it('answers a unique or foreign-key violation with a ConstraintError', async () => {
    const dup = await db.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['p9', 'Ada']).catch((e: unknown) => e);
    expect(dup).toBeInstanceOf(ConstraintError);
    expect(dup).toMatchObject({ kind: 'unique' });
    const pk = await db.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['p1', 'Someone']).catch((e: unknown) => e);
    expect(pk).toMatchObject({ name: 'ConstraintError', kind: 'unique' });
    const orphan = await db.run('INSERT INTO children (id, parent_id) VALUES (?, ?)', ['c1', 'nobody']).catch((e: unknown) => e);
    expect(orphan).toBeInstanceOf(ConstraintError);
    expect(orphan).toMatchObject({ kind: 'foreign_key' });
    // Other errors stay what they are.
    await expect(db.run('INSERT INTO nowhere VALUES (1)')).rejects.not.toBeInstanceOf(ConstraintError);
  });

  it('commits a transaction that resolves and rolls back one that throws, nested calls included', async () => {
    const value = await db.transaction(async (tx) => {
      await tx.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['t1', 'Kept']);
      await tx.transaction((inner) => inner.run('INSERT INTO children (id, parent_id) VALUES (?, ?)', ['tc1', 't1']));
      return 'done';
    });
    expect(value).toBe('done');
    const failed = db.transaction(async (tx) => {
      await tx.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['t2', 'Lost']);
      await tx.run('UPDATE parents SET n = 100 WHERE id = ?', ['t1']);
      await tx.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['t3', 'Kept']); // unique name: throws
    });
    await expect(failed).rejects.toBeInstanceOf(ConstraintError);
    expect(await db.all("SELECT id, n FROM parents WHERE id LIKE 't%' ORDER BY id")).toEqual([{ id: 't1', n: 0 }]);
    expect(await db.value('SELECT parent_id FROM children WHERE id = ?', ['tc1'])).toBe('t1');
  });

  it('keeps a query made outside an open transaction out of it', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const tx = db.transaction(async (t) => {
      await t.run('INSERT INTO parents (id, name) VALUES (?, ?)', ['iso', 'Isolated']);
      await gate;
      throw new Error('roll back');
    });
    // On SQLite this waits for the transaction; on PostgreSQL it runs beside it. Either way it
    // neither sees the uncommitted row nor is rolled back with it.
    const outside = db
      .run('INSERT INTO parents (id, name) VALUES (?, ?)', ['out', 'Outside'])
      .then(() => db.value('SELECT COUNT(*) FROM parents WHERE id = ?', ['iso']));
    setTimeout(release, 50);
    await expect(tx).rejects.toThrow('roll back');
    expect(await outside).toBe(0);
    expect(await db.value('SELECT name FROM parents WHERE id = ?', ['out'])).toBe('Outside');
  });

  it('migrates: sql for both, SQL per engine, async code; records them; applies nothing twice; rolls a failure back whole', async () => {
    const migrations: Migration[] = [
      { id: '001-sql', sql: 'CREATE TABLE m_one (id TEXT PRIMARY KEY)' },
      { id: '002-engine', sqlite: 'CREATE TABLE m_two (seq INTEGER PRIMARY KEY, v TEXT)', postgres: 'CREATE TABLE m_two (seq BIGSERIAL PRIMARY KEY, v TEXT)' },
      {
        id: '003-code',
        async apply(tx) {
          await tx.run('INSERT INTO m_two (v) VALUES (?)', [tx.engine]);
        },
      },
    ];
    const applied = await migrate(db, [{ plugin: 'm', migrations }]);
    expect(applied.map((r) => r.id)).toEqual(['001-sql', '002-engine', '003-code']);
    expect(await db.all('SELECT seq, v FROM m_two')).toEqual([{ seq: 1, v: engine }]);
    expect(await migrate(db, [{ plugin: 'm', migrations }])).toEqual([]);

    const broken: Migration[] = [...migrations, { id: '004-fine', sql: 'CREATE TABLE m_four (id TEXT)' }, { id: '005-broken', sql: 'CREATE TABLE m_five (' }];
    await expect(migrate(db, [{ plugin: 'm', migrations: broken }])).rejects.toThrow(/^migration m\/005-broken failed/);
    const status = await migrationStatus(db, [{ plugin: 'm', migrations: broken }]);
    expect(status.filter((r) => r.appliedAt === null).map((r) => r.id)).toEqual(['004-fine', '005-broken']);
    await expect(db.all('SELECT * FROM m_four')).rejects.toThrow();
  });
});

describe('SQLite: the transactions of one event-loop turn share one COMMIT', () => {
  let file: string;
  let db: SqliteDb;
  /** Another connection to the same file: it sees only what is committed. */
  let reader: Database;
  let statements: string[];

  beforeAll(async () => {
    file = path.join(tempDir(), 'group.db');
    db = openSqlite(file);
    await db.exec(`
      CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
      CREATE TABLE links (id INTEGER PRIMARY KEY, item_id INTEGER REFERENCES items (id) DEFERRABLE INITIALLY DEFERRED);
    `);
    reader = openDatabase(file);
    // Counts what the data layer sends to the connection as bare statements (BEGIN, SAVEPOINT, COMMIT...).
    const exec = db.raw.exec.bind(db.raw);
    db.raw.exec = (sql: string) => {
      statements.push(sql);
      return exec(sql);
    };
  });
  afterAll(async () => {
    reader?.close();
    await db?.close();
  });
  const committed = (name: string) => reader.prepare('SELECT count(*) FROM items WHERE name = ?').pluck().get(name) === 1;

  it('commits the transactions started in one turn once, and settles each only after that COMMIT', async () => {
    statements = [];
    const seenAtSettle: boolean[] = [];
    const names = Array.from({ length: 10 }, (_, i) => `turn-${i}`);
    let finishedBeforeCommit = 0;
    const all = names.map((name) =>
      db
        .transaction(async (tx) => {
          await tx.run('INSERT INTO items (name) VALUES (?)', [name]);
          return name;
        })
        .then((value) => {
          seenAtSettle.push(committed(value));
          return value;
        }),
    );
    // Every fn has run by the next microtasks' end, yet nothing is committed nor settled before the turn ends.
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    for (let i = 0; i < 20; i++) await Promise.resolve();
    finishedBeforeCommit = names.filter(committed).length;
    expect(finishedBeforeCommit).toBe(0);
    expect(seenAtSettle).toEqual([]);
    expect(await Promise.all(all)).toEqual(names);
    expect(seenAtSettle).toEqual(names.map(() => true));
    expect(statements.filter((s) => s === 'BEGIN IMMEDIATE')).toHaveLength(1);
    expect(statements.filter((s) => s === 'COMMIT')).toHaveLength(1);
    expect(statements.filter((s) => s.startsWith('SAVEPOINT'))).toHaveLength(10);
  });

  it('rolls back a transaction that throws alone: the others of its turn commit, it rejects with its own error', async () => {
    statements = [];
    const ok1 = db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['kept-1']));
    const bad = db.transaction(async (tx) => {
      await tx.run('INSERT INTO items (name) VALUES (?)', ['lost-1']);
      await tx.run('INSERT INTO items (name) VALUES (?)', ['kept-1']); // unique name: throws
    });
    const ok2 = db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['kept-2']));
    await expect(bad).rejects.toBeInstanceOf(ConstraintError);
    await expect(ok1).resolves.toEqual({ changes: 1 });
    await expect(ok2).resolves.toEqual({ changes: 1 });
    expect([committed('kept-1'), committed('lost-1'), committed('kept-2')]).toEqual([true, false, true]);
    expect(statements.filter((s) => s === 'COMMIT')).toHaveLength(1);
  });

  it('fails every transaction of a turn whose COMMIT fails, and commits none of their rows', async () => {
    const ok = db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['commit-failed-1']));
    // A deferred foreign key is checked at COMMIT: the shared COMMIT fails.
    const dangling = db.transaction((tx) => tx.run('INSERT INTO links (item_id) VALUES (?)', [999_999]));
    await expect(ok).rejects.toThrow(/FOREIGN KEY/);
    await expect(dangling).rejects.toThrow(/FOREIGN KEY/);
    expect(committed('commit-failed-1')).toBe(false);
    expect(reader.prepare('SELECT count(*) FROM links').pluck().get()).toBe(0);
    // The next turn's transactions start afresh.
    await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['after-failure']));
    expect(committed('after-failure')).toBe(true);
  });

  it('keeps queries outside a transaction, and the synchronous ctx.db, out of a group waiting for its COMMIT', async () => {
    const tx = db.transaction((t) => t.run('INSERT INTO items (name) VALUES (?)', ['pending-row']));
    await Promise.resolve();
    await Promise.resolve();
    // Waits for the COMMIT: it sees the row, committed.
    const outside = db.value<number>('SELECT count(*) FROM items WHERE name = ?', ['pending-row']).then((n) => [n, committed('pending-row')]);
    expect(await outside).toEqual([1, true]);
    await tx;
    // ctx.db commits a waiting group before it is used: its own write is not part of that group.
    const sync = syncConnection(db);
    const next = db.transaction((t) => t.run('INSERT INTO items (name) VALUES (?)', ['before-sync']));
    await Promise.resolve();
    await Promise.resolve();
    sync.prepare('INSERT INTO items (name) VALUES (?)').run('sync-write');
    expect([committed('before-sync'), committed('sync-write')]).toEqual([true, true]);
    await next;
  });
});

describe('PostgreSQL only', () => {
  let url: string;
  beforeAll(async () => {
    url = await freshDatabase();
  });

  it('retries a transaction that meets a serialization failure, so both conflicting ones succeed', async () => {
    const db = await openPostgres(url, { poolSize: 4, connectTimeoutMs: 5000 });
    try {
      await db.exec("CREATE TABLE counters (id TEXT PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counters VALUES ('c', 0)");
      let attempts = 0;
      let bothRead!: () => void;
      const read = new Promise<void>((resolve) => (bothRead = resolve));
      let readers = 0;
      const increment = () =>
        db.transaction(async (tx) => {
          attempts++;
          const n = (await tx.value<number>('SELECT n FROM counters WHERE id = ?', ['c']))!;
          // The first attempts of both read before either writes: a read-write conflict.
          if (++readers === 2) bothRead();
          if (readers <= 2) await read;
          await tx.run('UPDATE counters SET n = ? WHERE id = ?', [n + 1, 'c']);
        });
      await Promise.all([increment(), increment()]);
      expect(attempts).toBeGreaterThan(2); // at least one ran again
      expect(await db.value('SELECT n FROM counters')).toBe(2); // no lost update
    } finally {
      await db.close();
    }
  });

  it('gives up on a transaction refused by conflicts every time with a ContentionError, which the server answers as 503 with Retry-After', async () => {
    const db = await openPostgres(url, { poolSize: 2, connectTimeoutMs: 5000 });
    try {
      await db.exec('CREATE TABLE contended (n INTEGER)');
      let attempts = 0;
      const err = await db
        .transaction(async (tx) => {
          attempts++;
          await tx.run('INSERT INTO contended VALUES (?)', [attempts]);
          throw Object.assign(new Error('could not serialize access due to read/write dependencies among transactions'), { code: '40001' });
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ContentionError);
      expect(attempts).toBe(MAX_TRANSACTION_ATTEMPTS);
      expect(await db.value('SELECT count(*)::int FROM contended')).toBe(0); // every attempt rolled back
      const answered = toWharfError(err);
      expect([answered.code, answered.status, answered.retryAfter]).toEqual(['unavailable', 503, 1]);
      expect(answered.message).toMatch(/^The database is busy with conflicting writes \(8 attempts\); nothing was changed, try again$/);
      // Any other error is not retried and passes through as it is.
      attempts = 0;
      const other = await db
        .transaction(async () => {
          attempts++;
          throw Object.assign(new Error('boom'), { code: '22P02' });
        })
        .catch((e: unknown) => e);
      expect([attempts, (other as Error).message]).toEqual([1, 'boom']);
    } finally {
      await db.close();
    }
  });

  it('runs transactions naming a common lock key one after the other, across pools, each on a snapshot taken after the previous commit: no retry, no deadlock', async () => {
    // Two pools: two instances. The in-process queue is per pool; the server's advisory lock is shared.
    const a = await openPostgres(url, { poolSize: 3, connectTimeoutMs: 5000 });
    const b = await openPostgres(url, { poolSize: 3, connectTimeoutMs: 5000 });
    try {
      await a.exec("CREATE TABLE locked (id TEXT PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO locked VALUES ('x', 0), ('y', 0)");
      let attempts = 0;
      // Read, wait a little, write: without the lock each pair of these conflicts (and loses updates without SERIALIZABLE).
      const increment = (db: PostgresDb, keys: string[], ids: string[]) =>
        db.transaction(
          async (tx) => {
            attempts++;
            const ns: number[] = [];
            for (const id of ids) ns.push((await tx.value<number>('SELECT n FROM locked WHERE id = ?', [id]))!);
            await new Promise((r) => setTimeout(r, 2));
            for (const [i, id] of ids.entries()) await tx.run('UPDATE locked SET n = ? WHERE id = ?', [ns[i]! + 1, id]);
          },
          { lock: keys },
        );
      const runs: Promise<void>[] = [];
      for (let i = 0; i < 15; i++) {
        // x alone, and x with y named in both orders (as a send A -> B and one B -> A), from both pools.
        runs.push(increment(i % 2 ? a : b, ['test:x'], ['x']));
        runs.push(increment(i % 2 ? b : a, ['test:x', 'test:y'], ['x', 'y']));
        runs.push(increment(i % 2 ? a : b, ['test:y', 'test:x'], ['y', 'x']));
      }
      await Promise.all(runs);
      expect(attempts).toBe(45); // none ran again
      expect(await a.all('SELECT id, n FROM locked ORDER BY id')).toEqual([
        { id: 'x', n: 45 },
        { id: 'y', n: 30 },
      ]);
      // The locks are released: nothing of this test holds an advisory lock now.
      expect(
        await a.value(
          "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        ),
      ).toBe(0);
      // A transaction that throws releases its keys too.
      const err = await a
        .transaction(
          async () => {
            throw new Error('boom');
          },
          { lock: ['test:x'] },
        )
        .catch((e: unknown) => e);
      expect((err as Error).message).toBe('boom');
      await b.transaction(async (tx) => tx.run("UPDATE locked SET n = 0 WHERE id = 'x'"), { lock: ['test:x'] });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('runs two concurrent migrators one after the other under the advisory lock: each migration applied once', async () => {
    const a = await openPostgres(url, { poolSize: 2, connectTimeoutMs: 5000 });
    const b = await openPostgres(url, { poolSize: 2, connectTimeoutMs: 5000 });
    try {
      const migrations: Migration[] = [
        { id: '001', sql: 'CREATE TABLE race (id TEXT PRIMARY KEY)' },
        {
          id: '002',
          async apply(tx) {
            await tx.run("INSERT INTO race VALUES ('once')");
            await new Promise((resolve) => setTimeout(resolve, 200)); // the other migrator is waiting by now
          },
        },
      ];
      const sets = [{ plugin: 'race', migrations }];
      const [ra, rb] = await Promise.all([migrate(a, sets), migrate(b, sets)]);
      expect([ra.length, rb.length].sort()).toEqual([0, 2]);
      expect(await a.all('SELECT id FROM race')).toEqual([{ id: 'once' }]);
      expect(await a.value("SELECT COUNT(*) FROM _migrations WHERE plugin = 'race'")).toBe(2);
      expect(a).toBeInstanceOf(PostgresDb);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('no connection in time, or a server that went away: DatabaseUnavailableError (503, Retry-After, exposed), nothing written', async () => {
    const db = await openPostgres(url, { poolSize: 1, connectTimeoutMs: 200 });
    try {
      await db.exec('CREATE TABLE unavailable_probe (n INTEGER)');
      const held = await db.pool.connect();
      const settled = await Promise.all(
        [
          db.all('SELECT 1'),
          db.transaction((tx) => tx.run('INSERT INTO unavailable_probe VALUES (1)')),
          db.transaction((tx) => tx.run('INSERT INTO unavailable_probe VALUES (2)'), { lock: ['probe'] }),
          db.withAdvisoryLock(42, (tx) => tx.run('INSERT INTO unavailable_probe VALUES (3)')),
        ].map((attempt) =>
          (attempt as Promise<unknown>).then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      );
      for (const err of settled as DatabaseUnavailableError[]) {
        expect(err).toBeInstanceOf(DatabaseUnavailableError);
        expect(err).toMatchObject({ status: 503, retryAfter: 1, expose: true });
        expect(err.message).toMatch(/^The database is unavailable \(timeout exceeded when trying to connect\)/);
        // What a request answers with it: the documented 503, not a 500.
        expect(toWharfError(err)).toMatchObject({ code: 'unavailable', status: 503, retryAfter: 1 });
      }
      held.release();
      expect(await db.value('SELECT COUNT(*)::int FROM unavailable_probe')).toBe(0);
    } finally {
      await db.close();
    }
    // A server that is not there any more (the pool opened, then the address refuses).
    const gone = new PostgresDb(
      new (await import('pg')).default.Pool({ connectionString: 'postgres://wharf@127.0.0.1:1/wharf', connectionTimeoutMillis: 2000 }),
    );
    try {
      const err = await gone.all('SELECT 1').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DatabaseUnavailableError);
      expect((err as Error).message).toContain('ECONNREFUSED');
    } finally {
      await gone.close();
    }
  });

  it('says in one line that an unreachable server cannot be reached, without the password', async () => {
    const err = (await openPostgres('postgres://wharf:hunter2@127.0.0.1:1/wharf', { poolSize: 1, connectTimeoutMs: 2000 }).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(err).toBeInstanceOf(Error);
    expect(err.message).toMatch(/^cannot connect to PostgreSQL at 127\.0\.0\.1:1\/wharf: .*ECONNREFUSED/);
    expect(err.message).not.toContain('hunter2');
  });

  it('wharf serve with an unreachable PostgreSQL: one line on stderr, exit 1, no stack', async () => {
    const dataDir = tempDir();
    const result = await run(NODE, ['bin/wharf.ts', 'serve', '--data-dir', dataDir], {
      env: {
        ...process.env,
        WHARF_DATABASE__URL: 'postgres://wharf:hunter2@127.0.0.1:1/wharf',
        WHARF_DATABASE__CONNECT_TIMEOUT_MS: '2000',
        WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__DIR: legacyPluginDir(),
      },
    }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    expect(result).toMatchObject({ code: 1 });
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    // A plugin that does not run on PostgreSQL (from outside the tree) is named before any connection.
    expect(lines[0]).toMatch(/^wharf: plugin \w+ does not run on PostgreSQL yet; disable it or use SQLite$/);
    const only = await run(NODE, ['bin/wharf.ts', 'serve', '--data-dir', dataDir], {
      env: {
        ...process.env,
        WHARF_DATABASE__URL: 'postgres://wharf:hunter2@127.0.0.1:1/wharf',
        WHARF_DATABASE__CONNECT_TIMEOUT_MS: '2000',
        ...onlyPortedPluginsEnv(),
      },
    }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    expect(only).toMatchObject({ code: 1 });
    expect(only.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^wharf: cannot connect to PostgreSQL at 127\.0\.0\.1:1\/wharf: .*ECONNREFUSED/)]);
    expect(only.stderr).not.toContain('hunter2');
  });
});

describe('PostgreSQL: transactions naming the same keys share one BEGIN ... COMMIT (group commit)', () => {
  let db: PostgresDb;
  /** Another pool: it sees only what is committed. */
  let outside: PostgresDb;
  const LOCK = { lock: ['test:group'] };

  beforeAll(async () => {
    const url = await freshDatabase();
    db = await openPostgres(url, { poolSize: 4, connectTimeoutMs: 5000 });
    outside = await openPostgres(url, { poolSize: 2, connectTimeoutMs: 5000 });
    await db.exec(`
      CREATE TABLE items (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, xid BIGINT);
      CREATE TABLE counters (id TEXT PRIMARY KEY, n INTEGER NOT NULL);
      INSERT INTO counters VALUES ('c', 0);
    `);
  });
  afterAll(async () => {
    await db?.close();
    await outside?.close();
  });

  const committed = async (name: string) => (await outside.value<number>('SELECT count(*) FROM items WHERE name = ?', [name])) === 1;
  /** Inserts a row named `name` with the id of the top-level transaction it ran in (a savepoint's rows carry their parent's). */
  const insert = (tx: Db, name: string) => tx.run('INSERT INTO items (name, xid) VALUES (?, txid_current())', [name]);
  /** A transaction holding the key until `open` is called: those naming the key meanwhile wait together. */
  function holder() {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const done = db.transaction(async (tx) => {
      // Its group's snapshot is taken here.
      await tx.value('SELECT count(*) FROM items');
      started();
      await gate;
      await insert(tx, `holder-${Math.random()}`);
    }, LOCK);
    return { open, running, done };
  }

  it('runs those that wait together in one transaction, each in a savepoint, and settles each only after the COMMIT', async () => {
    const hold = holder();
    await hold.running;
    const names = Array.from({ length: 10 }, (_, i) => `group-${i}`);
    const seenAtSettle: boolean[] = [];
    const all = names.map((name) =>
      db
        .transaction(async (tx) => {
          await insert(tx, name);
          // Each member sees the work of those before it in the group.
          return tx.value<number>("SELECT count(*) FROM items WHERE name LIKE 'group-%'");
        }, LOCK)
        .then(async (seen) => {
          seenAtSettle.push(await committed(name));
          return seen;
        }),
    );
    hold.open();
    await hold.done;
    expect(await Promise.all(all)).toEqual(names.map((_, i) => i + 1));
    expect(seenAtSettle).toEqual(names.map(() => true));
    // One top-level transaction for the ten.
    expect(await outside.value<number>("SELECT count(DISTINCT xid) FROM items WHERE name LIKE 'group-%'")).toBe(1);
  });

  it('rolls back a member that throws alone, and one that caught an error and went on, while the others commit', async () => {
    const hold = holder();
    await hold.running;
    const ok1 = db.transaction((tx) => insert(tx, 'kept-1'), LOCK);
    const bad = db.transaction(async (tx) => {
      await insert(tx, 'lost-1');
      await insert(tx, 'kept-1'); // unique name: throws
    }, LOCK);
    // Catches its error and returns: the transaction it was in is aborted, so it fails at its release.
    const swallowed = db.transaction(async (tx) => {
      await insert(tx, 'lost-2');
      await insert(tx, 'kept-1').catch(() => undefined);
      return 'returned';
    }, LOCK);
    const ok2 = db.transaction((tx) => insert(tx, 'kept-2'), LOCK);
    hold.open();
    await expect(bad).rejects.toBeInstanceOf(ConstraintError);
    await expect(swallowed).rejects.toMatchObject({ code: '25P02' });
    await expect(ok1).resolves.toEqual({ changes: 1 });
    await expect(ok2).resolves.toEqual({ changes: 1 });
    expect([await committed('kept-1'), await committed('lost-1'), await committed('lost-2'), await committed('kept-2')]).toEqual([true, false, false, true]);
    expect(await outside.value<number>("SELECT count(DISTINCT xid) FROM items WHERE name IN ('kept-1', 'kept-2')")).toBe(1);
  });

  it("sends a member's first statement behind the release of the one before, without waiting for its answer; behind a member that aborted the transaction, it runs again and commits once", async () => {
    const behind = pgSentBehind();
    let afterRuns = 0;
    let settled: PromiseSettledResult<unknown>[];
    try {
      const hold = holder();
      await hold.running;
      const members = [
        ...['piped-1', 'piped-2', 'piped-3'].map((name) => db.transaction((tx) => insert(tx, name), LOCK)),
        // Catches its error and returns: the transaction is aborted when the next member's statements arrive.
        db.transaction(async (tx) => {
          await insert(tx, 'piped-lost');
          await insert(tx, 'piped-1').catch(() => undefined);
        }, LOCK),
        db.transaction(async (tx) => {
          afterRuns++;
          await insert(tx, 'piped-after');
        }, LOCK),
      ];
      hold.open();
      await hold.done;
      settled = await Promise.allSettled(members);
    } finally {
      behind.restore();
    }
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({ code: '25P02' });
    // The first statements of members 2 to 5, each sent behind the RELEASE before it; the fifth's second run waited for the rollback.
    expect(behind.texts.filter((sql) => sql.startsWith('INSERT INTO items'))).toHaveLength(4);
    expect(afterRuns).toBe(2);
    const names = ['piped-1', 'piped-2', 'piped-3', 'piped-lost', 'piped-after'];
    expect(await Promise.all(names.map(committed))).toEqual([true, true, true, false, true]);
    expect(await outside.value<number>("SELECT count(*) FROM items WHERE name = 'piped-after'")).toBe(1);
    expect(await outside.value<number>("SELECT count(DISTINCT xid) FROM items WHERE name LIKE 'piped-%'")).toBe(1);
  });

  it("reads a member's work left to finish (finishInGroup) while the next member runs; when it fails, that member fails alone with its own error and the next runs again and commits once", async () => {
    const hold = holder();
    await hold.running;
    const order: string[] = [];
    const runs = new Map<string, number>();
    const count = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
    /** A member inserting `name`, then leaving the insert of `late` to finish after its turn. */
    const member = (name: string, late: string) =>
      db.transaction(async (tx) => {
        count(name);
        order.push(`${name} runs`);
        await insert(tx, name);
        const work = insert(tx, late).then(() => order.push(`${name}'s work answered`));
        expect(finishInGroup(tx, work)).toBe(true);
        return name;
      }, LOCK);
    const members = [
      member('later-1', 'later-1-work'),
      // Its work breaks a unique constraint: PostgreSQL refuses it, and then everything after it
      // on the connection until the rollback (the next member's statements: 25P02).
      member('later-2', 'later-1-work'),
      member('later-3', 'later-3-work'),
      // The last one's work is read before the COMMIT: it fails alone too.
      member('later-4', 'later-3-work'),
    ];
    hold.open();
    await hold.done;
    const settled = await Promise.allSettled(members);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    for (const i of [1, 3]) {
      const reason = (settled[i] as PromiseRejectedResult).reason;
      expect(reason).toBeInstanceOf(ConstraintError);
      expect(reason.message).toMatch(/duplicate key/);
    }
    // The next member ran before the work of the one before was answered.
    expect(order.indexOf('later-2 runs')).toBeLessThan(order.indexOf("later-1's work answered"));
    // The member behind the failed work ran twice (its first run's statements were refused), the others once.
    expect(Object.fromEntries(runs)).toEqual({ 'later-1': 1, 'later-2': 1, 'later-3': 2, 'later-4': 1 });
    const names = ['later-1', 'later-1-work', 'later-2', 'later-3', 'later-3-work', 'later-4'];
    expect(await Promise.all(names.map(committed))).toEqual([true, true, false, true, true, false]);
    expect(await outside.value<number>("SELECT count(*) FROM items WHERE name LIKE 'later-%'")).toBe(4);
    expect(await outside.value<number>("SELECT count(DISTINCT xid) FROM items WHERE name LIKE 'later-%'")).toBe(1);
    // Outside a group (no lock keys) there is nothing to leave it to: the caller waits itself.
    expect(await db.transaction(async (tx) => finishInGroup(tx, Promise.resolve()))).toBe(false);
  });

  it('fails a member alone whose work left to finish threw after its statement succeeded (the attempt is rolled back, the others run again and commit once); a conflict in it dooms the attempt', async () => {
    const hold = holder();
    await hold.running;
    const runs = new Map<string, number>();
    const count = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
    const plain = (name: string) =>
      db.transaction(async (tx) => {
        count(name);
        await insert(tx, name);
      }, LOCK);
    const members = [
      plain('after-release-1'),
      db.transaction(async (tx) => {
        count('after-release-bad');
        await insert(tx, 'after-release-bad');
        // The statement succeeds; what follows its answer throws, once the next member runs (its savepoint is released by then).
        finishInGroup(
          tx,
          insert(tx, 'after-release-bad-work').then(() => {
            throw new Error('refused after the answer');
          }),
        );
      }, LOCK),
      plain('after-release-2'),
      db.transaction(async (tx) => {
        count('after-release-conflict');
        await insert(tx, `after-release-conflict-${runs.get('after-release-conflict')}`);
        const conflict = Object.assign(new Error('could not serialize access'), { code: '40001' });
        if (runs.get('after-release-conflict') === 1) finishInGroup(tx, Promise.reject(conflict));
      }, LOCK),
      plain('after-release-3'),
    ];
    hold.open();
    await hold.done;
    const settled = await Promise.allSettled(members);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({ message: 'refused after the answer' });
    // First attempt: rolled back at the failed work (members 1 to 3 ran); second: rolled back at
    // the conflict (1, 2, conflict, 3 ran); third: all commit.
    expect(Object.fromEntries(runs)).toEqual({
      'after-release-1': 3,
      'after-release-bad': 1,
      'after-release-2': 3,
      'after-release-conflict': 2,
      'after-release-3': 2,
    });
    expect(await outside.all("SELECT name FROM items WHERE name LIKE 'after-release-%' ORDER BY id")).toEqual([
      { name: 'after-release-1' },
      { name: 'after-release-2' },
      { name: 'after-release-conflict-2' },
      { name: 'after-release-3' },
    ]);
  });

  it("runs the attempt again when a member's work left to finish finds a StaleAssumption: counted for that member alone, until it gives up after MAX_TRANSACTION_ATTEMPTS", async () => {
    const hold = holder();
    await hold.running;
    const runs = new Map<string, number>();
    const count = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
    /** Inserts `name`, leaving a check to the group that finds its assumption stale on the first `stale` runs. */
    const member = (name: string, stale: number) =>
      db.transaction(async (tx) => {
        count(name);
        const run = runs.get(name)!;
        const work = insert(tx, name).then(() => {
          if (run <= stale) throw new StaleAssumption(`${name} assumed wrong`);
        });
        expect(finishInGroup(tx, work)).toBe(true);
        return name;
      }, LOCK);
    const members = [member('stale-before', 0), member('stale-once', 1), member('stale-after', 0), member('stale-always', Infinity)];
    hold.open();
    await hold.done;
    const settled = await Promise.allSettled(members);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
    expect((settled[3] as PromiseRejectedResult).reason).toBeInstanceOf(ContentionError);
    // The one that kept finding its assumption stale gave up after its attempts; the others ran
    // again with each doomed attempt, uncounted (more runs than that), and committed once each.
    expect(runs.get('stale-always')).toBe(MAX_TRANSACTION_ATTEMPTS);
    expect(runs.get('stale-before')).toBeGreaterThan(MAX_TRANSACTION_ATTEMPTS);
    expect(runs.get('stale-once')).toBe(runs.get('stale-before'));
    const names = ['stale-before', 'stale-once', 'stale-after', 'stale-always'];
    expect(await Promise.all(names.map(committed))).toEqual([true, true, true, false]);
    expect(await outside.value<number>("SELECT count(*) FROM items WHERE name LIKE 'stale-%'")).toBe(3);
  });

  it('runs the members of an attempt doomed by a serialization failure again, even when the member that met it caught it; each commits once', async () => {
    await db.run("UPDATE counters SET n = 0 WHERE id = 'c'");
    const hold = holder();
    await hold.running;
    const runs = new Map<string, number>();
    const count = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
    let conflicted = false;
    const before = db.transaction(async (tx) => {
      count('before');
      await insert(tx, 'doomed-before');
    }, LOCK);
    const culprit = db.transaction(async (tx) => {
      count('culprit');
      const n = (await tx.value<number>("SELECT n FROM counters WHERE id = 'c'"))!;
      if (!conflicted) {
        conflicted = true;
        // A writer that names no key changes the row after this snapshot read it.
        await outside.transaction((o) => o.run("UPDATE counters SET n = n + 100 WHERE id = 'c'"));
      }
      await tx.run("UPDATE counters SET n = ? WHERE id = 'c'", [n + 1]).catch(() => undefined);
      await insert(tx, `doomed-culprit-${runs.get('culprit')}`).catch(() => undefined);
    }, LOCK);
    const after = db.transaction(async (tx) => {
      count('after');
      await insert(tx, 'doomed-after');
    }, LOCK);
    hold.open();
    await Promise.all([hold.done, before, culprit, after]);
    // The attempt ended at the culprit: the member before it ran twice, the one after it once.
    expect(Object.fromEntries(runs)).toEqual({ before: 2, culprit: 2, after: 1 });
    expect(await outside.value("SELECT n FROM counters WHERE id = 'c'")).toBe(101); // no lost update
    expect(await outside.all("SELECT name FROM items WHERE name LIKE 'doomed-%' ORDER BY id")).toEqual([
      { name: 'doomed-before' },
      { name: 'doomed-culprit-2' },
      { name: 'doomed-after' },
    ]);
  });

  it('gives up on a member that meets a conflict every time with a ContentionError, and takes none of its group with it', async () => {
    const hold = holder();
    await hold.running;
    let attempts = 0;
    let others = 0;
    const first = db.transaction((tx) => insert(tx, 'survivor-1').then(() => others++), LOCK);
    const poison = db.transaction(async (tx) => {
      attempts++;
      await insert(tx, `poison-${attempts}`);
      throw Object.assign(new Error('could not serialize access due to read/write dependencies among transactions'), { code: '40001' });
    }, LOCK);
    const last = db.transaction((tx) => insert(tx, 'survivor-2').then(() => others++), LOCK);
    hold.open();
    const err = await poison.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContentionError);
    expect(attempts).toBe(MAX_TRANSACTION_ATTEMPTS);
    await Promise.all([first, last]);
    expect([await committed('survivor-1'), await committed('survivor-2')]).toEqual([true, true]);
    // The member before it ran in each of its attempts and once more, the one after it once: both committed.
    expect(others).toBe(MAX_TRANSACTION_ATTEMPTS + 2);
    expect(await outside.value<number>("SELECT count(*) FROM items WHERE name LIKE 'poison-%'")).toBe(0);
  });

  it("runs each member in its caller's async context, and on a snapshot that sees what its caller committed before asking", async () => {
    const als = new AsyncLocalStorage<string>();
    const hold = holder();
    await hold.running;
    const contexts = ['a', 'b', 'c'].map((name) => als.run(name, () => db.transaction(async () => als.getStore(), LOCK)));
    hold.open();
    await hold.done;
    expect(await Promise.all(contexts)).toEqual(['a', 'b', 'c']);
    // A group is running (its first member waits inside it): a caller commits a row, then asks for
    // a transaction naming the same key. It runs in the next group, whose snapshot has the row.
    const again = holder();
    await again.running;
    await outside.run("INSERT INTO items (name) VALUES ('committed-before-asking')");
    const seen = db.transaction((tx) => tx.value<number>("SELECT count(*) FROM items WHERE name = 'committed-before-asking'"), LOCK);
    again.open();
    expect(await seen).toBe(1);
    await again.done;
    // The locks are released: nothing of these tests holds an advisory lock now.
    expect(
      await db.value(
        "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      ),
    ).toBe(0);
  });
});

/** WHARF_* variables that disable every built-in plugin not ported to the data layer. */
function onlyPortedPluginsEnv(): Record<string, string> {
  const off = postgresPlugins().not;
  return {
    ...Object.fromEntries(off.map((p) => [`WHARF_PLUGINS__${p.toUpperCase()}__ENABLED`, 'false'])),
    WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
    WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
  };
}
