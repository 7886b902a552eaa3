/**
 * What differs between the database engines, on the engine of the project that runs it ("all":
 * SQLite; "on postgres": PostgreSQL): search terms with LIKE's wildcards and escape character
 * match literally (PostgreSQL searches with LIKE), PostgreSQL's search is served by its indexes
 * (pg_trgm's for 3+ characters, the short-gram array's for 1-2; a broad term's page walks the time
 * index), and the embedded store (the fs
 * driver) is refused on a shared database unless one instance is declared.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConstraintError } from '../../../core/db.ts';
import { StorageStore } from '../../../plugins/storage/store.ts';
import { postgresSearchSql } from '../../../plugins/storage/store-search.ts';
import type { TestApp } from '../../helpers/app.ts';
import { tempDir } from '../../helpers/app.ts';
import { wharf } from '../../helpers/cli.ts';
import { signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import { bearer, closeStorageApp, createApp, createToken, startStorageApp, uniquePrefix } from '../../helpers/storage.ts';

const onPostgres = process.env.WHARF_TEST_DATABASE === 'postgres';
const prefix = uniquePrefix('engines');

/** Names where LIKE's %, _ and \ would match more than themselves. */
const NAMES = ['a%b', 'a_b', 'axb', 'ayyb', 'a\\b', 'a\\%b', 'a\\\\b', '%', '_', '100%', 'x_y_z', 'xAyBz', '50% off_sale', 'plain'];
const TERMS = ['%', '_', '\\', 'a%', 'a_b', '_b', '%b', 'a\\', '\\%', '\\\\', 'a%b', '% o', 'x_y', '_y_', 'off_', '0%', 'a', 'ab', 'A'];

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let token: string;
let appId: string;

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  app = await startStorageApp(target, { prefix });
  const owner = await signIn(app);
  const created = await createApp(app, owner, 'engines');
  appId = created.id;
  token = await createToken(app, owner, appId);
  const files = NAMES.map((name, i) => ({ key: `k/${i}`, name, size: 1, type: 'text/plain' }));
  await Promise.all(files.map((f) => s3.send(new PutObjectCommand({ Bucket: created.bucketName, Key: f.key, Body: 'x' }))));
  const res = await app.request('POST', '/api/files', { body: { token, files } });
  if (res.status !== 200) throw new Error(`register: ${res.status} ${res.text}`);
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe(`search on ${onPostgres ? 'PostgreSQL' : 'SQLite'}`, () => {
  it.each(TERMS)('%j matches the names containing it literally, with the exact total', async (term) => {
    const res = await app.request('GET', `/api/files?search=${encodeURIComponent(term)}&pageSize=100`, { headers: bearer(token) });
    expect(res.status, res.text).toBe(200);
    const want = NAMES.filter((n) => n.includes(term)).sort();
    expect(res.body.files.map((f: { name: string }) => f.name).sort()).toEqual(want);
    expect(res.body.pagination.total).toBe(want.length);
  });

  it.runIf(onPostgres)('is served by pg_trgm (3+ characters) and the short-gram index (1-2 characters)', async () => {
    const db = app.running.data;
    expect(await db.value("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'")).toBe('pg_trgm');
    // Records alone (no objects: only the plans are looked at), in an app of their own.
    await db.run("INSERT INTO storage_apps (id, org_id, name, bucket_name, created_at, updated_at) VALUES ('plans', 'plans', 'plans', 'plans', 'x', 'x')");
    await db.exec(`INSERT INTO storage_files (id, app_id, key, name, size, type, uploaded_at)
      SELECT 'plans-' || i, 'plans', 'k' || i, md5(i::text) || '.bin', 1, 't', to_char(i, 'FM0000000000') FROM generate_series(1, 10000) i`);
    // What autovacuum does after many writes: statistics, and the GIN indexes' own (their pending entries merged).
    await db.exec('VACUUM (ANALYZE) storage_files');
    const plan = (term: string) =>
      db.transaction(async (tx) => {
        // At this size reading the table can be cheaper still: the choice left is between the
        // app's time index (every file of the app) and the search indexes.
        await tx.exec('SET LOCAL enable_seqscan = off');
        const { sql, params } = postgresSearchSql('plans', term, { dir: 'desc', limit: 10, offset: 0 });
        return (await tx.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql.fromMatches}`, params)).map((r) => r['QUERY PLAN']).join('\n');
      });
    expect(await plan('abc1')).toMatch(/Bitmap Index Scan on storage_files_names/);
    expect(await plan('x')).toMatch(/Bitmap Index Scan on storage_files_short_grams/);
    expect(await plan('_')).toMatch(/Bitmap Index Scan on storage_files_short_grams/);
    // A broad term's page: the time index in the page's order, strpos() on each row, no sort.
    for (const dir of ['asc', 'desc'] as const) {
      const { sql, params } = postgresSearchSql('plans', 'a', { dir, limit: 10, offset: 20 });
      const walk = (await db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql.walk}`, params)).map((r) => r['QUERY PLAN']).join('\n');
      expect(walk).toMatch(/Index Scan (Backward )?using storage_files_by_time/);
      expect(walk).not.toMatch(/Sort/);
    }
    // Found through the indexes, counted exactly; and by reading the app's rows (a small app's way), the same.
    const { sql, scan, params } = postgresSearchSql('plans', 'abc1', { dir: 'asc', limit: 5, offset: 0 });
    const rows = await db.all<{ name: string; total: number }>(sql.fromMatches, params);
    const want = await db.value<number>("SELECT count(*) FROM storage_files WHERE app_id = 'plans' AND strpos(name, 'abc1') > 0");
    expect(rows[0]?.total).toBe(want);
    expect(rows.every((r) => r.name.includes('abc1'))).toBe(true);
    expect(await db.all(scan.fromMatches, params)).toEqual(rows);
    const scanned = await db.transaction(async (tx) => {
      await tx.exec('SET LOCAL enable_seqscan = off');
      return (await tx.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${scan.fromMatches}`, params)).map((r) => r['QUERY PLAN']).join('\n');
    });
    expect(scanned).toMatch(/Scan (using|on) storage_files_by_time/);
    expect(scanned).not.toMatch(/storage_files_names/);
  });
});

describe(`phase 1's reservations on ${onPostgres ? 'PostgreSQL' : 'SQLite'}`, () => {
  it('are recorded by one statement exactly as given, and a key already reserved records none of them', async () => {
    const store = new StorageStore(app.running.data);
    const files = [
      { key: 'res/ünïcode ✓ 𝄞.txt', size: 0, type: 'text/plain; charset=utf-8' },
      { key: 'res/"quoted"\\back', size: 5 * 1024 ** 3, type: 'application/octet-stream' },
      { key: 'res/big', size: Number.MAX_SAFE_INTEGER, type: 'image/jpeg' },
    ];
    await store.transaction((tx) => tx.insertUploads(appId, files, '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z'));
    const rows = await app.running.data.all<Record<string, unknown>>(
      "SELECT key, size, type, state, created_at, expires_at FROM storage_uploads WHERE app_id = ? AND key LIKE 'res/%' ORDER BY key",
      [appId],
    );
    const expected = files
      .map((f) => ({ ...f, state: 'pending', created_at: '2026-01-01T00:00:00.000Z', expires_at: '2026-01-01T01:00:00.000Z' }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
    expect(rows).toEqual(expected);
    expect([...(await store.reservations(appId, '2026-01-01T00:30:00.000Z')).values()].sort()).toEqual(files.map((f) => f.size).sort());
    // One new key and one taken: the statement fails whole, nothing of it is recorded.
    await expect(
      store.transaction((tx) =>
        tx.insertUploads(appId, [{ key: 'res/new', size: 1, type: 't' }, files[0]!], '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z'),
      ),
    ).rejects.toBeInstanceOf(ConstraintError);
    expect(await store.upload(appId, 'res/new')).toBeUndefined();
    await app.running.data.run("DELETE FROM storage_uploads WHERE app_id = ? AND key LIKE 'res/%'", [appId]);
  });
});

describe('the embedded store on a shared database', () => {
  // Config checks only: nothing connects to this address.
  const shared = { WHARF_DATABASE__URL: 'postgres://wharf:s3cret@127.0.0.1:1/wharf', WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true' };
  const REFUSAL =
    'wharf: config error: "plugins.storage.driver": is "fs", which keeps objects on this instance\'s disk, but the database is shared (PostgreSQL): set driver = "s3" with an S3-compatible store ([plugins.storage.s3]) shared by every instance, or single_instance = true if one instance runs\n';

  it('is refused with one line (config check and serve, exit 2), unless single_instance', () => {
    const dataDir = tempDir();
    const check = wharf(['config', 'check', '--data-dir', dataDir], { env: shared });
    expect(check.stderr).toBe(REFUSAL);
    expect(check.status).toBe(2);
    const served = wharf(['serve', '--data-dir', dataDir], { env: shared });
    expect(served.stderr).toBe(REFUSAL);
    expect(served.status).toBe(2);
    const allowed = wharf(['config', 'check', '--data-dir', dataDir], { env: { ...shared, WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true' } });
    expect(allowed.stderr).toBe('');
    expect(allowed.status).toBe(0);
  });

  it('is not refused with the s3 driver, nor on SQLite', () => {
    const dataDir = tempDir();
    const s3Driver = wharf(['config', 'check', '--data-dir', dataDir], {
      env: {
        ...shared,
        WHARF_PLUGINS__STORAGE__S3__ENDPOINT: 'http://127.0.0.1:9000',
        WHARF_PLUGINS__STORAGE__S3__ACCESS_KEY: 'key',
        WHARF_PLUGINS__STORAGE__S3__SECRET_KEY: 'secret',
      },
    });
    expect(s3Driver.stderr).toBe('');
    expect(s3Driver.status).toBe(0);
    const sqlite = wharf(['config', 'check', '--data-dir', dataDir], { env: {} });
    expect(sqlite.stderr).toBe('');
    expect(sqlite.status).toBe(0);
  });
});
