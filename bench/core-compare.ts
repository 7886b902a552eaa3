/**
 * Before/after of the core's cost per request, from source trees (issue 16): GET /healthz and
 * POST /api/tokens/validate of `wharf serve` started from each tree in BENCH_TREES
 * (`name=dir;name=dir`, default `this=.`), against bare Koa (/healthz) and the node:http +
 * better-sqlite3 baseline (validate), all on one data dir and running side by side, the cases
 * alternating in short slices. Unlike tokens-validate, the rate limiter is on (limits
 * raised out of reach), as it is in production. Reports the CPU time per request (user +
 * system, from /proc) and the ratios the issue names. Usage:
 *   BENCH_TREES='main=/tmp/main-src;this=.' node bench/run.ts core-compare
 * A tree may carry environment variables for its server after a `|` (`nolog=.|WHARF_LOG__LEVEL=warn`,
 * several joined by `,`), to measure what one piece costs. BENCH_CASES=healthz compares /healthz
 * alone, on a fresh data dir with the default plugins (no S3 target, no token).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { baselines, cpuMicros, fmt, median, node, perRound, profiling, root, type ServerSpec, startServer, wrk } from './lib.ts';
import { storageBench, wrkScript } from './storage-setup.ts';

export async function run(): Promise<string> {
  const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
  const seconds = Number(process.env.BENCH_SECONDS ?? 2);
  const trees = (process.env.BENCH_TREES ?? 'this=.').split(';').map((t) => {
    const at = t.indexOf('=');
    const [dir, vars = ''] = t.slice(at + 1).split('|') as [string, string?];
    const env = Object.fromEntries(vars ? vars.split(',').map((v) => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)]) : []);
    return { name: t.slice(0, at), dir: path.resolve(dir), env };
  });
  if (process.env.BENCH_CASES === 'healthz') return healthzOnly(trees, rounds, seconds);
  const bench = await storageBench('compare');
  try {
    const app = await bench.createApp('compare');
    const token = await bench.createToken(app.id);
    const body = JSON.stringify({ token });
    const first = await fetch(`${bench.url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const expected = (await first.json()) as { storage: unknown };
    if (first.status !== 200) throw new Error(`validate: ${first.status} ${JSON.stringify(expected)}`);
    await bench.stop();

    // The bench's config with the rate limiter on, every built-in rule out of reach.
    const configPath = path.join(bench.dataDir, 'wharf.toml');
    const limits = ['default', 'send_message', 'sessions', 'files', 'login']
      .map((rule) => `[plugins.rate_limit.rules.${rule}]\nlimit = 1000000000\nanonymous = 1000000000\n`)
      .join('');
    const config = path.join(bench.dataDir, 'compare.toml');
    fs.writeFileSync(config, fs.readFileSync(configPath, 'utf8').replace('[plugins.rate_limit]\nenabled = false\n', '') + limits);

    const wharf = (tree: Tree): ServerSpec => ({
      name: `wharf (${tree.name})`,
      cwd: tree.dir,
      env: tree.env,
      argsFor: (port) => [
        node,
        [...profiling(), path.join(tree.dir, 'bin/wharf.ts'), 'serve', '--config', config, '--listen', `127.0.0.1:${port}`, '--data-dir', bench.dataDir],
      ],
    });
    const bare: ServerSpec = {
      name: 'bare node:http + better-sqlite3',
      argsFor: (port) => [node, [path.join(root, 'bench/baselines/tokens-validate.mjs'), String(port), bench.dbPath, JSON.stringify(expected.storage)]],
    };
    const script = wrkScript(bench.dataDir, 'validate', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    const cases: Case[] = [{ name: 'bare Koa, GET /healthz', server: baselines.koa, path: '/healthz' }];
    for (const tree of trees) cases.push({ name: `${wharf(tree).name}, GET /healthz`, server: wharf(tree), path: '/healthz' });
    cases.push({ name: `${bare.name}, POST /api/tokens/validate`, server: bare, path: '/api/tokens/validate', script });
    for (const tree of trees) cases.push({ name: `${wharf(tree).name}, POST /api/tokens/validate`, server: wharf(tree), path: '/api/tokens/validate', script });

    const { rps, lines, ratio } = await measure(cases, rounds, seconds);
    fs.rmSync(script, { force: true });
    for (const tree of trees) {
      const w = wharf(tree).name;
      lines.push(
        `- ${tree.name}: bare Koa's CPU per request / Wharf's on /healthz ${ratio(cases[0]!.name, `${w}, GET /healthz`)}; the baseline's / Wharf's on validate ${ratio(`${bare.name}, POST /api/tokens/validate`, `${w}, POST /api/tokens/validate`)} (medians of the rounds' ratios)`,
      );
    }
    lines.push(
      '',
      `(${rounds} rounds of ${seconds} s per case after a 2 s warm-up each, every server running throughout, order reversed every other round; wrk -t1 -c50; rate limiter on; per-round req/s: ${perRound(
        cases.map((c) => c.name),
        rps,
      )})`,
    );
    return lines.join('\n');
  } finally {
    await bench.cleanup();
  }
}

type Tree = { name: string; dir: string; env: Record<string, string> };
type Case = { name: string; server: ServerSpec; path: string; script?: string };

/**
 * Runs every case's server for the whole comparison and alternates the cases in short slices
 * (order reversed every other round), so that the load of other work on the machine, which moves
 * from second to second, meets every case alike. The table of CPU µs per request and req/s.
 */
async function measure(cases: readonly Case[], rounds: number, seconds: number) {
  const servers = new Map<ServerSpec, Awaited<ReturnType<typeof startServer>>>();
  const cpu = new Map(cases.map((c) => [c.name, [] as number[]]));
  const rps = new Map(cases.map((c) => [c.name, [] as number[]]));
  try {
    for (const c of cases) if (!servers.has(c.server)) servers.set(c.server, await startServer(c.server));
    for (const c of cases) wrk(servers.get(c.server)!.url + c.path, { seconds: 2, script: c.script }); // warm-up (the JIT, the statement cache)
    for (let round = 0; round < rounds; round++) {
      for (const c of round % 2 ? [...cases].reverse() : cases) {
        const server = servers.get(c.server)!;
        const before = cpuMicros(server.child.pid!);
        const r = wrk(server.url + c.path, { seconds, script: c.script });
        if (r.errors) throw new Error(`${c.name}: ${r.errors} errors under load`);
        cpu.get(c.name)!.push((cpuMicros(server.child.pid!) - before) / r.requests);
        rps.get(c.name)!.push(r.rps);
      }
    }
  } finally {
    for (const server of servers.values()) await server.stop();
  }
  const lines = ['| server, request | CPU µs per request (median) | per round | req/s (median) |', '|---|---|---|---|'];
  for (const c of cases) {
    const us = cpu.get(c.name)!;
    lines.push(`| ${c.name} | ${fmt(median(us), 1)} | ${us.map((v) => fmt(v, 0)).join('/')} | ${fmt(median(rps.get(c.name)!), 0)} |`);
  }
  lines.push('');
  /** The median of the rounds' ratios of `base`'s CPU per request to `of`'s. */
  const ratio = (base: string, of: string) => {
    const b = cpu.get(base)!;
    return fmt(median(cpu.get(of)!.map((v, i) => b[i]! / v)));
  };
  return { cpu, rps, lines, ratio };
}

/** GET /healthz of each tree against bare Koa, each Wharf on its own fresh data dir with the default plugins. */
async function healthzOnly(trees: readonly Tree[], rounds: number, seconds: number): Promise<string> {
  const dataRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-core-'));
  try {
    const cases: Case[] = [{ name: 'bare Koa, GET /healthz', server: baselines.koa, path: '/healthz' }];
    trees.forEach((tree, i) => {
      const server: ServerSpec = {
        name: `wharf (${tree.name})`,
        cwd: tree.dir,
        env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', ...tree.env },
        argsFor: (port) => [
          node,
          [...profiling(), path.join(tree.dir, 'bin/wharf.ts'), 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', path.join(dataRoot, `d${i}`)],
        ],
      };
      cases.push({ name: `${server.name}, GET /healthz`, server, path: '/healthz' });
    });
    const { rps, lines, ratio } = await measure(cases, rounds, seconds);
    for (const c of cases.slice(1))
      lines.push(`- ${c.name}: bare Koa's CPU per request / this ${ratio(cases[0]!.name, c.name)} (median of the rounds' ratios)`);
    lines.push(
      '',
      `(${rounds} rounds of ${seconds} s per case after a 2 s warm-up each, every server running throughout, order reversed every other round; wrk -t1 -c50; default plugins; per-round req/s: ${perRound(
        cases.map((c) => c.name),
        rps,
      )})`,
    );
    return lines.join('\n');
  } finally {
    fs.rmSync(dataRoot, { recursive: true, force: true });
  }
}
