/**
 * Start to first 200 and idle memory of bare Koa and of several Wharf binaries (or one binary
 * with several NODE_OPTIONS), interleaved start by start, each on a fresh data dir; and, with
 * BENCH_ROUNDS > 0, GET /healthz CPU time per request under wrk. Usage:
 *   BENCH_VARIANTS='main=/path/to/old/wharf;this=dist/wharf;semi1=dist/wharf|--max-semi-space-size=1' \
 *   node bench/run.ts start-compare
 * (default: dist/wharf alone, built when missing). BENCH_ENGINE=postgres starts each Wharf on a
 * fresh PostgreSQL database of the test server (test/pg/postgres.sh, or POSTGRES_URL) instead
 * of a fresh SQLite file, with the built-in plugins not ported to PostgreSQL disabled, as the
 * tests run them; the data dir is fresh either way. The database is created before the clock
 * starts (CREATE DATABASE is the benchmark's cost, reported apart).
 * BENCH_START=restart measures the usual restart instead: each Wharf variant has one data dir
 * (and database), set up by a start before the timed ones plus `wharf admin create-user` (an
 * install in use), and every timed start is a restart on it, nothing to migrate.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { dropDatabase, ensurePostgres, freshDatabase, postgresPlugins } from '../test/helpers/postgres.ts';
import { baselines, cpuMicros, dropPageCache, ensureBinary, fmt, median, type ServerSpec, startServer, wrk } from './lib.ts';

/** What a Wharf start needs on PostgreSQL besides its database (test/helpers/postgres.ts databaseEnv). */
function postgresEnv(): Record<string, string> {
  const off = Object.fromEntries(postgresPlugins().not.map((name) => [`WHARF_PLUGINS__${name.toUpperCase()}__ENABLED`, 'false']));
  return { ...off, WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true', WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true' };
}

export async function run(): Promise<string> {
  const starts = Number(process.env.BENCH_STARTS ?? 15);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 0);
  const postgres = process.env.BENCH_ENGINE === 'postgres';
  const restart = process.env.BENCH_START === 'restart';
  const dataRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-start-'));
  const variants = (process.env.BENCH_VARIANTS ?? `this=${ensureBinary()}`).split(';').map((v) => {
    const at = v.indexOf('=');
    const [bin, options = ''] = v.slice(at + 1).split('|') as [string, string?];
    const name = v.slice(0, at);
    return { name, bin: path.resolve(bin), options };
  });
  for (const v of variants) dropPageCache(v.bin);
  const specs: ServerSpec[] = [
    baselines.koa,
    ...variants.map(
      (v, i): ServerSpec => ({
        name: v.name,
        argsFor: (port) => [v.bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', path.join(dataRoot, restart ? `v${i}` : `d${port}-${i}`)]],
        env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', NODE_OPTIONS: v.options, ...(postgres ? postgresEnv() : {}) },
      }),
    ),
  ];
  const ms = new Map(specs.map((s) => [s.name, [] as number[]]));
  // CPU time (user + system) from spawn to the first 200: unlike the wall time, it does not count
  // the time the process waited for its core while other work loaded the machine.
  const startCpu = new Map(specs.map((s) => [s.name, [] as number[]]));
  const memory = new Map(specs.map((s) => [s.name, [] as string[]]));
  const cpu = new Map(specs.map((s) => [s.name, [] as number[]]));
  /** CREATE DATABASE of each fresh database, ms: made before the clock starts, so not in the figures. */
  const createDb: number[] = [];
  const newDatabase = async () => {
    const t = performance.now();
    const url = await freshDatabase();
    createDb.push(performance.now() - t);
    return url;
  };
  /** PostgreSQL's CPU time to each Wharf's first 200, ms: its backends' (the connections to its database), which Wharf waits for. */
  const serverCpu = new Map(specs.map((s) => [s.name, [] as number[]]));
  const postgresCpu = async (spec: ServerSpec, databaseUrl: string) => {
    const client = new pg.Client({ connectionString: await ensurePostgres() });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [new URL(databaseUrl).pathname.slice(1)]);
      serverCpu.get(spec.name)!.push(rows.reduce((sum, r) => sum + cpuMicros(r.pid) / 1000, 0));
    } finally {
      await client.end();
    }
  };
  /** restart: each variant's database, kept from its set-up start to the end. */
  const kept = new Map<ServerSpec, string>();
  /** Starts a server; on PostgreSQL a Wharf gets a fresh database (made before the clock starts), dropped by `stop`, or its kept one (restart). */
  const start = async (spec: ServerSpec) => {
    if (!postgres || spec === baselines.koa) return startServer(spec);
    const url = restart ? kept.get(spec)! : await newDatabase();
    const server = await startServer({ ...spec, env: { ...spec.env, WHARF_DATABASE__URL: url } });
    await postgresCpu(spec, url);
    return restart ? server : { ...server, stop: () => server.stop().then(() => dropDatabase(url)) };
  };
  if (restart) {
    for (const spec of specs.slice(1)) {
      if (postgres) kept.set(spec, await newDatabase());
      const server = await start(spec);
      await server.stop();
      // An install in use has its first user (else every start issues a new setup link).
      const [bin, args] = spec.argsFor(0);
      const dataDir = args[args.indexOf('--data-dir') + 1]!;
      execFileSync(bin, ['admin', 'create-user', '--email', 'bench@example.com', '--password', 'bench-password-1', '--data-dir', dataDir], {
        env: { ...process.env, ...spec.env, ...(postgres ? { WHARF_DATABASE__URL: kept.get(spec)! } : {}) },
        stdio: 'ignore',
      });
    }
  }
  for (let i = 0; i < starts; i++) {
    for (const spec of specs) {
      const server = await start(spec);
      ms.get(spec.name)!.push(server.startMs);
      startCpu.get(spec.name)!.push(cpuMicros(server.child.pid!) / 1000);
      if (i < 2) {
        for (let k = 0; k < 20; k++) await (await fetch(`${server.url}/healthz`)).arrayBuffer();
        await new Promise((r) => setTimeout(r, 1000));
        const m = server.rssMiB();
        memory.get(spec.name)!.push(`${fmt(m.total, 1)} (${fmt(m.anon, 1)})`);
      }
      await server.stop();
    }
  }
  for (let round = 0; round < rounds; round++) {
    for (const spec of specs) {
      const server = await start(spec);
      wrk(`${server.url}/healthz`, { seconds: 1 });
      const before = cpuMicros(server.child.pid!);
      const r = wrk(`${server.url}/healthz`, { seconds: 5 });
      cpu.get(spec.name)!.push((cpuMicros(server.child.pid!) - before) / (r.rps * 5));
      await server.stop();
    }
  }
  fs.rmSync(dataRoot, { recursive: true, force: true });
  for (const url of kept.values()) await dropDatabase(url);
  const koa = median(ms.get(baselines.koa.name)!);
  const koaCpu = median(startCpu.get(baselines.koa.name)!);
  const koaMs = ms.get(baselines.koa.name)!;
  const lines = [
    `| server | start to first 200 (ms, median) | ratio to bare Koa | ratio, median of each start's | CPU ms to the first 200 (median) | CPU ratio to bare Koa |${postgres ? " PostgreSQL's CPU ms (its backends, median) |" : ''} idle RSS, MiB (anonymous), first two starts | GET /healthz CPU µs per request (rounds) |`,
    `|---|---|---|---|---|---|${postgres ? '---|' : ''}---|---|`,
  ];
  for (const s of specs) {
    const t = median(ms.get(s.name)!);
    const c = median(startCpu.get(s.name)!);
    // Each start against bare Koa's start just before it: less moved by the load changing during the run.
    const paired = median(ms.get(s.name)!.map((m, i) => m / koaMs[i]!));
    const server = serverCpu.get(s.name)!;
    lines.push(
      `| ${s.name} | ${fmt(t, 0)} | ${fmt(t / koa)} | ${fmt(paired)} | ${fmt(c, 0)} | ${fmt(c / koaCpu)} |${postgres ? ` ${server.length ? fmt(median(server), 0) : '-'} |` : ''} ${memory.get(s.name)!.join(', ')} | ${
        cpu
          .get(s.name)!
          .map((c) => fmt(c, 0))
          .join('/') || '-'
      } |`,
    );
  }
  lines.push(
    '',
    `(${postgres ? `Wharf on PostgreSQL, ${restart ? 'restarts on a migrated database with a user' : `a fresh database each start (CREATE DATABASE before the clock: median ${fmt(median(createDb), 0)} ms)`}; ` : restart ? 'restarts on a data dir with a user; ' : ''}${starts} starts per server, interleaved; ${rounds} load rounds of 5 s; servers pinned like the other benchmarks; CPU in clock ticks of 10 ms)`,
  );
  return lines.join('\n');
}
