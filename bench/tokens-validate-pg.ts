/**
 * `POST /api/tokens/validate` with the database on PostgreSQL against the same on SQLite (issue
 * 15): two `wharf serve` in one run, rounds interleaved, the s3 driver on the test S3 store for
 * both, PostgreSQL a fresh database on the test server (test/pg/postgres.sh, or POSTGRES_URL).
 * Reports req/s, p99 and the server's CPU time per request, and PostgreSQL / SQLite ratios.
 * Usage: node bench/run.ts tokens-validate-pg
 */
import fs from 'node:fs';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { cpuMicros, fmt, median, medianRatio, wrk, perRound } from './lib.ts';
import { type StorageBench, storageBench, wrkScript } from './storage-setup.ts';

/** The plugins not ported to the data layer, off on PostgreSQL (they would refuse the start). */
const NOT_ON_POSTGRES = ['sessions', 'webhooks'];

/** A storage bench whose server (and the command that creates its user) runs with `env`. */
async function benchWith(tag: string, env: Record<string, string>): Promise<StorageBench> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await storageBench(tag);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 50;
  const url = await freshDatabase();
  const off = Object.fromEntries(NOT_ON_POSTGRES.map((p) => [`WHARF_PLUGINS__${p.toUpperCase()}__ENABLED`, 'false']));
  const benches = [
    { engine: 'SQLite', bench: await benchWith('validate-sqlite', {}) },
    { engine: 'PostgreSQL', bench: await benchWith('validate-pg', { ...off, WHARF_DATABASE__URL: url }) },
  ];
  try {
    const cases = [];
    for (const { engine, bench } of benches) {
      const app = await bench.createApp('validate');
      const body = JSON.stringify({ token: await bench.createToken(app.id) });
      const first = await fetch(`${bench.url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (first.status !== 200) throw new Error(`${engine}: validate answered ${first.status} ${await first.text()}`);
      const script = wrkScript(bench.dataDir, 'validate', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
      cases.push({ name: `wharf serve (source) on ${engine}, POST /api/tokens/validate`, url: `${bench.url}/api/tokens/validate`, script, bench });
    }
    const rps = new Map(cases.map((c) => [c.name, [] as number[]]));
    const p99 = new Map(cases.map((c) => [c.name, [] as number[]]));
    const cpu = new Map(cases.map((c) => [c.name, [] as number[]]));
    for (let round = 0; round < rounds; round++) {
      for (const c of cases) {
        wrk(c.url, { seconds: 1, script: c.script, connections }); // warm-up
        const before = cpuMicros(c.bench.server.child.pid!);
        const r = wrk(c.url, { seconds, script: c.script, connections });
        cpu.get(c.name)!.push((cpuMicros(c.bench.server.child.pid!) - before) / (r.rps * seconds));
        if (r.errors) throw new Error(`${c.name}: ${r.errors} errors under load`);
        rps.get(c.name)!.push(r.rps);
        p99.get(c.name)!.push(r.p99ms);
      }
    }
    for (const c of cases) fs.rmSync(c.script, { force: true });
    const [sqlite, postgres] = cases.map((c) => c.name) as [string, string];
    const lines = ['| server, request | req/s (median) | p99 (ms) | CPU µs per request (median) |', '|---|---|---|---|'];
    for (const c of cases)
      lines.push(`| ${c.name} | ${fmt(median(rps.get(c.name)!), 0)} | ${fmt(median(p99.get(c.name)!))} | ${fmt(median(cpu.get(c.name)!), 0)} |`);
    lines.push(
      '',
      `**PostgreSQL / SQLite: req/s ${fmt(medianRatio(rps.get(postgres)!, rps.get(sqlite)!))}, Wharf's CPU per request ${fmt(medianRatio(cpu.get(postgres)!, cpu.get(sqlite)!))}** (medians of the rounds' ratios; PostgreSQL's own CPU, another process on the same machine, is not counted).`,
      '',
      `(${rounds} rounds of ${seconds} s per case, interleaved; wrk -t1 -c${connections}; per-round req/s: ${perRound(
        cases.map((x) => x.name),
        rps,
      )})`,
    );
    return lines.join('\n');
  } finally {
    for (const { bench } of benches) await bench.cleanup();
  }
}
