/**
 * The Redis store's cost: the same rate-limited routes served with counters in memory, in Redis
 * (the test redis-server of test/redis/redis-server.sh, on loopback), and with rate limiting off,
 * servers interleaved round by round; the ratio Redis / memory is the figure. Since req/s on a
 * shared two-core machine moves with the other load, it also reports the CPU time each request
 * cost (Wharf's process, and redis-server's), which moves much less, and the stores alone,
 * in process.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { redisStore } from '../plugins/rate_limit/redis-store.ts';
import { memoryStore, type RateLimitStore } from '../plugins/rate_limit/store.ts';
import { benchCookie, cpuMicros, createBenchUser, fmt, median, node, root, type ServerSpec, startServer, wrk } from './lib.ts';

/** The test redis-server's pid (its script writes it). */
function redisPid(): number {
  return Number(fs.readFileSync(path.join(process.env.REDIS_DIR ?? '/tmp/wharf-test-redis', 'redis.pid'), 'utf8'));
}

/** Consumes per second of one counter, `concurrency` callers at once, for `ms`. */
async function consumeRate(store: RateLimitStore, concurrency: number, ms: number): Promise<number> {
  const counter = store.counter({ name: `bench-${Date.now()}-${concurrency}`, limit: 1e9, windowSeconds: 60 });
  let done = 0;
  const end = performance.now() + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await counter.consume('caller');
        done++;
      }
    }),
  );
  return done / (ms / 1000);
}

/** The test Redis's URL (password included), started or found by the project's script. */
function redisUrl(): string {
  const out = execFileSync('bash', [path.join(root, 'test/redis/redis-server.sh'), 'up'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const m = /^url=(\S+)$/m.exec(out);
  if (!m?.[1]) throw new Error(`test/redis/redis-server.sh up printed no url=: ${out}`);
  return m[1];
}

export async function run(options: { rounds?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const wharf = path.join(root, 'bin/wharf.ts');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-rate-limit-redis-'));
  createBenchUser([node, [wharf]], dataDir);
  const url = redisUrl();

  const huge = '1000000000';
  const limits = { WHARF_PLUGINS__RATE_LIMIT__RULES__DEFAULT__LIMIT: huge, WHARF_PLUGINS__RATE_LIMIT__RULES__DEFAULT__ANONYMOUS: huge };
  const variant = (name: string, env: NodeJS.ProcessEnv): ServerSpec => ({
    name,
    argsFor: (port) => [node, [wharf, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
    // The embedded S3 endpoint on a free port: 3900 may be another server's on a shared machine.
    env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', ...env },
  });
  const servers = [
    variant('memory', { ...limits, WHARF_PLUGINS__RATE_LIMIT__STORE: 'memory' }),
    variant('redis', {
      ...limits,
      WHARF_PLUGINS__RATE_LIMIT__STORE: 'redis',
      WHARF_PLUGINS__RATE_LIMIT__REDIS__URL: url,
      // A fresh prefix per run: no count of an earlier run is read back.
      WHARF_PLUGINS__RATE_LIMIT__REDIS__KEY_PREFIX: `wharf-bench:${Date.now()}:`,
    }),
    variant('off', { WHARF_PLUGINS__RATE_LIMIT__ENABLED: 'false' }),
  ];

  let cookie = '';
  const cases: { name: string; url: string; headers(): Record<string, string> }[] = [
    { name: 'GET /api/cli/config (no credential: one counter per address)', url: '/api/cli/config', headers: () => ({}) },
    { name: 'GET /api/cli/me, __session cookie (one counter per user)', url: '/api/cli/me', headers: () => ({ cookie }) },
  ];
  const key = (server: string, c: string) => `${server}\u0000${c}`;
  const rps = new Map<string, number[]>();
  const p99 = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const redisCpu = new Map<string, number[]>();
  const push = (map: Map<string, number[]>, k: string, v: number) => map.set(k, [...(map.get(k) ?? []), v]);

  try {
    for (let round = 0; round < rounds; round++) {
      for (const spec of servers) {
        const server = await startServer(spec);
        try {
          cookie = await benchCookie(server.url);
          for (const c of cases) {
            const probe = await fetch(server.url + c.url, { headers: c.headers() });
            await probe.arrayBuffer();
            const limited = probe.headers.get('x-ratelimit-limit') !== null;
            if (probe.status !== 200 || limited !== (spec.name !== 'off')) {
              throw new Error(`${spec.name}, ${c.name}: status ${probe.status}, X-RateLimit-Limit ${limited ? 'set' : 'absent'}`);
            }
          }
          for (const c of cases) {
            wrk(server.url + c.url, { seconds: 1, headers: c.headers() });
            const [wharfBefore, redisBefore] = [cpuMicros(server.child.pid!), cpuMicros(redisPid())];
            const r = wrk(server.url + c.url, { seconds, headers: c.headers() });
            const requests = r.rps * seconds;
            if (r.errors) throw new Error(`${spec.name}, ${c.name}: ${r.errors} errors (a 429 counts as one)`);
            push(rps, key(spec.name, c.name), r.rps);
            push(p99, key(spec.name, c.name), r.p99ms);
            push(cpu, key(spec.name, c.name), (cpuMicros(server.child.pid!) - wharfBefore) / requests);
            push(redisCpu, key(spec.name, c.name), (cpuMicros(redisPid()) - redisBefore) / requests);
          }
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }

  // The stores alone, in this process: memory, and Redis over one connection.
  const alone = new Map<string, number[]>();
  const client = new Redis(url, { enableOfflineQueue: false, connectionName: 'wharf-bench' });
  await new Promise((resolve) => client.once('ready', resolve));
  const stores = {
    memory: memoryStore(),
    redis: redisStore({
      client,
      keyPrefix: `wharf-bench:${Date.now()}:`,
      timeoutMs: 250,
      events: { down: (reason) => console.error(`redis down: ${reason}`), up() {}, fallback() {} },
    }),
  };
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, store] of Object.entries(stores)) {
        for (const concurrency of [1, 50]) push(alone, key(name, String(concurrency)), await consumeRate(store, concurrency, 2000));
      }
    }
  } finally {
    await stores.redis.close!();
  }

  const m = (map: Map<string, number[]>, server: string, c: string) => median(map.get(key(server, c))!);
  const lines = [
    '| request | req/s, memory (median) | req/s, redis (median) | req/s, limits off | **ratio redis / memory** | p99 memory / redis / off (ms) |',
    '|---|---|---|---|---|---|',
  ];
  for (const c of cases) {
    const [mem, red, off] = ['memory', 'redis', 'off'].map((s) => m(rps, s, c.name)) as [number, number, number];
    const lat = ['memory', 'redis', 'off'].map((s) => fmt(m(p99, s, c.name))).join(' / ');
    lines.push(`| ${c.name} | ${fmt(mem, 0)} | ${fmt(red, 0)} | ${fmt(off, 0)} | **${fmt(red / mem)}** | ${lat} |`);
  }
  lines.push(
    '',
    "CPU time per request, µs (median; Wharf's process, and redis-server's for the Redis store):",
    '',
    '| request | memory | redis: Wharf | redis: redis-server | limits off | Wharf redis / memory |',
    '|---|---|---|---|---|---|',
  );
  for (const c of cases) {
    const [mem, red, off] = ['memory', 'redis', 'off'].map((s) => m(cpu, s, c.name)) as [number, number, number];
    lines.push(`| ${c.name} | ${fmt(mem, 0)} | ${fmt(red, 0)} | ${fmt(m(redisCpu, 'redis', c.name), 0)} | ${fmt(off, 0)} | ${fmt(red / mem)} |`);
  }
  lines.push(
    '',
    'The stores alone, in process (one counter, 2 s per round):',
    '',
    '| store | consumes/s, 1 caller at a time | consumes/s, 50 at once |',
    '|---|---|---|',
    ...Object.keys(stores).map((s) => `| ${s} | ${fmt(m(alone, s, '1'), 0)} | ${fmt(m(alone, s, '50'), 0)} |`),
    '',
    `(${rounds} rounds of ${seconds} s per request and server, servers interleaved; wrk -t1 -c50; node bin/wharf.ts serve, from source; Redis ${redisVersion()} from test/redis/redis-server.sh on the same machine; load average at the end ${os.loadavg()[0]!.toFixed(1)})`,
  );
  return lines.join('\n');
}

function redisVersion(): string {
  try {
    return /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? '?';
  } catch {
    return '?';
  }
}
