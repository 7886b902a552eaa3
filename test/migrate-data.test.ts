/**
 * `wharf migrate-data --to postgres://...`: a real instance filled through its API on SQLite,
 * moved into a fresh PostgreSQL database, then served from it with the same data dir (the same
 * data through the API, logins and the old session included, an app's files found by every kind of
 * search term and downloaded); the copy itself on tables made
 * for it (identity columns, foreign keys against name order, triggers, 64-bit integers, blobs,
 * batches); and every refusal, each one line with nothing written to the target.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../core/db.ts';
import { openSqlite } from '../core/db-sqlite.ts';
import { migrateData } from '../core/migrate-data.ts';
import { migrate } from '../core/migrations.ts';
import type { Migration } from '../core/plugin.ts';
import { tempDir } from './helpers/app.ts';
import { startCluster } from './helpers/cluster.ts';
import { serve, type Served, wharf, wharfAsync } from './helpers/cli.ts';
import { login } from './helpers/identity.ts';
import { freshDatabase, legacyPluginDir, postgresPlugins } from './helpers/postgres.ts';
import { overHttp, setupOwner } from './helpers/served.ts';

/** The built-in plugins that do not run on PostgreSQL yet, off (they refuse a move); none today. */
const onlyPorted = Object.fromEntries(postgresPlugins().not.map((name) => [`WHARF_PLUGINS__${name.toUpperCase()}__ENABLED`, 'false']));
/** On PostgreSQL the embedded store (fs driver) runs only when one instance says so. */
const ONE_INSTANCE = { WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true', WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true' };
/** One public URL for the server before and after the move: it is the issuer of the session cookies. */
const PUBLIC_URL = { WHARF_SERVER__PUBLIC_URL: 'http://wharf.test' };

/** The tables of a database's schema, by name. */
async function tablesOf(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1');
    return r.rows.map((row) => row.table_name as string);
  } finally {
    await client.end();
  }
}

describe('wharf migrate-data: an instance from SQLite to PostgreSQL', () => {
  let dataDir: string;
  let server: Served | undefined;
  beforeAll(() => {
    dataDir = path.join(tempDir('wharf-migrate-data-'), 'data');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('moves users, organizations, members, invitations and login sessions; serve on PostgreSQL answers the same, and so do two instances on it', async () => {
    server = await serve(['--data-dir', dataDir], { env: { ...onlyPorted, ...PUBLIC_URL } });
    const api = overHttp(server.url);
    const owner = await setupOwner(server, 'Movers');
    for (const name of ['Second', 'Third']) expect((await api.request('POST', '/api/orgs', { headers: owner.headers, body: { name } })).status).toBe(201);
    const orgs = (await api.request('GET', '/api/orgs', { headers: owner.headers })).body.orgs as { id: string; slug: string }[];
    expect(orgs).toHaveLength(3);
    // A second user, made with the admin command while the server runs, invited into an org.
    const made = wharf(['admin', 'create-user', '--data-dir', dataDir, '--email', 'member@example.test', '--password', 'another long password'], {
      env: onlyPorted,
    });
    expect(made.status, made.stderr).toBe(0);
    const invited = await api.request('POST', `/api/orgs/${orgs[0]!.id}/invitations`, {
      headers: owner.headers,
      body: { email: 'member@example.test', role: 'admin' },
    });
    expect(invited.status, invited.text).toBe(202);
    const lists = async (url: string, headers: Record<string, string>) => {
      const a = overHttp(url);
      return {
        orgs: (await a.request('GET', '/api/orgs', { headers })).body,
        members: (await a.request('GET', `/api/orgs/${orgs[0]!.id}/members`, { headers })).body,
        invitations: (await a.request('GET', `/api/orgs/${orgs[0]!.id}/invitations`, { headers })).body,
        me: (await a.request('GET', '/auth/session', { headers })).body,
        // With their usage (the counters the moved file rows feed).
        apps: ((await a.request('GET', '/api/apps', { headers })).body.apps as Record<string, unknown>[]).map((x) => ({
          id: x.id,
          name: x.name,
          bucketName: x.bucketName,
          storedBytes: x.storedBytes,
          fileCount: x.fileCount,
          usedBytes: x.usedBytes,
        })),
        // lastUsedAt left out: the file searches below use the token.
        tokens: ((await a.request('GET', `/api/tokens?appId=${app.body.id}`, { headers })).body.tokens as Record<string, unknown>[]).map(
          ({ lastUsedAt, ...t }) => ({ ...t, used: lastUsedAt !== null }),
        ),
        // The app's files and searches of every kind (1, 2 and 3+ characters: SQLite's n-gram and
        // trigram tables stay behind, PostgreSQL answers from its own indexes of the moved rows).
        files: Object.fromEntries(
          await Promise.all(
            ['', 'e', 'Q3', 'report', 'zz'].map(async (term) => {
              const res = await a.request('GET', `/api/files?search=${encodeURIComponent(term)}`, { headers: { authorization: `Bearer ${token.body.token}` } });
              return [term, { status: res.status, total: res.body.pagination.total, names: (res.body.files as { name: string }[]).map((f) => f.name).sort() }];
            }),
          ),
        ),
      };
    };
    // An app on the embedded store and one of its API tokens.
    const app = await api.request('POST', '/api/apps', { headers: owner.headers, body: { name: 'Moved app' } });
    expect(app.status, app.text).toBe(201);
    const token = await api.request('POST', '/api/tokens', { headers: owner.headers, body: { appId: app.body.id, name: 'ci' } });
    expect(token.status, token.text).toBe(201);
    // Three files in it, uploaded with the command-line client (objects stored, records registered).
    const filesDir = tempDir('wharf-migrate-files-');
    const contents: Record<string, string> = { 'Q3 report.pdf': '%PDF-1.7 quarterly', 'notes.txt': 'hello from SQLite\n', 'ab.bin': 'x'.repeat(3000) };
    for (const [name, body] of Object.entries(contents)) fs.writeFileSync(path.join(filesDir, name), body);
    const up = await wharfAsync(['files', 'upload', ...Object.keys(contents), '--token', token.body.token, '--instance', server.url, '--json'], {
      cwd: filesDir,
      env: onlyPorted,
    });
    expect(up.status, up.stderr).toBe(0);
    const uploaded = JSON.parse(up.stdout).files as { key: string; name: string }[];
    const before = await lists(server.url, owner.headers);
    expect(before.invitations.invitations).toHaveLength(1);
    expect(before.apps).toMatchObject([{ storedBytes: 3036, fileCount: 3, usedBytes: 3036 }]);
    expect(before.files).toEqual({
      '': { status: 200, total: 3, names: ['Q3 report.pdf', 'ab.bin', 'notes.txt'] },
      e: { status: 200, total: 2, names: ['Q3 report.pdf', 'notes.txt'] },
      Q3: { status: 200, total: 1, names: ['Q3 report.pdf'] },
      report: { status: 200, total: 1, names: ['Q3 report.pdf'] },
      zz: { status: 200, total: 0, names: [] },
    });

    // Refused while the server runs on the data dir: nothing written.
    const target = await freshDatabase();
    const running = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', target], { env: onlyPorted });
    expect(running.status).toBe(1);
    expect(running.stderr).toMatch(
      new RegExp(`^wharf: a server is running on ${dataDir} \\(pid ${server.child.pid}, http://127\\.0\\.0\\.1:\\d+\\): stop it first`),
    );
    expect(await tablesOf(target)).toEqual([]);

    // serve.pid: written while it listens, removed when it stops.
    const pidFile = path.join(dataDir, 'serve.pid');
    expect(JSON.parse(fs.readFileSync(pidFile, 'utf8')).pid).toBe(server.child.pid);
    expect(await server.stop()).toBe(0);
    server = undefined;
    expect(fs.existsSync(pidFile)).toBe(false);
    const moved = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', target, '--json'], { env: onlyPorted });
    expect(moved.stderr).toBe('');
    expect(moved.status).toBe(0);
    const result = JSON.parse(moved.stdout);
    const rows = Object.fromEntries((result.tables as { table: string; rows: number }[]).map((t) => [t.table, t.rows]));
    expect(rows).toMatchObject({ identity_users: 2, identity_orgs: 3, identity_memberships: 3, identity_invitations: 1, identity_setup_tokens: 1 });
    expect(rows.identity_login_sessions).toBeGreaterThanOrEqual(1);
    expect(result.target).toBe(target.replace(':testsecret@', ':***@'));
    expect(rows).toMatchObject({ storage_apps: 1, storage_files: 3, tokens_app_tokens: 1 });
    // Left behind: the migrations (the target records its own) and SQLite's own search index
    // (storage's full-text and n-gram tables; PostgreSQL searches with pg_trgm and a generated column).
    expect(result.skipped[0]).toEqual({ table: '_migrations', rows: result.migrations, reason: 'the target records its own migrations' });
    for (const s of result.skipped.slice(1) as { table: string }[]) expect(s.table).toMatch(/^storage_(files_names|files_ngrams|search_counts|search_grams)/);
    expect(result.targetOnly).toEqual([]);
    expect(result.skippedColumns).toEqual([]);
    expect(result.keys).toEqual({ dir: path.join(dataDir, 'keys'), files: ['s3-root.json', 'secret.key', 'signing-ed25519.pem'] });

    // Served from PostgreSQL with the same data dir (its keys): the old cookie, a new login, the same lists.
    server = await serve(['--data-dir', dataDir], {
      env: { ...onlyPorted, ...PUBLIC_URL, WHARF_DATABASE__URL: target, ...ONE_INSTANCE },
    });
    expect(await lists(server.url, { ...owner.headers, origin: server.url })).toEqual(before);
    const again = overHttp(server.url);
    const cookie = await login(again, owner.email, owner.password);
    expect((await lists(server.url, { cookie, origin: server.url })).orgs).toEqual(before.orgs);
    await expect(login(again, 'member@example.test', 'another long password')).resolves.toMatch(/^__session=/);
    await expect(login(again, owner.email, 'wrong password')).rejects.toThrow(/login failed: 401/);
    // The app's token still validates (its hash moved; the app's bucket secret decrypts with the same keys).
    const validated = await again.request('POST', '/api/tokens/validate', { body: { token: token.body.token } });
    expect(validated.status, validated.text).toBe(200);
    expect(validated.body).toMatchObject({ valid: true, appId: app.body.id });
    // The objects stayed in the data dir's embedded store: a moved record downloads its bytes.
    for (const f of uploaded) {
      const out = path.join(filesDir, `moved-${f.name}`);
      const got = await wharfAsync(['files', 'get', f.key, '--out', out, '--token', token.body.token, '--instance', server.url], { env: onlyPorted });
      expect(got.status, got.stderr).toBe(0);
      expect(fs.readFileSync(out, 'utf8')).toBe(contents[f.name]);
    }
    // The database is PostgreSQL's: a new org lands there.
    expect((await again.request('POST', '/api/orgs', { headers: { cookie, origin: server.url }, body: { name: 'Fourth' } })).status).toBe(201);
    expect(await server.stop()).toBe(0);
    server = undefined;
    const client = new pg.Client({ connectionString: target });
    await client.connect();
    expect(Number((await client.query('SELECT count(*) FROM identity_orgs')).rows[0].count)).toBe(4);
    await client.end();

    // Then scaled out: two instances on the moved database with copies of its keys.
    const cluster = await startCluster({ databaseUrl: target, keysDir: path.join(dataDir, 'keys') });
    try {
      for (const instance of cluster.instances) {
        const cookie = await login(overHttp(instance.url), owner.email, owner.password);
        const orgs = await overHttp(instance.url).request('GET', '/api/orgs', { headers: { cookie, origin: instance.url } });
        expect(orgs.body.orgs.map((o: { name: string }) => o.name).sort(), `instance ${instance.index}`).toEqual(['Fourth', 'Movers', 'Second', 'Third']);
      }
    } finally {
      await cluster.close();
    }

    // The text summary, then a second move into the same (now filled) database: refused.
    const refused = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', target], { env: onlyPorted });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      `wharf: the target database ${result.target} has Wharf migrations applied (_migrations has rows): migrate-data moves an instance into an empty database only\n`,
    );
  }, 240_000);

  it('prints a summary table with the keys that must go with the data; a serve.pid left by a killed server does not stop it', async () => {
    const target = await freshDatabase();
    const gone = spawnSync('true').pid; // a process that has exited
    fs.writeFileSync(path.join(dataDir, 'serve.pid'), JSON.stringify({ pid: gone, url: 'http://127.0.0.1:1' }));
    const r = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', target], { env: onlyPorted });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(
      /^copied \d+ rows in \d+ tables to postgres:\/\/wharf:\*\*\*@127\.0\.0\.1:\d+\/wharf_test_\w+ in \d+\.\d s \(\d+ migrations applied there first\); row counts equal on both sides:\n/,
    );
    expect(r.stdout).toMatch(/\n {2}table +rows\n/);
    expect(r.stdout).toMatch(/\n {2}identity_orgs +3\n/);
    expect(r.stdout).toMatch(/\nleft in SQLite, not copied:\n {2}_migrations +\d+ {2}the target records its own migrations\n/);
    expect(r.stdout).toContain(
      `keys: secrets in these tables are encrypted with the keys in ${path.join(dataDir, 'keys')} (s3-root.json, secret.key, signing-ed25519.pem)`,
    );
  }, 120_000);

  it('refuses, in one line and with nothing written: plugins not on PostgreSQL, a bad or unreachable URL, a PostgreSQL instance, a table with rows', async () => {
    const target = await freshDatabase();
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        ['--data-dir', dataDir, '--to', target],
        { WHARF_PLUGINS__DIR: legacyPluginDir() },
        /^wharf: plugin legacy does not run on PostgreSQL yet: nothing copied \(disable it to move the rest; its tables then stay in SQLite\)\n$/,
      ],
      [
        ['--data-dir', dataDir, '--to', 'mysql://root@127.0.0.1/wharf'],
        onlyPorted,
        /^wharf: --to must be a PostgreSQL URL: postgres:\/\/USER:PASSWORD@HOST:PORT\/DATABASE\n$/,
      ],
      [
        ['--data-dir', dataDir, '--to', 'postgres://wharf:nope@127.0.0.1:1/wharf'],
        onlyPorted,
        /^wharf: cannot connect to PostgreSQL at 127\.0\.0\.1:1\/wharf: .*ECONNREFUSED/,
      ],
      [
        ['--data-dir', dataDir, '--to', target],
        { ...onlyPorted, WHARF_DATABASE__URL: target, ...ONE_INSTANCE },
        /^wharf: this instance already runs on PostgreSQL/,
      ],
      [
        ['--data-dir', path.join(dataDir, 'nothing-here'), '--to', target],
        onlyPorted,
        /^wharf: no Wharf database at .*nothing-here\/wharf\.db: is the data dir right\?\n$/,
      ],
    ];
    for (const [args, env, message] of cases) {
      const r = await wharfAsync(['migrate-data', ...args], { env });
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.status, args.join(' ')).not.toBe(0);
      expect(r.stdout).toBe('');
    }
    expect(await tablesOf(target)).toEqual([]);
    // A database with a table of someone else's, with a row: refused, left as it was.
    const client = new pg.Client({ connectionString: target });
    await client.connect();
    await client.query('CREATE TABLE theirs (x int); INSERT INTO theirs VALUES (1)');
    await client.end();
    const r = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', target], { env: onlyPorted });
    expect(r.stderr).toMatch(/^wharf: the target database .* is not empty \(table theirs has rows\)/);
    expect(await tablesOf(target)).toEqual(['theirs']);
  }, 180_000);
});

describe('wharf migrate-data on the command line', () => {
  it('is listed by wharf --help; its --help documents --to; without --to it is a usage error', () => {
    expect(wharf(['--help']).stdout).toMatch(/\n {2}wharf migrate-data +Move this instance from its SQLite database into an\s+empty PostgreSQL database/);
    const help = wharf(['migrate-data', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/--to +The empty PostgreSQL database:\s+postgres:\/\/USER:PASSWORD@HOST:PORT\/DATABASE/);
    const bare = wharf(['migrate-data']);
    expect(bare.status).toBe(2);
    expect(bare.stderr).toBe('wharf: Missing required argument: to (see wharf --help)\n');
  });
});

/** A plugin's tables made to test the copy: both engines, parents named after children, a trigger, an identity column. */
const copyTest: Migration[] = [
  {
    id: '001',
    sqlite: `
      CREATE TABLE ct_parents (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, total INTEGER NOT NULL DEFAULT 0, big INTEGER, data BLOB, flag INTEGER, extra TEXT);
      CREATE TABLE ct_children (id INTEGER PRIMARY KEY AUTOINCREMENT, parent_seq INTEGER NOT NULL REFERENCES ct_parents(seq), name TEXT NOT NULL);
      CREATE TRIGGER ct_count AFTER INSERT ON ct_children BEGIN UPDATE ct_parents SET total = total + 1 WHERE seq = new.parent_seq; END;
      CREATE TABLE ct_sqlite_only (x TEXT);
      CREATE VIRTUAL TABLE ct_search USING fts5(name, content = 'ct_children', content_rowid = 'id');
    `,
    postgres: `
      CREATE TABLE ct_parents (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, total INTEGER NOT NULL DEFAULT 0, big BIGINT, data BYTEA, flag BOOLEAN);
      CREATE TABLE ct_children (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, parent_seq BIGINT NOT NULL REFERENCES ct_parents(seq), name TEXT NOT NULL,
        upper_name TEXT GENERATED ALWAYS AS (upper(name)) STORED);
      CREATE FUNCTION ct_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE ct_parents SET total = total + 1 WHERE seq = NEW.parent_seq; RETURN NEW; END $$;
      CREATE TRIGGER ct_count AFTER INSERT ON ct_children FOR EACH ROW EXECUTE FUNCTION ct_count();
      CREATE TABLE ct_pg_only (x TEXT);
    `,
  },
];

describe('migrateData: the copy', () => {
  it('orders parents first, keeps identity values and moves their sequences on, leaves triggers out of the copy, in batches', async () => {
    const dir = tempDir('wharf-migrate-copy-');
    const file = path.join(dir, 'wharf.db');
    const sqlite = openSqlite(file);
    await migrate(sqlite, [{ plugin: 'copytest', migrations: copyTest }]);
    const big = 2n ** 60n + 7n;
    const raw = sqlite.raw;
    raw.transaction(() => {
      const parent = raw.prepare('INSERT INTO ct_parents (seq, id, big, data, flag, extra) VALUES (?, ?, ?, ?, ?, ?)');
      // Gaps in seq: the sequence must follow the largest value, not the count.
      for (let i = 1; i <= 30; i++) parent.run(i * 10, `p${i}`, i === 1 ? big : i, Buffer.from([0, i, 255]), i % 2, i % 3 ? `x${i}` : null);
      const child = raw.prepare('INSERT INTO ct_children (parent_seq, name) VALUES (?, ?)');
      for (let i = 0; i < 2500; i++) child.run(((i % 30) + 1) * 10, `child ${i}`);
      raw.prepare('INSERT INTO ct_sqlite_only VALUES (?)').run('left behind');
      // The last ten children deleted: AUTOINCREMENT never gives their ids again, nor may the target.
      raw.prepare('DELETE FROM ct_children WHERE id > 2490').run();
    })();
    raw.exec("INSERT INTO ct_search(ct_search) VALUES ('rebuild')");
    await sqlite.close();

    const target = await freshDatabase();
    const result = await migrateData({
      source: file,
      dataDir: dir,
      to: target,
      plugins: [{ name: 'copytest', engines: ['sqlite', 'postgres'], migrations: copyTest }],
      batchRows: 1000,
    });
    expect(result.tables).toEqual([
      { table: 'ct_parents', rows: 30 },
      { table: 'ct_children', rows: 2490 },
    ]);
    expect(result.rows).toBe(2520);
    expect(result.skippedColumns).toEqual([{ table: 'ct_parents', column: 'extra', rows: 20 }]);
    // core_keys_check: this source was never served (no row, no table); the first start on the target writes it.
    expect(result.targetOnly).toEqual(['core_keys_check', 'ct_pg_only']);
    expect(result.skipped.map((s) => [s.table, s.rows, s.reason.split(' ')[0]])).toEqual(
      [
        ['_migrations', 1, 'the'],
        ['ct_search', null, 'SQLite'],
        ['ct_search_data', null, 'SQLite'],
        ['ct_search_idx', null, 'SQLite'],
        ['ct_search_docsize', null, 'SQLite'],
        ['ct_search_config', null, 'SQLite'],
        ['ct_sqlite_only', 1, 'not'],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );

    const client = new pg.Client({ connectionString: target });
    await client.connect();
    try {
      const parents = (await client.query('SELECT seq::text, id, total, big::text, data, flag FROM ct_parents ORDER BY ct_parents.seq')).rows;
      expect(parents).toHaveLength(30);
      // Totals as in SQLite (its trigger counted each child once; the target's did not count again).
      expect(parents.map((p) => p.total)).toEqual(Array.from({ length: 30 }, (_, i) => (i < 10 ? 84 : 83)));
      expect(parents[0]).toEqual({ seq: '10', id: 'p1', total: 84, big: big.toString(), data: Buffer.from([0, 1, 255]), flag: true });
      expect(parents[1]!.flag).toBe(false);
      expect(Number((await client.query("SELECT count(*) FROM ct_children WHERE upper_name = upper(name) AND name LIKE 'child %'")).rows[0].count)).toBe(2490);
      // Sequences past the largest copied value (ct_children: past SQLite's AUTOINCREMENT counter); the trigger is back on.
      const p = (await client.query("INSERT INTO ct_parents (id) VALUES ('new') RETURNING seq::text")).rows[0].seq;
      expect(p).toBe('301');
      const c = (await client.query("INSERT INTO ct_children (parent_seq, name) VALUES (301, 'new') RETURNING id::text")).rows[0].id;
      expect(c).toBe('2501');
      expect((await client.query('SELECT total FROM ct_parents WHERE seq = 301')).rows[0].total).toBe(1);
    } finally {
      await client.end();
    }
    const source = openDatabase(file, { mustExist: true, readonly: true });
    expect(source.prepare('SELECT count(*) FROM ct_children').pluck().get()).toBe(2490); // the source is left as it was
    source.close();
  }, 120_000);

  it('rolls everything back when a row does not fit the target', async () => {
    const dir = tempDir('wharf-migrate-fail-');
    const file = path.join(dir, 'wharf.db');
    const sqlite = openSqlite(file);
    await migrate(sqlite, [{ plugin: 'copytest', migrations: copyTest }]);
    await sqlite.run("INSERT INTO ct_parents (seq, id, flag) VALUES (1, 'a', 1), (2, 'b', 'not a boolean')");
    await sqlite.close();
    const target = await freshDatabase();
    await expect(
      migrateData({ source: file, dataDir: dir, to: target, plugins: [{ name: 'copytest', engines: ['sqlite', 'postgres'], migrations: copyTest }] }),
    ).rejects.toThrow(/^copy to postgres:\/\/wharf:\*\*\*@.* failed, nothing committed: invalid input syntax for type boolean: "not a boolean"$/);
    expect(await tablesOf(target)).toEqual([]);
  }, 60_000);
});
