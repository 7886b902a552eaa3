/**
 * GET /api/files: pages that never repeat or skip a file when upload times tie, both directions,
 * and the search: a case-sensitive substring of the name (test/plugins/storage/search/ compares
 * it with a brute-force filter), its SQL served by the indexes it is meant to use.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import { marksSql, searchSql } from '../../../plugins/storage/store-search.ts';
import { bearer, closeStorageApp, createApp, createToken, startStorageApp, uniquePrefix } from '../../helpers/storage.ts';

const prefix = uniquePrefix('list');

const NAMES = [
  'Report-2026.PDF',
  'report-2025.pdf',
  'annual REPORT.txt',
  'photo_001.jpg',
  'photo_002.jpg',
  'Photo_003.JPG',
  'notes "quoted".md',
  "it's.txt",
  '100%_done.txt',
  'a.b',
  'x',
  'ab',
  'résumé.pdf',
  'naïve-Résumé.doc',
  '日本語.txt',
  'under_score',
  'OR AND NOT.txt',
  'star*.txt',
  'NEAR(a b).txt',
  'col:on.txt',
];

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let token: string;
let bucket: string;
let appId: string;

/** Puts one-byte objects and registers them in one request (so they share one uploadedAt). */
async function register(names: string[], keyPrefix: string): Promise<any[]> {
  const files = names.map((name, i) => ({ key: `${keyPrefix}/${i}`, name, size: 1, type: 'text/plain' }));
  await Promise.all(files.map((f) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: f.key, Body: 'x' }))));
  const res = await app.request('POST', '/api/files', { body: { token, files } });
  if (res.status !== 200) throw new Error(`register: ${res.status} ${res.text}`);
  return res.body.files;
}

const get = async (query: string) => {
  const res = await app.request('GET', `/api/files?${query}`, { headers: bearer(token) });
  expect(res.status, res.text).toBe(200);
  return res.body as { files: any[]; pagination: { page: number; pageSize: number; total: number; totalPages: number } };
};

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  app = await startStorageApp(target, { prefix });
  const owner = await signIn(app);
  const created = await createApp(app, owner, 'list');
  appId = created.id;
  bucket = created.bucketName;
  token = await createToken(app, owner, appId);
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe('paging', () => {
  let all: any[];

  beforeAll(async () => {
    // 25 files with one uploadedAt (ties), then 5 later ones.
    const tied = await register(
      Array.from({ length: 25 }, (_, i) => `tied-${String(i).padStart(2, '0')}.bin`),
      'tied',
    );
    await new Promise((r) => setTimeout(r, 5));
    const later = await register(
      Array.from({ length: 5 }, (_, i) => `later-${i}.bin`),
      'later',
    );
    all = [...tied, ...later];
    expect(new Set(tied.map((f) => f.uploadedAt)).size).toBe(1);
  });

  const order = (files: any[], dir: 'asc' | 'desc') =>
    [...files]
      .sort((a, b) => (a.uploadedAt === b.uploadedAt ? (a.id < b.id ? -1 : 1) : a.uploadedAt < b.uploadedAt ? -1 : 1))
      .map((f) => f.id)
      [dir === 'asc' ? 'slice' : 'reverse']();

  it.each(['desc', 'asc'] as const)('%s: pages of 7 cover every file exactly once, in (uploadedAt, id) order', async (dir) => {
    const seen: string[] = [];
    const first = await get(`dir=${dir}&pageSize=7&search=.bin`);
    expect(first.pagination).toEqual({ page: 1, pageSize: 7, total: 30, totalPages: 5 });
    for (let page = 1; page <= 5; page++) {
      const body = await get(`dir=${dir}&pageSize=7&page=${page}&search=.bin`);
      expect(body.files.length).toBe(page < 5 ? 7 : 2);
      seen.push(...body.files.map((f) => f.id));
    }
    expect(seen).toEqual(order(all, dir));
    expect((await get(`dir=${dir}&pageSize=7&page=6&search=.bin`)).files).toEqual([]);
  });

  it('the same holds without a search, and for a search served by the scan', async () => {
    const total = (await get('pageSize=1')).pagination.total;
    const ids: string[] = [];
    for (let page = 1; page <= Math.ceil(total / 4); page++) ids.push(...(await get(`pageSize=4&page=${page}`)).files.map((f) => f.id));
    expect(new Set(ids).size).toBe(total);
    expect(ids.filter((id) => all.some((f) => f.id === id))).toEqual(order(all, 'desc'));
    const short: string[] = [];
    for (let page = 1; page <= 10; page++) short.push(...(await get(`pageSize=3&page=${page}&search=d-`)).files.map((f) => f.id));
    expect(short).toEqual(
      order(
        all.filter((f) => f.name.includes('d-')),
        'desc',
      ),
    );
  });

  it('defaults: page 1, pageSize 10, newest first', async () => {
    const body = await get('');
    expect(body.pagination.page).toBe(1);
    expect(body.pagination.pageSize).toBe(10);
    expect(body.files).toHaveLength(10);
    expect(body.files[0].name).toMatch(/^later-/);
  });
});

describe('search: a case-sensitive substring of the name', () => {
  beforeAll(async () => {
    await register(NAMES, 'names');
  });

  it.each([
    'Report',
    'report',
    'REPORT',
    'port',
    'photo_',
    'Photo',
    '.pdf',
    '.PDF',
    '"quoted"',
    '"',
    "'s",
    "it's",
    '%_',
    '%',
    '_',
    'a.',
    'x',
    'ab',
    'é',
    'sumé',
    'Résumé',
    'résumé',
    '本語',
    '日本語',
    'AND',
    'OR AND',
    'NOT.txt',
    '*',
    'star*',
    'NEAR(a',
    'col:on',
    '-20',
    'nothing matches this',
  ])('%j', async (term) => {
    const expected = NAMES.filter((n) => n.includes(term)).sort();
    const body = await get(`search=${encodeURIComponent(term)}&pageSize=100`);
    expect(
      body.files
        .map((f) => f.name)
        .filter((n: string) => NAMES.includes(n))
        .sort(),
    ).toEqual(expected);
    const others = body.files.filter((f) => !NAMES.includes(f.name));
    for (const f of others) expect(f.name.includes(term)).toBe(true);
    expect(body.pagination.total).toBe(body.files.length);
  });

  it("another app's files never show, whatever the term", async () => {
    const owner = await signIn(app);
    const other = await createApp(app, owner, 'other');
    const otherToken = await createToken(app, owner, other.id);
    await Promise.all(NAMES.map((_, i) => s3.send(new PutObjectCommand({ Bucket: other.bucketName, Key: `o/${i}`, Body: 'x' }))));
    const reg = await app.request('POST', '/api/files', {
      body: { token: otherToken, files: NAMES.map((name, i) => ({ key: `o/${i}`, name, size: 1, type: 't' })) },
    });
    expect(reg.status).toBe(200);
    for (const term of ['Report', 'ab', 'photo_', 'x']) {
      const mine = await get(`search=${encodeURIComponent(term)}&pageSize=100`);
      expect(mine.files.every((f) => f.appId === appId)).toBe(true);
      const theirs = await app.request('GET', `/api/files?search=${encodeURIComponent(term)}&pageSize=100`, { headers: bearer(otherToken) });
      expect(theirs.body.files.map((f: { name: string }) => f.name).sort()).toEqual(NAMES.filter((n) => n.includes(term)).sort());
      expect(theirs.body.files.every((f: { appId: string }) => f.appId === other.id)).toBe(true);
    }
  });

  it('an empty search lists everything', async () => {
    const all = await get('pageSize=1');
    expect((await get('search=&pageSize=1')).pagination.total).toBe(all.pagination.total);
  });
});

// SQLite's plans (FTS5, the covering time index); PostgreSQL's search indexes: test/plugins/storage/search/postgres.test.ts.
describe.runIf(process.env.WHARF_TEST_DATABASE !== 'postgres')('the list is served by indexes', () => {
  const plan = (sql: string, ...args: unknown[]) =>
    (app.running.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[]).map((r) => r.detail).join('\n');
  const params = { match: '"706f7274"', seq: 1, appId: '', term: 'port', limit: 10, offset: 0 };

  it("pages walk (app_id, uploaded_at, id, name); a selective search starts from the n-gram index, within the app's rowid range", () => {
    const page = plan('SELECT f.seq FROM storage_files f WHERE f.app_id = ? ORDER BY f.uploaded_at DESC, f.id DESC LIMIT 10 OFFSET 0', appId);
    expect(page).toMatch(/USING COVERING INDEX storage_files_by_time/);
    expect(page).not.toMatch(/TEMP B-TREE/);
    for (const dir of ['asc', 'desc'] as const) {
      for (const index of ['storage_files_ngrams', 'storage_files_names'] as const) {
        const search = plan(searchSql(index, dir).fromMatches, { ...params, appId });
        // M: the MATCH; > and <: the app's rowid range, so other apps' files are never read. The
        // index is the outer loop, each match read from the table by rowid.
        expect(search).toMatch(/SCAN g VIRTUAL TABLE INDEX \d+:M\d*><\nSEARCH f USING INTEGER PRIMARY KEY \(rowid=\?\)/);
      }
      const sql = searchSql('storage_files_names', dir);
      expect(plan(sql.countPhrase, params)).toMatch(/^SCAN g VIRTUAL TABLE INDEX \d+:M\d*><$/);
      // A broad term's page: the covering index in order, no sort, only the page read from the table.
      const walk = plan(sql.walk, { ...params, appId });
      expect(walk).toMatch(/USING COVERING INDEX storage_files_by_time \(app_id=\?\)/);
      // One sort: the page's own rows (the last step), never the walk's entries.
      expect(walk.split('\n').filter((l) => /TEMP B-TREE/.test(l))).toEqual(['USE TEMP B-TREE FOR ORDER BY']);
      expect(walk.split('\n').at(-1)).toBe('USE TEMP B-TREE FOR ORDER BY');
      // A deep page from a mark: the covering index from the mark's (uploadedAt, id) on, in order;
      // the mark and the cached total looked up by key (once: constant subqueries).
      const marks = marksSql('sqlite');
      const seek = plan(marks.seek[dir].mark, { ...params, appId, at: '', id: '', rank: 0, total: 0 });
      expect(seek).toMatch(
        new RegExp(`USING COVERING INDEX storage_files_by_time \\(app_id=\\? AND \\(uploaded_at,id\\)${dir === 'asc' ? '>' : '<'}\\(\\?,\\?\\)\\)`),
      );
      expect(seek).toMatch(/SEARCH storage_search_marks USING PRIMARY KEY \(app_id=\? AND term=\? AND uploaded_at=\? AND id=\?\)/);
      expect(seek.split('\n').filter((l) => /TEMP B-TREE/.test(l))).toEqual(['USE TEMP B-TREE FOR ORDER BY']);
      const step = plan(marks.step[dir].mark, { ...params, appId, at: '', id: '' });
      expect(step).toMatch(/^SEARCH f USING COVERING INDEX storage_files_by_time \(app_id=\? AND \(uploaded_at,id\)[<>]\(\?,\?\)\)$/);
    }
  });
});
