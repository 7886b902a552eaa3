/**
 * `GET /api/files?search=...` (issue 17): latency with 1,000 and with 1,000,000 files in one app,
 * a third app of 100,000 files beside them (its entries share every index), on SQLite or (with
 * bench/files-search-pg.ts) PostgreSQL. The bulk of the rows is inserted straight into the
 * database, in bulk, as POST /api/files records them (bench/files-search-fill.ts); the 10 "needle"
 * files of each app are registered through the API (objects stored, POST /api/files). Terms of
 * 1, 2, 3+ characters, selective (the 10 needles) and broad (up to half the files), page 10,000
 * of a broad term, and the first request of broad terms not asked before (count not cached).
 * wrk -c1, so latency is service time. Usage: node bench/run.ts files-search (files-search-pg);
 * BENCH_SEARCH_FILES (default 1,000,000), BENCH_SEARCH_ROUNDS (3), BENCH_SEARCH_SECONDS (3).
 */
import { randomUUID } from 'node:crypto';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import pg from 'pg';
import { s3Client } from '../test/helpers/s3.ts';
import { fmt, median, wrk } from './lib.ts';
import { type StorageBench, storageBench } from './storage-setup.ts';
import { prng } from '../test/helpers/prng.ts';
import { dropDatabase, freshDatabase } from '../test/helpers/postgres.ts';
import { type BenchFile, bulkFillPostgres, bulkFillSqlite } from './files-search-fill.ts';

const CUSTOMERS = [
  'acme',
  'globex',
  'initech',
  'umbrella',
  'hooli',
  'stark',
  'wayne',
  'wonka',
  'tyrell',
  'cyberdyne',
  'soylent',
  'oscorp',
  'gringotts',
  'monarch',
  'vandelay',
  'duff',
  'krusty',
  'nakatomi',
  'gekko',
  'pied',
  'aperture',
  'blackmesa',
  'massive',
  'dunder',
  'sterling',
  'bluth',
  'prestige',
  'abstergo',
  'virtucon',
  'weyland',
  'yoyodyne',
  'zorg',
  'omni',
  'rekall',
  'spacely',
  'cogswell',
  'sirius',
  'ingen',
  'lexcorp',
  'kaibacorp',
  'shinra',
  'tessier',
  'mishima',
  'vault',
  'ellingson',
  'trask',
  'wolfram',
  'buynlarge',
  'contoso',
  'fabrikam',
];
const WORDS = (
  'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango ' +
  'uniform victor whiskey xray yankee zulu amber azure beige black blue bronze brown coral cream crimson cyan gold gray green ' +
  'indigo ivory jade khaki lemon lilac lime magenta maroon mauve mint navy olive orange peach pearl pink plum purple red rose ' +
  'ruby salmon sand scarlet silver tan teal turquoise violet white yellow apple banana cherry grape kiwi mango melon orange pear ' +
  'plum quince berry fig date lychee papaya guava apricot lemon lime coconut olive tomato potato carrot onion garlic pepper ' +
  'spring summer autumn winter north south east west river ocean mountain valley forest desert island harbor bridge castle tower ' +
  'garden meadow canyon glacier volcano prairie lagoon delta reef cliff dune marsh grove orchard vineyard quarry mill forge ' +
  'anvil hammer chisel saw drill lathe wrench pliers ladder bucket rope chain lantern compass anchor sail rudder keel mast ' +
  'budget summary minutes agenda memo brief contract invoice receipt ledger payroll roster schedule timeline roadmap plan'
).split(' ');

/**
 * Half the names contain `report`; the other half are photos, invoices (`acme` is one customer of
 * 50), `<word>-<word>-draft.docx` and backups. `Q`, `Q3`, `ACME` and `report-draft` are only in
 * the needles, whose trigrams are common elsewhere (`rep`, `t-d`, `dra`...).
 */
export function nameOf(i: number, rand: () => number): string {
  const hex = (n: number) =>
    Math.floor(rand() * 16 ** n)
      .toString(16)
      .padStart(n, '0');
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
  if (i % 2 === 0) return `report-${pick(WORDS)}-${i}.pdf`;
  switch ((i >> 1) % 4) {
    case 0:
      return `IMG_2026${String(1 + (i % 12)).padStart(2, '0')}${String(1 + (i % 28)).padStart(2, '0')}_${hex(6)}.jpg`;
    case 1:
      return `invoice-${CUSTOMERS[Math.floor(i / 8) % CUSTOMERS.length]}-${i}.pdf`;
    case 2:
      return `${pick(WORDS)}-${pick(WORDS)}-draft.docx`;
    default:
      return `backup-${hex(8)}.tar.gz`;
  }
}

/** The benchmark's files in order (call with i = 0, 1, 2...: the names come from one seeded sequence), three per millisecond (ties the id breaks). */
export function benchFiles(): (i: number) => BenchFile {
  const rand = prng(42);
  const base = Date.parse('2026-01-01T00:00:00Z');
  return (i) => {
    const name = nameOf(i, rand);
    return { key: `bench/${i}/${name}`, name, size: 1000 + (i % 5000), at: new Date(base + Math.floor(i / 3)).toISOString() };
  };
}

/** Inserts `count` file rows into an app one at a time through the triggers, 1,000 per transaction. Returns the milliseconds taken. */
export function fillFiles(db: Database.Database, appId: string, count: number, file = benchFiles()): number {
  // The rowid as the plugin gives it: in the app's range (seq * 2^32 + next_file).
  const insert = db.prepare(
    `INSERT INTO storage_files (seq, id, app_id, key, name, size, type, uploaded_at)
     VALUES ((SELECT seq * 4294967296 + next_file FROM storage_apps WHERE id = @appId), @id, @appId, @key, @name, @size, 'application/octet-stream', @at)`,
  );
  const started = performance.now();
  const batch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) insert.run({ id: randomUUID(), appId, ...file(i) });
  });
  for (let i = 0; i < count; i += 1000) batch(i, Math.min(count, i + 1000));
  return performance.now() - started;
}

const NEEDLES = 10;
const needleName = (i: number) => `ACME Q3 report-draft ${i}.pdf`;

/** Terms measured with wrk on both apps; `query` beside the search. */
const TERMS = [
  { term: 'Q', what: '1 character, the needles' },
  { term: 'e', what: '1 character, most files' },
  { term: 'Q3', what: '2 characters, the needles' },
  { term: 're', what: '2 characters, over half the files' },
  { term: 'ACME', what: '4 characters, the needles' },
  { term: 'acme', what: '4 characters, 1 invoice customer of 50' },
  { term: 'report', what: 'half the files' },
  { term: 'report-draft', what: 'the needles; its trigrams are common' },
  { term: 'report', query: '&page=10000&dir=asc', what: 'half the files, page 10,000, oldest first' },
  { term: 'report', query: '&page=10001&dir=asc', what: 'page 10,001, oldest first (after page 10,000)' },
  { term: 'report', query: '&page=20000', what: 'page 20,000, newest first' },
  { term: 'e', query: '&page=30000', what: '1 character, page 30,000, newest first' },
];
/** Broad terms asked once each, in order, after the server starts: no count is cached yet. */
const COLD = ['draft', 'IMG_2026', 'backup-', 'invoice-', '.docx', 'tar.gz', 'report-', '.pdf', '-draft.', '.jpg', 'port-', 'voice'];

export type Engine = 'sqlite' | 'postgres';

/** Fills the apps in bulk with the server stopped; the fill times (ms) and the storage tables' and indexes' sizes. */
async function fill(engine: Engine, bench: StorageBench, databaseUrl: string | undefined, apps: { id: string; size: number }[]) {
  if (engine === 'sqlite') {
    const db = new Database(bench.dbPath);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = OFF');
      db.pragma('cache_size = -262144');
      const fillMs = apps.map((a) => {
        const started = performance.now();
        bulkFillSqlite(db, a.id, a.size, benchFiles());
        return performance.now() - started;
      });
      const sizes = db.prepare("SELECT name, sum(pgsize) / 1048576.0 AS mib FROM dbstat WHERE name LIKE 'storage_%' GROUP BY name ORDER BY mib DESC").all() as {
        name: string;
        mib: number;
      }[];
      return { fillMs, sizes };
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const fillMs = [];
    for (const a of apps) {
      const started = performance.now();
      await bulkFillPostgres(client, a.id, a.size, benchFiles());
      fillMs.push(performance.now() - started);
    }
    const sizes = (
      await client.query<{ name: string; mib: number }>(
        "SELECT relname AS name, pg_relation_size(oid) / 1048576.0 AS mib FROM pg_class WHERE relname LIKE 'storage_%' AND relkind IN ('r', 'i', 't') ORDER BY 2 DESC",
      )
    ).rows.map((r) => ({ name: r.name, mib: Number(r.mib) }));
    return { fillMs, sizes };
  } finally {
    await client.end();
  }
}

export async function run(options: { rounds?: number; seconds?: number; big?: number; engine?: Engine } = {}): Promise<string> {
  const env = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);
  const rounds = options.rounds ?? env('BENCH_SEARCH_ROUNDS') ?? 3;
  const seconds = options.seconds ?? env('BENCH_SEARCH_SECONDS') ?? 3;
  const engine = options.engine ?? 'sqlite';
  const sizes = [1_000, options.big ?? env('BENCH_SEARCH_FILES') ?? 1_000_000];
  const databaseUrl = engine === 'postgres' ? await freshDatabase() : undefined;
  const bench = await storageBench(`search-${engine}`, databaseUrl ? { WHARF_DATABASE__URL: databaseUrl } : {});
  const s3 = s3Client(bench.target);
  try {
    const apps: { size: number; id: string; bucketName: string; token: string }[] = [];
    for (const size of [...sizes, sizes[1]! / 10]) {
      const app = await bench.createApp(`files-${size}`);
      apps.push({ size, id: app.id, bucketName: app.bucketName, token: await bench.createToken(app.id) });
    }
    await bench.stop();
    const { fillMs, sizes: sizeMiB } = await fill(engine, bench, databaseUrl, apps);
    await bench.restart();
    const measured = apps.slice(0, 2);
    for (const a of measured) {
      const files = Array.from({ length: NEEDLES }, (_, i) => ({ key: `needles/${i}.pdf`, name: needleName(i), size: 1, type: 'application/pdf' }));
      await Promise.all(files.map((f) => s3.send(new PutObjectCommand({ Bucket: a.bucketName, Key: f.key, Body: 'x' }))));
      const res = await fetch(`${bench.url}/api/files`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: a.token, files }),
      });
      if (res.status !== 200) throw new Error(`register needles: ${res.status} ${await res.text()}`);
    }

    const search = async (a: (typeof apps)[number], term: string, query = '') => {
      const started = performance.now();
      const res = await fetch(`${bench.url}/api/files?search=${encodeURIComponent(term)}${query}`, { headers: { authorization: `Bearer ${a.token}` } });
      if (res.status !== 200) throw new Error(`search ${term}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { pagination: { total: number } };
      return { ms: performance.now() - started, total: body.pagination.total };
    };
    // First requests of broad terms, before anything else asks for them.
    const cold = new Map<number, { ms: number[]; totals: number[] }>();
    for (const a of measured) {
      const runs = [];
      for (const term of COLD) runs.push(await search(a, term));
      cold.set(a.size, { ms: runs.map((r) => r.ms), totals: runs.map((r) => r.total) });
    }
    // Each case's first request (a deep page's marks, a small total's marks are made then), its total.
    const totals = new Map<string, number>();
    const firstMs = new Map<string, number>();
    for (const a of measured) {
      for (const t of TERMS) {
        const first = await search(a, t.term, t.query);
        totals.set(`${a.size}/${t.term}${t.query ?? ''}`, first.total);
        firstMs.set(`${a.size}/${t.term}${t.query ?? ''}`, first.ms);
      }
    }

    const p50 = new Map<string, number[]>();
    const p99 = new Map<string, number[]>();
    for (let round = 0; round < rounds; round++) {
      for (const t of TERMS) {
        for (const a of measured) {
          const key = `${a.size}/${t.term}${t.query ?? ''}`;
          const url = `${bench.url}/api/files?search=${encodeURIComponent(t.term)}${t.query ?? ''}`;
          const headers = { authorization: `Bearer ${a.token}` };
          wrk(url, { seconds: 1, connections: 1, headers, timeout: 30 });
          const r = wrk(url, { seconds, connections: 1, headers, timeout: 30 });
          if (r.errors) throw new Error(`${key}: ${r.errors} errors`);
          p50.set(key, [...(p50.get(key) ?? []), r.p50ms]);
          p99.set(key, [...(p99.get(key) ?? []), r.p99ms]);
        }
      }
    }
    const lines = [
      `${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}; rows inserted in bulk (bench/files-search-fill.ts): ${apps.map((a, i) => `${a.size.toLocaleString('en')} in ${fmt(fillMs[i]! / 1000, 1)} s (${fmt((fillMs[i]! * 1000) / a.size, 0)} µs a row)`).join(', ')}`,
      `storage tables and indexes with ${apps.reduce((n, a) => n + a.size, 0).toLocaleString('en')} files: ${sizeMiB.map((t) => `${t.name} ${fmt(t.mib, 1)} MiB`).join(', ')}`,
      '',
      '| search | files in app | total | first request (ms) | p50 (ms) | p99 (ms) | p50 ratio big/small |',
      '|---|---|---|---|---|---|---|',
    ];
    for (const t of TERMS) {
      const id = `${t.term}${t.query ?? ''}`;
      const small = median(p50.get(`${sizes[0]}/${id}`)!);
      for (const a of measured) {
        const key = `${a.size}/${id}`;
        const ratio = a.size === sizes[0] ? '' : fmt(median(p50.get(key)!) / small);
        lines.push(
          `| \`${t.term}\`${t.query ? ` ${t.query.slice(1)}` : ''}: ${t.what} | ${a.size.toLocaleString('en')} | ${totals.get(key)} | ${fmt(firstMs.get(key)!)} | ${fmt(median(p50.get(key)!))} | ${fmt(median(p99.get(key)!))} | ${ratio} |`,
        );
      }
    }
    for (const a of measured) {
      const c = cold.get(a.size)!;
      const sorted = [...c.ms].sort((x, y) => x - y);
      lines.push(
        `| first request of a broad term (${COLD.length} terms, median; max ${fmt(sorted.at(-1)!)}) | ${a.size.toLocaleString('en')} | ${Math.min(...c.totals)}-${Math.max(...c.totals)} | ${fmt(median(c.ms))} | | | ${a.size === sizes[0] ? '' : fmt(median(c.ms) / median(cold.get(sizes[0]!)!.ms))} |`,
      );
    }
    lines.push(
      '',
      `(GET /api/files?search=TERM with the app's Bearer token, 10 a page, newest first unless said; ${rounds} rounds of ${seconds} s per case, interleaved; wrk -t1 -c1. First requests: one fetch each, client-side time, before wrk's.)`,
    );
    return lines.join('\n');
  } finally {
    s3.destroy();
    await bench.cleanup();
    if (databaseUrl) await dropDatabase(databaseUrl);
  }
}
