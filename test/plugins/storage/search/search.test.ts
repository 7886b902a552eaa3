/**
 * GET /api/files?search= against a brute-force filter over the same records (issue 17): the
 * files, their order (uploadedAt, then id), total and totalPages, both directions, several pages
 * and past the end, for terms of 1, 2, 3 and more characters, including FTS5 syntax, quotes,
 * LIKE wildcards, spaces and characters outside the BMP; after renames, overwrites and deletes;
 * with another app's records beside them. On either engine the same comparison runs on FileSearch
 * instances over the server's database forced to each way of reading pages and of counting, one
 * caching every 4+ character count, so the cache the triggers keep is checked through the writes
 * too, and the per-app gram counts are compared with the names' own.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSearch } from '../../../../plugins/storage/store-search.ts';
import type { TestApp } from '../../../helpers/app.ts';
import { signIn } from '../../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../../helpers/s3.ts';
import { bearer, closeStorageApp, createApp, createToken, startStorageApp, uniquePrefix } from '../../../helpers/storage.ts';
import { prng } from '../../../helpers/prng.ts';

const prefix = uniquePrefix('search');

/** Pieces of names: letters in both cases, digits, FTS5 and LIKE syntax, quotes, spaces, accents, CJK, an emoji. */
const PIECES = [
  'a',
  'b',
  'e',
  'A',
  'E',
  'Q',
  '3',
  ' ',
  '"',
  "'",
  '*',
  '%',
  '_',
  '-',
  '.',
  '(',
  ')',
  ':',
  '^',
  '+',
  'é',
  'É',
  '日本',
  '😀',
  'AND',
  'OR',
  'NEAR',
  'report',
  'Report',
  'draft',
  '""',
];

const rand = prng(17);
const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
const randomName = () => Array.from({ length: 1 + Math.floor(rand() * 6) }, () => pick(PIECES)).join('');

interface Rec {
  id: string;
  key: string;
  name: string;
  uploadedAt: string;
}
interface Page {
  files: Rec[];
  pagination: { page: number; pageSize: number; total: number; totalPages: number };
}

let target: S3Target;
let s3: S3Client;
let app: TestApp;
const apps: { id: string; bucket: string; token: string; records: Map<string, Rec> }[] = [];
let keyCounter = 0;

/** Stores one-byte objects and registers them, 100 to a request (each request shares one uploadedAt). */
async function register(a: (typeof apps)[number], files: { key: string; name: string }[]): Promise<void> {
  await Promise.all(files.map((f) => s3.send(new PutObjectCommand({ Bucket: a.bucket, Key: f.key, Body: 'x' }))));
  for (let i = 0; i < files.length; i += 100) {
    const batch = files.slice(i, i + 100).map((f) => ({ ...f, size: 1, type: 'text/plain' }));
    const res = await app.request('POST', '/api/files', { body: { token: a.token, files: batch } });
    if (res.status !== 200) throw new Error(`register: ${res.status} ${res.text}`);
    for (const f of res.body.files as Rec[]) a.records.set(f.key, { id: f.id, key: f.key, name: f.name, uploadedAt: f.uploadedAt });
  }
}

const newFiles = (n: number) => Array.from({ length: n }, () => ({ key: `k/${keyCounter++}`, name: randomName() }));

/** What the spec says a page holds, from the records themselves. */
function expected(records: Iterable<Rec>, term: string, dir: 'asc' | 'desc', page: number, pageSize: number) {
  const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  const all = [...records]
    .filter((r) => r.name.includes(term))
    .sort((x, y) => cmp(x.uploadedAt, y.uploadedAt) || cmp(x.id, y.id))
    .map((r) => r.id);
  if (dir === 'desc') all.reverse();
  return { ids: all.slice((page - 1) * pageSize, page * pageSize), total: all.length, totalPages: Math.ceil(all.length / pageSize) };
}

/** Terms: 1-3 characters and longer ones cut from the names, syntax on its own, and terms nothing has. */
function termsFor(records: Iterable<Rec>): string[] {
  const terms = new Set([
    '"',
    '""',
    '*',
    '%',
    '_',
    ' ',
    "'",
    '^',
    ':',
    '(',
    'AND',
    'OR',
    'NEAR(',
    'a*',
    '"a',
    'e',
    'E',
    'Q3',
    'é',
    'É',
    '日',
    '日本',
    '😀',
    'report',
    'Report',
  ]);
  terms.add('zzzz-nothing');
  terms.add('😀😀😀😀');
  const names = [...records].map((r) => [...r.name]);
  for (let i = 0; i < 60; i++) {
    const chars = pick(names);
    const length = 1 + (i % 8);
    if (chars.length < length) continue;
    const from = Math.floor(rand() * (chars.length - length + 1));
    terms.add(chars.slice(from, from + length).join(''));
  }
  terms.add(' a');
  terms.delete('');
  return [...terms];
}

const PAGE_SIZE = 7;

async function viaApi(a: (typeof apps)[number], term: string, dir: 'asc' | 'desc', page: number): Promise<Page> {
  const res = await app.request('GET', `/api/files?search=${encodeURIComponent(term)}&dir=${dir}&page=${page}&pageSize=${PAGE_SIZE}`, {
    headers: bearer(a.token),
  });
  expect(res.status, res.text).toBe(200);
  return res.body as Page;
}

/** Every mark of an app is where it says: its match has `rank` matches of its term before it, oldest first. How many. */
async function checkMarks(a: (typeof apps)[number]): Promise<number> {
  const marks = await app.running.data.all<{ term: string; id: string; rank: number }>('SELECT term, id, rank FROM storage_search_marks WHERE app_id = ?', [
    a.id,
  ]);
  const perTerm = new Map<string, number>();
  for (const m of marks) {
    const all = expected(a.records.values(), m.term, 'asc', 1, Number.MAX_SAFE_INTEGER).ids;
    expect(all.indexOf(m.id), `mark of ${JSON.stringify(m.term)} at ${m.rank}`).toBe(m.rank);
    perTerm.set(m.term, (perTerm.get(m.term) ?? 0) + 1);
  }
  // Terms marked in part (deep pages' marks), not only whole (small totals).
  for (const [term, n] of perTerm) if (n < expected(a.records.values(), term, 'asc', 1, 1).total) partlyMarked++;
  return marks.length;
}

/** Terms seen marked in part by the last comparison. */
let partlyMarked = 0;

/** Marks seen by the last comparison (every one checked). */
let marked = 0;

/** The API's answers and each forced FileSearch's, for every term, both directions, pages 1, 2, the last and one past it. */
async function compareAll(): Promise<number> {
  marked = 0;
  partlyMarked = 0;
  const db = app.running.data;
  // Every way there is, on either engine: walk or sort the matches, after a 4+ character term's
  // total is counted (and cached); and 4+ character terms counted from their candidates with the page.
  const forced = [
    new FileSearch(db, { plan: 'walk', fewCandidates: 0 }),
    new FileSearch(db, { plan: 'matches', fewCandidates: 0 }),
    new FileSearch(db, { fewCandidates: Number.POSITIVE_INFINITY, phraseCount: false }),
    // On SQLite: a term counted by its phrase when that is cheaper than reading its candidates, then paged either way.
    new FileSearch(db, { plan: 'walk', fewCandidates: Number.POSITIVE_INFINITY }),
    new FileSearch(db, { plan: 'matches', fewCandidates: Number.POSITIVE_INFINITY }),
    // Marks (deep pages, small totals): pages from marks, totals of 1-2 marked whole, larger ones
    // every match or two from the nearest mark or end, as deep pages are. (Whole marks of larger
    // totals would replace those: the walks' marks are what these check.)
    new FileSearch(db, { marksAfter: 1, markAll: 2 }),
    new FileSearch(db, { marksAfter: 6, markAll: 2 }),
    // On PostgreSQL: matches found and counted through pg_trgm's index (as in an app too large to read whole), not the app's rows.
    new FileSearch(db, { scanApp: 0, fewCandidates: Number.POSITIVE_INFINITY }),
    new FileSearch(db, { scanApp: 0, fewCandidates: 0, markAll: 0 }),
  ];
  let compared = 0;
  // The marks the writes since the last comparison left (before any search makes new ones).
  for (const a of apps) await checkMarks(a);
  for (const a of apps) {
    const state = (await db.one<{ id: string; seq: number; fileCount: number }>('SELECT id, seq, file_count AS "fileCount" FROM storage_apps WHERE id = ?', [
      a.id,
    ]))!;
    for (const term of termsFor(a.records.values())) {
      for (const dir of ['asc', 'desc'] as const) {
        const first = expected(a.records.values(), term, dir, 1, PAGE_SIZE);
        for (const page of new Set([1, 2, Math.max(1, first.totalPages), first.totalPages + 1])) {
          const want = expected(a.records.values(), term, dir, page, PAGE_SIZE);
          const got = await viaApi(a, term, dir, page);
          const what = `${JSON.stringify(term)} ${dir} page ${page}`;
          expect(
            got.files.map((f) => f.id),
            what,
          ).toEqual(want.ids);
          expect(
            got.files.every((f) => a.records.get(f.key)?.name === f.name),
            what,
          ).toBe(true);
          expect(got.pagination, what).toEqual({ page, pageSize: PAGE_SIZE, total: want.total, totalPages: want.totalPages });
          for (const search of forced) {
            const direct = await search.search(state, term, { dir, limit: PAGE_SIZE, offset: (page - 1) * PAGE_SIZE });
            expect({ ids: direct.files.map((f) => f.id), total: direct.total }, `${what} (forced)`).toEqual({ ids: want.ids, total: want.total });
          }
          compared++;
        }
      }
    }
    // Every cached total is exact, whatever was written since it was cached.
    const cached = await db.all<{ term: string; n: number }>('SELECT term, n FROM storage_search_counts WHERE app_id = ?', [a.id]);
    for (const c of cached) expect(c.n, `cached ${JSON.stringify(c.term)}`).toBe(expected(a.records.values(), c.term, 'asc', 1, 1).total);
    marked += await checkMarks(a);
  }
  return compared;
}

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  // A thousand searches a comparison: the limiter is not what this file tests.
  app = await startStorageApp(target, { prefix, toml: '[plugins.rate_limit]\nenabled = false' });
  const owner = await signIn(app);
  for (const name of ['mine', 'theirs']) {
    const created = await createApp(app, owner, name);
    apps.push({ id: created.id, bucket: created.bucketName, token: await createToken(app, owner, created.id), records: new Map() });
  }
  // Several requests, so several uploadedAt values with ties inside each.
  for (const a of apps) for (let i = 0; i < 3; i++) await register(a, newFiles(70));
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe('search answers as a filter over the records would', () => {
  it('for every kind of term, both directions, several pages and past the end, in each app', async () => {
    expect(await compareAll()).toBeGreaterThan(500);
    // The forced instances cached counts of 4+ character terms: the next comparison checks them.
    expect(await app.running.data.value('SELECT count(*) FROM storage_search_counts')).toBeGreaterThan(10);
    expect(marked).toBeGreaterThan(100);
    expect(partlyMarked).toBeGreaterThan(5);
    // Seven ways per page on top of the API's, a thousand pages: minutes on a loaded machine.
  }, 300_000);

  it('after renames, overwrites and deletes (the cached counts follow)', async () => {
    const [mine] = apps;
    const keys = [...mine!.records.keys()];
    // Renames: the same key registered with a new name; overwrites: the same name again (a new uploadedAt).
    const renamed = keys.slice(0, 40).map((key) => ({ key, name: randomName() }));
    const overwritten = keys.slice(40, 60).map((key) => ({ key, name: mine!.records.get(key)!.name }));
    await register(mine!, [...renamed, ...overwritten]);
    const gone = keys.slice(60, 90);
    const res = await app.request('DELETE', '/api/files', { headers: bearer(mine!.token), body: { keys: gone } });
    expect(res.status, res.text).toBe(200);
    for (const key of gone) mine!.records.delete(key);
    await register(mine!, newFiles(30));
    expect(await compareAll()).toBeGreaterThan(500);
    expect(marked).toBeGreaterThan(100);
    expect(partlyMarked).toBeGreaterThan(5);
  }, 300_000);

  it("the gram counts equal the names' own", async () => {
    const db = app.running.data;
    for (const a of apps) {
      const grams = new Map<string, number>();
      for (const r of a.records.values()) {
        const chars = [...r.name];
        const mine = new Set<string>();
        for (let i = 0; i < chars.length; i++) for (let n = 1; n <= 3 && i + n <= chars.length; n++) mine.add(chars.slice(i, i + n).join(''));
        for (const g of mine) grams.set(g, (grams.get(g) ?? 0) + 1);
      }
      const stored = await db.all<{ gram: string; n: number }>('SELECT gram, n FROM storage_search_grams WHERE app_id = ? AND n > 0', [a.id]);
      expect(new Map(stored.map((r) => [r.gram, r.n]))).toEqual(grams);
    }
  });
});

describe('bad terms', () => {
  it.each([
    ['too long', 'x'.repeat(1025)],
    ['a NUL', 'a\u0000b'],
    ['a control character', 'a\u0007'],
  ])('%s: 400 in the plain envelope', async (_what, term) => {
    const res = await app.request('GET', `/api/files?search=${encodeURIComponent(term)}`, { headers: bearer(apps[0]!.token) });
    expect(res.status, res.text).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(res.body.error).toMatch(/search/);
  });

  it('a lone surrogate is not a 500', async () => {
    const res = await app.request('GET', '/api/files?search=%ED%A0%80', { headers: bearer(apps[0]!.token) });
    expect(res.status, res.text).toBeLessThan(500);
  });

  it('1024 characters is still a search (nothing matches)', async () => {
    const page = await viaApi(apps[0]!, 'report'.repeat(170).slice(0, 1024), 'desc', 1);
    expect(page.pagination.total).toBe(0);
  });
});
