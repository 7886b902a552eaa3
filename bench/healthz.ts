/**
 * GET /healthz of `wharf serve` (the single executable, embedded defaults) against a bare
 * node:http server and a bare Koa server, in one run. Measures, interleaving the servers
 * round by round so machine noise hits all three alike:
 *  - start-up: spawn to first 200 (median of `starts` runs each);
 *  - idle memory (RSS after start-up and a few requests, then 1 s idle);
 *  - requests per second under wrk (1 thread, 50 connections; median of `rounds` runs);
 * and prints ratios to bare Koa. Usage: node bench/run.ts healthz
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { baselines, cpuMicros, dropPageCache, ensureBinary, fmt, median, medianRatio, startServer, wrk, type ServerSpec, perRound } from './lib.ts';

export async function run(options: { rounds?: number; starts?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  const starts = options.starts ?? Number(process.env.BENCH_STARTS ?? 10);
  const seconds = options.seconds ?? 5;
  const bin = ensureBinary();
  dropPageCache(bin);
  const dataRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-'));
  const wharf: ServerSpec = {
    name: 'wharf serve (binary)',
    argsFor: (port) => [bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', path.join(dataRoot, `d${port}`)]],
    // Every plugin on its defaults, the embedded object store on a free port.
    env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' },
  };
  const specs = [baselines.http, baselines.koa, wharf];
  const startMs = new Map<string, number[]>(specs.map((s) => [s.name, []]));
  const rss = new Map<string, { total: number; anon: number }>();
  const rps = new Map<string, number[]>(specs.map((s) => [s.name, []]));
  const p99 = new Map<string, number[]>(specs.map((s) => [s.name, []]));
  // CPU time of the server per request (user + system, from /proc): steadier than req/s when
  // other work shares the machine, since it does not count the time the server waited for a core.
  const cpu = new Map<string, number[]>(specs.map((s) => [s.name, []]));

  // A server that throws (errors under load, a start that fails) is stopped and the data dirs removed all the same.
  try {
    for (let i = 0; i < starts; i++) {
      for (const spec of specs) {
        const server = await startServer(spec);
        try {
          startMs.get(spec.name)!.push(server.startMs);
          if (i === 0) {
            for (let k = 0; k < 20; k++) await (await fetch(`${server.url}/healthz`)).arrayBuffer();
            await new Promise((r) => setTimeout(r, 1000));
            rss.set(spec.name, server.rssMiB());
          }
        } finally {
          await server.stop();
        }
      }
    }
    for (let round = 0; round < rounds; round++) {
      for (const spec of specs) {
        const server = await startServer(spec);
        try {
          wrk(`${server.url}/healthz`, { seconds: 1 }); // warm-up
          const cpuBefore = cpuMicros(server.child.pid!);
          const r = wrk(`${server.url}/healthz`, { seconds });
          cpu.get(spec.name)!.push((cpuMicros(server.child.pid!) - cpuBefore) / (r.rps * seconds));
          if (r.errors) throw new Error(`${spec.name}: ${r.errors} errors under load`);
          rps.get(spec.name)!.push(r.rps);
          p99.get(spec.name)!.push(r.p99ms);
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    fs.rmSync(dataRoot, { recursive: true, force: true });
  }

  const koa = baselines.koa.name;
  const lines = [
    `binary size: ${fmt(fs.statSync(bin).size / 2 ** 20, 1)} MiB (${path.relative(process.cwd(), bin)})`,
    '',
    "| server | start to first 200 (ms, median) | start ratio to Koa | idle RSS, MiB (private part) | /healthz req/s (median) | req/s ratio to Koa (median of rounds) | p99 (ms) | CPU µs per request (median) | Koa's CPU per request / this |",
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const spec of specs) {
    const s = median(startMs.get(spec.name)!);
    const r = median(rps.get(spec.name)!);
    lines.push(
      `| ${spec.name} | ${fmt(s, 0)} | ${fmt(s / median(startMs.get(koa)!))} | ${fmt(rss.get(spec.name)!.total, 1)} (${fmt(rss.get(spec.name)!.anon, 1)}) | ${fmt(r, 0)} | ${fmt(medianRatio(rps.get(spec.name)!, rps.get(koa)!))} | ${fmt(median(p99.get(spec.name)!))} | ${fmt(median(cpu.get(spec.name)!), 0)} | ${fmt(medianRatio(cpu.get(koa)!, cpu.get(spec.name)!))} |`,
    );
  }
  lines.push(
    '',
    `(${starts} starts and ${rounds} load rounds of ${seconds} s per server, interleaved; wrk -t1 -c50; servers pinned with taskset -c ${process.env.BENCH_CPU ?? '1'}, wrk and this script on ${process.env.BENCH_LOAD_CPU ?? '0'}; per-round req/s ${perRound(
      specs.map((x) => x.name),
      rps,
    )})`,
  );
  return lines.join('\n');
}
