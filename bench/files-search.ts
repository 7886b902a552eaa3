/**
 * `GET /api/files?search=...` (issue 4): latency with 1,000 and with 1,000,000 files in one app
 * (aim: p50 of the larger at most 3 times the smaller). File rows are inserted straight into the
 * database (in transactions of 1,000, as POST /api/files would), the full-text index and the
 * app counters following through the plugin's triggers. Three terms: one matching the same 10
 * files in both apps, one matching 0.5% of the files, and a two-character term, which has no
 * trigram and is served by a scan of the app's files. wrk -c1, so latency is service time.
 * Usage: node bench/run.ts files-search
 */
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { fmt, median, wrk } from './lib.ts';
import { storageBench } from './storage-setup.ts';

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

/** A small deterministic generator, so both apps get the same kind of names run after run. */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function nameOf(i: number, rand: () => number): string {
  const hex = (n: number) =>
    Math.floor(rand() * 16 ** n)
      .toString(16)
      .padStart(n, '0');
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
  switch (i % 4) {
    case 0:
      return `IMG_2026${String(1 + (i % 12)).padStart(2, '0')}${String(1 + (i % 28)).padStart(2, '0')}_${hex(6)}.jpg`;
    case 1:
      return `invoice-${CUSTOMERS[Math.floor(i / 4) % CUSTOMERS.length]}-${i}.pdf`;
    case 2:
      return `${pick(WORDS)}-${pick(WORDS)}-draft.docx`;
    default:
      return `backup-${hex(8)}.tar.gz`;
  }
}

/** Inserts `count` file rows (plus 10 "needle" files) into an app, 1,000 per transaction. */
function fill(dbPath: string, appId: string, count: number): number {
  const db = new Database(dbPath);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // The rowid as the plugin gives it: in the app's range (seq * 2^32 + next_file).
  const insert = db.prepare(
    `INSERT INTO storage_files (seq, id, app_id, key, name, size, type, uploaded_at)
     VALUES ((SELECT seq * 4294967296 + next_file FROM storage_apps WHERE id = @appId), @id, @appId, @key, @name, @size, @type, @at)`,
  );
  const rand = prng(42);
  const base = Date.parse('2026-01-01T00:00:00Z');
  const started = performance.now();
  const batch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) {
      // Three files per millisecond: ties that the id must break.
      const at = new Date(base + Math.floor(i / 3)).toISOString();
      const name = i % Math.floor(count / 10) === 7 ? `quarterly-needle-report-${i}.pdf` : nameOf(i, rand);
      insert.run({ id: randomUUID(), appId, key: `bench/${i}/${name}`, name, size: 1000 + (i % 5000), type: 'application/octet-stream', at });
    }
  });
  for (let i = 0; i < count; i += 1000) batch(i, Math.min(count, i + 1000));
  const ms = performance.now() - started;
  db.close();
  return ms;
}

export async function run(options: { rounds?: number; seconds?: number; big?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const sizes = [1_000, options.big ?? 1_000_000];
  const bench = await storageBench('search');
  try {
    const apps: { size: number; id: string; token: string }[] = [];
    for (const size of sizes) {
      const app = await bench.createApp(`files-${size}`);
      apps.push({ size, id: app.id, token: await bench.createToken(app.id) });
    }
    await bench.stop();
    const fillMs = apps.map((a) => fill(bench.dbPath, a.id, a.size));
    await bench.restart();

    const terms = [
      { term: 'needle', what: '10 matches in both apps (trigram index)' },
      { term: 'acme', what: '0.5% of the files (trigram index)' },
      { term: 'ne', what: 'two characters (scan of the app)' },
    ];
    const totals = new Map<string, number>();
    for (const a of apps) {
      for (const t of terms) {
        const res = await fetch(`${bench.url}/api/files?search=${t.term}`, { headers: { authorization: `Bearer ${a.token}` } });
        if (res.status !== 200) throw new Error(`search ${t.term}: ${res.status} ${await res.text()}`);
        totals.set(`${a.size}/${t.term}`, ((await res.json()) as { pagination: { total: number } }).pagination.total);
      }
    }
    const p50 = new Map<string, number[]>();
    const p99 = new Map<string, number[]>();
    const rps = new Map<string, number[]>();
    for (let round = 0; round < rounds; round++) {
      for (const t of terms) {
        for (const a of apps) {
          const key = `${a.size}/${t.term}`;
          const url = `${bench.url}/api/files?search=${t.term}`;
          const headers = { authorization: `Bearer ${a.token}` };
          wrk(url, { seconds: 1, connections: 1, headers });
          const r = wrk(url, { seconds, connections: 1, headers });
          if (r.errors) throw new Error(`${key}: ${r.errors} errors`);
          for (const [map, v] of [
            [p50, r.p50ms],
            [p99, r.p99ms],
            [rps, r.rps],
          ] as const)
            map.set(key, [...(map.get(key) ?? []), v]);
        }
      }
    }
    const lines = [
      `rows inserted: ${apps.map((a, i) => `${a.size.toLocaleString('en')} in ${fmt(fillMs[i]! / 1000, 1)} s`).join(', ')} (triggers maintaining the trigram index and counters)`,
      '',
      '| search | files in app | matches (total) | p50 (ms) | p99 (ms) | req/s | p50 ratio big/small |',
      '|---|---|---|---|---|---|---|',
    ];
    for (const t of terms) {
      const small = median(p50.get(`${sizes[0]}/${t.term}`)!);
      for (const a of apps) {
        const key = `${a.size}/${t.term}`;
        const ratio = a.size === sizes[0] ? '' : fmt(median(p50.get(key)!) / small);
        lines.push(
          `| \`${t.term}\`: ${t.what} | ${a.size.toLocaleString('en')} | ${totals.get(key)} | ${fmt(median(p50.get(key)!))} | ${fmt(median(p99.get(key)!))} | ${fmt(median(rps.get(key)!), 0)} | ${ratio} |`,
        );
      }
    }
    lines.push(
      '',
      `(GET /api/files?search=TERM with the app's Bearer token, page 1 of 10; ${rounds} rounds of ${seconds} s per case, interleaved; wrk -t1 -c1)`,
    );
    return lines.join('\n');
  } finally {
    await bench.cleanup();
  }
}
