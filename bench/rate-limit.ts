import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchCookie, createBenchUser, fmt, median, node, root, type ServerSpec, startServer, wrk } from './lib.ts';

export async function run(options: { rounds?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const wharf = path.join(root, 'bin/wharf.ts');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-rate-limit-'));
  createBenchUser([node, [wharf]], dataDir);

  const huge = '1000000000';
  const variant = (name: string, enabled: boolean): ServerSpec => ({
    name,
    argsFor: (port) => [node, [wharf, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
    env: enabled
      ? { WHARF_PLUGINS__RATE_LIMIT__RULES__DEFAULT__LIMIT: huge, WHARF_PLUGINS__RATE_LIMIT__RULES__DEFAULT__ANONYMOUS: huge }
      : { WHARF_PLUGINS__RATE_LIMIT__ENABLED: 'false' },
  });
  const servers = [variant('rate_limit enabled', true), variant('rate_limit disabled', false)];

  let cookie = '';
  const cases: { name: string; url: string; headers(): Record<string, string> }[] = [
    { name: 'GET /api/cli/config (no credential)', url: '/api/cli/config', headers: () => ({}) },
    { name: 'GET /api/cli/config, __session cookie', url: '/api/cli/config', headers: () => ({ cookie }) },
    { name: 'GET /api/cli/me, __session cookie', url: '/api/cli/me', headers: () => ({ cookie }) },
    { name: 'GET /healthz (never limited)', url: '/healthz', headers: () => ({}) },
  ];
  const key = (server: string, c: string) => `${server}\u0000${c}`;
  const rps = new Map<string, number[]>();
  const p99 = new Map<string, number[]>();
  const push = (map: Map<string, number[]>, k: string, v: number) => map.set(k, [...(map.get(k) ?? []), v]);

  try {
    for (let round = 0; round < rounds; round++) {
      for (const spec of servers) {
        const server = await startServer(spec);
        try {
          // The cookie is bound to the server's URL (its port), so each start signs in again.
          cookie = await benchCookie(server.url);
          for (const c of cases) {
            const probe = await fetch(server.url + c.url, { headers: c.headers() });
            await probe.arrayBuffer();
            const limited = probe.headers.get('x-ratelimit-limit') !== null;
            if (probe.status !== 200 || limited !== (spec.name.endsWith('enabled') && c.url !== '/healthz')) {
              throw new Error(`${spec.name}, ${c.name}: status ${probe.status}, X-RateLimit-Limit ${limited ? 'set' : 'absent'}`);
            }
          }
          for (const c of cases) {
            wrk(server.url + c.url, { seconds: 1, headers: c.headers() });
            const r = wrk(server.url + c.url, { seconds, headers: c.headers() });
            if (r.errors) throw new Error(`${spec.name}, ${c.name}: ${r.errors} errors (a 429 counts as one)`);
            push(rps, key(spec.name, c.name), r.rps);
            push(p99, key(spec.name, c.name), r.p99ms);
          }
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }

  const [on, off] = servers.map((s) => s.name) as [string, string];
  const lines = [
    '| request | req/s, enabled (median) | req/s, disabled (median) | ratio enabled / disabled | p99 enabled / disabled (ms) |',
    '|---|---|---|---|---|',
  ];
  for (const c of cases) {
    const a = median(rps.get(key(on, c.name))!);
    const b = median(rps.get(key(off, c.name))!);
    lines.push(
      `| ${c.name} | ${fmt(a, 0)} | ${fmt(b, 0)} | ${fmt(a / b)} | ${fmt(median(p99.get(key(on, c.name))!))} / ${fmt(median(p99.get(key(off, c.name))!))} |`,
    );
  }
  lines.push('', `(${rounds} rounds of ${seconds} s per request and server, servers interleaved; wrk -t1 -c50; node bin/wharf.ts serve, from source)`);
  return lines.join('\n');
}
