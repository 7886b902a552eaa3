/**
 * Where SQLite's WAL checkpoints run (issue 16 part 7, core/db-checkpoint.ts): the data layer
 * writing phase 1's kind of transaction (100 rows of sorted keys in one INSERT, 4 writers at once,
 * group commit) with the checkpoints on the main connection (`mode: 'main'`, SQLite's own, in the
 * COMMIT past 1000 pages) against the worker thread (`mode: 'worker'`, started at once). Each run
 * is a fresh process on a fresh file, pinned to the servers' core (the worker shares it); the
 * modes alternate round by round. Reports transactions per second, CPU time per transaction
 * (both threads) and the event loop's delay (p99, max): what a checkpoint on the loop holds up.
 * Usage: node bench/run.ts db-checkpoints (BENCH_ROUNDS, default 3; BENCH_TXNS, default 6000).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { openSqlite } from '../core/db-sqlite.ts';
import { fmt, median, node, pinned } from './lib.ts';

const MODES = ['main', 'worker'] as const;
type Mode = (typeof MODES)[number];
interface Result {
  txnPerSecond: number;
  cpuMicrosPerTxn: number;
  p99Ms: number;
  maxMs: number;
  resets: number;
}

/** One run in this process: `txns` transactions by 4 writers on a fresh file. */
async function child(mode: Mode, txns: number): Promise<Result> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-ckpt-'));
  const db = openSqlite(path.join(dir, 'bench.db'), { checkpoint: { mode, startAt: 0 } });
  try {
    await db.exec(
      'CREATE TABLE uploads (app_id TEXT NOT NULL, key TEXT NOT NULL, size INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (app_id, key)); CREATE INDEX uploads_expiry ON uploads (expires_at)',
    );
    while (mode === 'worker' && db.checkpoints.stats.where !== 'worker') await new Promise((r) => setTimeout(r, 10));
    const insert = `INSERT INTO uploads (app_id, key, size, expires_at) SELECT 'app', ? || printf('%03d', n), 100000 + n, ?
      FROM (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100) SELECT n FROM s)`;
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    let done = 0;
    let seq = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (done < txns) {
          // Keys sorted by time, as plugins/storage/object-keys.ts makes them.
          const prefix = `${Date.now().toString(36).padStart(9, '0')}${String(seq++).padStart(8, '0')}/`;
          await db.transaction((tx) => tx.run(insert, [prefix, Date.now()]));
          done++;
          await new Promise((r) => setImmediate(r));
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu);
    delay.disable();
    return {
      txnPerSecond: done / seconds,
      cpuMicrosPerTxn: (used.user + used.system) / done,
      p99Ms: delay.percentile(99) / 1e6,
      maxMs: delay.max / 1e6,
      resets: db.checkpoints.stats.resets,
    };
  } finally {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(options: { rounds?: number; txns?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  const txns = options.txns ?? Number(process.env.BENCH_TXNS ?? 6000);
  const self = fileURLToPath(import.meta.url);
  const results = new Map<Mode, Result[]>(MODES.map((m) => [m, []]));
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 ? [...MODES].reverse() : MODES) {
      const [cmd, args] = pinned(node, [self, mode, String(txns)]);
      results.get(mode)!.push(JSON.parse(execFileSync(cmd, args, { encoding: 'utf8' })) as Result);
    }
  }
  const med = (mode: Mode, key: keyof Result) => median(results.get(mode)!.map((r) => r[key]));
  const rows = MODES.map(
    (mode) =>
      `| ${mode} | ${fmt(med(mode, 'txnPerSecond'), 0)} | ${fmt(med(mode, 'cpuMicrosPerTxn'), 0)} | ${fmt(med(mode, 'p99Ms'), 1)} | ${fmt(med(mode, 'maxMs'), 1)} |`,
  );
  const perRound = MODES.map(
    (mode) =>
      `${mode} ${results
        .get(mode)!
        .map((r) => fmt(r.txnPerSecond, 0))
        .join('/')}`,
  ).join('; ');
  const ratios = results.get('worker')!.map((r, i) => r.txnPerSecond / results.get('main')![i]!.txnPerSecond);
  return [
    '### db-checkpoints',
    '',
    '| checkpoints | transactions/s (median) | CPU µs per transaction | event loop delay p99 (ms) | max (ms) |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    `**worker / main: ${fmt(median(ratios), 2)}** transactions/s (median of the rounds' ratios).`,
    '',
    `(${rounds} rounds of ${txns} transactions of 100 rows, 4 writers, modes alternating; per-round transactions/s: ${perRound}; the worker's WAL restarts per run: ${results
      .get('worker')!
      .map((r) => r.resets)
      .join('/')})`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url) && MODES.includes(process.argv[2] as Mode)) {
  process.stdout.write(JSON.stringify(await child(process.argv[2] as Mode, Number(process.argv[3]))));
}
