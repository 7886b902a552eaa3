/**
 * `POST /api/tokens/validate` with the database on PostgreSQL against the same on SQLite (issue
 * 15): two `wharf serve` in one run, rounds interleaved, the s3 driver on the test S3 store for
 * both, PostgreSQL a fresh database on the test server (test/pg/postgres.sh, or POSTGRES_URL).
 * Reports req/s, p99 and the server's CPU time per request, and PostgreSQL / SQLite ratios.
 * Usage: node bench/run.ts tokens-validate-pg
 */
import fs from 'node:fs';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { type EngineCase, engineTable } from './lib.ts';
import { storageBench, wrkScript } from './storage-setup.ts';

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 50;
  const url = await freshDatabase();
  const benches = [
    { engine: 'SQLite', bench: await storageBench('validate-sqlite', {}) },
    { engine: 'PostgreSQL', bench: await storageBench('validate-pg', { WHARF_DATABASE__URL: url }) },
  ];
  try {
    const cases: EngineCase[] = [];
    for (const { engine, bench } of benches) {
      const app = await bench.createApp('validate');
      const body = JSON.stringify({ token: await bench.createToken(app.id) });
      const first = await fetch(`${bench.url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (first.status !== 200) throw new Error(`${engine}: validate answered ${first.status} ${await first.text()}`);
      const script = wrkScript(bench.dataDir, 'validate', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
      cases.push({
        name: `wharf serve (source) on ${engine}, POST /api/tokens/validate`,
        url: `${bench.url}/api/tokens/validate`,
        script,
        pid: bench.server.child.pid!,
      });
    }
    const table = engineTable(cases as [EngineCase, EngineCase], { rounds, seconds, connections, ratioLabel: 'PostgreSQL / SQLite' });
    for (const c of cases) fs.rmSync(c.script!, { force: true });
    return table;
  } finally {
    for (const { bench } of benches) await bench.cleanup();
  }
}
