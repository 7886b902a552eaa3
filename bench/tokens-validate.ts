/**
 * `POST /api/tokens/validate` (issue 4): requests per second of `wharf serve` against a bare
 * node:http + better-sqlite3 server doing the same lookup on the same database, in one run,
 * rounds interleaved, as a ratio (aim: at least 0.7). Wharf also records lastUsedAt (batched);
 * the baseline only looks up. Usage: node bench/run.ts tokens-validate
 */
import fs from 'node:fs';
import path from 'node:path';
import { cpuMicros, fmt, median, medianRatio, node, root, startServer, wrk, perRound } from './lib.ts';
import { storageBench, wrkScript } from './storage-setup.ts';

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 50;
  const bench = await storageBench('validate');
  try {
    const app = await bench.createApp('validate');
    const token = await bench.createToken(app.id);
    const body = JSON.stringify({ token });
    const first = await fetch(`${bench.url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const expected = (await first.json()) as { storage: unknown };
    if (first.status !== 200) throw new Error(`validate: ${first.status} ${JSON.stringify(expected)}`);

    const baseline = await startServer({
      name: 'bare node:http + better-sqlite3',
      argsFor: (port) => [node, [path.join(root, 'bench/baselines/tokens-validate.mjs'), String(port), bench.dbPath, JSON.stringify(expected.storage)]],
    });
    try {
      const check = await fetch(`${baseline.url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const got = await check.json();
      if (JSON.stringify(got) !== JSON.stringify(expected)) throw new Error(`baseline answers ${JSON.stringify(got)}, Wharf ${JSON.stringify(expected)}`);

      const script = wrkScript(bench.dataDir, 'validate', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
      // GET /healthz of both servers: what the HTTP stack alone costs, the ceiling of the ratio.
      const cases = [
        { name: `${baseline.name}, POST /api/tokens/validate`, url: `${baseline.url}/api/tokens/validate`, script },
        { name: 'wharf serve (source), POST /api/tokens/validate', url: `${bench.url}/api/tokens/validate`, script },
        { name: `${baseline.name}, GET /healthz`, url: `${baseline.url}/healthz`, script: undefined },
        { name: 'wharf serve (source), GET /healthz', url: `${bench.url}/healthz`, script: undefined },
      ];
      const rps = new Map(cases.map((c) => [c.name, [] as number[]]));
      const p99 = new Map(cases.map((c) => [c.name, [] as number[]]));
      // CPU time of the server per request: steadier than req/s when other work shares the machine.
      const cpu = new Map(cases.map((c) => [c.name, [] as number[]]));
      const pidOf = (i: number) => (i % 2 === 0 ? baseline.child.pid! : bench.server.child.pid!);
      for (let round = 0; round < rounds; round++) {
        for (const [i, c] of cases.entries()) {
          wrk(c.url, { seconds: 1, script: c.script, connections }); // warm-up
          const before = cpuMicros(pidOf(i));
          const r = wrk(c.url, { seconds, script: c.script, connections });
          cpu.get(c.name)!.push((cpuMicros(pidOf(i)) - before) / (r.rps * seconds));
          if (r.errors) throw new Error(`${c.name}: ${r.errors} errors under load`);
          rps.get(c.name)!.push(r.rps);
          p99.get(c.name)!.push(r.p99ms);
        }
      }
      if (bench.server.child.exitCode !== null) throw new Error(`wharf exited: ${bench.stderrTail()}`);
      // wrk ran synchronously: let fetch notice the keep-alive sockets the servers closed meanwhile.
      await new Promise((r) => setTimeout(r, 100));
      const lastUsed = await fetch(`${bench.url}/api/tokens?appId=${app.id}`, { headers: bench.dashboard });
      const tokens = ((await lastUsed.json()) as { tokens: { lastUsedAt: string | null }[] }).tokens;
      const ratio = (a: number, b: number) => fmt(medianRatio(rps.get(cases[a]!.name)!, rps.get(cases[b]!.name)!));
      const cpuRatio = (a: number, b: number) => fmt(medianRatio(cpu.get(cases[b]!.name)!, cpu.get(cases[a]!.name)!));
      const lines = ['| server, request | req/s (median) | p99 (ms) | CPU µs per request (median) |', '|---|---|---|---|'];
      for (const c of cases)
        lines.push(`| ${c.name} | ${fmt(median(rps.get(c.name)!), 0)} | ${fmt(median(p99.get(c.name)!))} | ${fmt(median(cpu.get(c.name)!), 0)} |`);
      lines.push(
        '',
        `**validate: Wharf / baseline = ${ratio(1, 0)}** (aim at least 0.7; median of the rounds' ratios); for reference GET /healthz: Wharf / bare = ${ratio(3, 2)}.`,
        '',
        `CPU per request, baseline / Wharf: validate ${cpuRatio(1, 0)}, GET /healthz ${cpuRatio(3, 2)}.`,
        '',
        `lastUsedAt after the run: ${tokens[0]?.lastUsedAt ?? 'null'} (read at ${new Date().toISOString()})`,
        '',
        `(${rounds} rounds of ${seconds} s per case, interleaved; wrk -t1 -c${connections}; per-round req/s: ${perRound(
          cases.map((x) => x.name),
          rps,
        )})`,
      );
      fs.rmSync(script, { force: true });
      return lines.join('\n');
    } finally {
      await baseline.stop();
    }
  } finally {
    await bench.cleanup();
  }
}
