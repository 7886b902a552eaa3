import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, Pool } from 'undici';
import { benchCookie, createBenchUser, fmt, median, node, profiling, root, type Server, startServer } from './lib.ts';

const CONCURRENCY = 64;
const SESSIONS = 8;

export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

/** Runs `task(i)` for i < n with at most `width` at once. */
async function pool(n: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

/** An in-process receiver: records arrival times; `hang` never answers. */
export async function localReceiver(hang = false) {
  const waiters: ((t: number) => void)[] = [];
  let open = 0;
  let count = 0;
  let body = Buffer.alloc(0);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    // A sender that gives up (an attempt timed out) resets the connection: not an error here.
    req.on('error', () => {});
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = now();
      count++;
      body = Buffer.concat(chunks);
      waiters.shift()?.(t);
      if (hang) {
        open++;
        res.on('close', () => open--);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    origin: `http://127.0.0.1:${port}`,
    /** Resolves with the arrival time of the next request. */
    next: () => new Promise<number>((resolve) => waiters.push(resolve)),
    lastBody: () => body,
    open: () => open,
    count: () => count,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A data dir with the benchmark owner and a config for webhooks alone (storage, tokens and rate
 * limiting off, receivers on private addresses allowed); `start` runs `wharf serve` on it from source.
 */
export function webhooksServer(
  tag: string,
  options: { root?: string; env?: Record<string, string>; perSession?: number } = {},
): { dir: string; start(): Promise<Server> } {
  const wharf = path.join(options.root ?? root, 'bin/wharf.ts');
  const env = options.env ?? {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-bench-${tag}-`));
  const dataDir = path.join(dir, 'data');
  const configFile = path.join(dir, 'wharf.toml');
  const config = ['[plugins.storage]', 'enabled = false', '[plugins.tokens]', 'enabled = false', '[plugins.rate_limit]', 'enabled = false'];
  // concurrency_per_session (the product default when not given), to see what that limit does.
  const perSession = options.perSession ? [`concurrency_per_session = ${options.perSession}`] : [];
  fs.writeFileSync(configFile, [...config, '[plugins.webhooks]', 'allow_private_networks = true', ...perSession, ''].join('\n'));
  createBenchUser([node, [wharf]], dataDir, ['--config', configFile], env);
  return {
    dir,
    start: () =>
      startServer({
        name: 'wharf serve',
        argsFor: (port) => [node, [...profiling(), wharf, 'serve', '--config', configFile, '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
        env,
      }),
  };
}

export async function run(options: { rounds?: number; perSession?: number; samples?: number; stuck?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const perSession = options.perSession ?? 500;
  const samples = options.samples ?? 300;
  const stuckEvents = options.stuck ?? 10_000;
  const wharfServer = webhooksServer('webhooks', { perSession: Number(process.env.BENCH_WEBHOOK_PER_SESSION) || undefined });

  const receiver = await startServer(
    { name: 'receiver', argsFor: (port) => [node, [path.join(root, 'bench/baselines/webhook-receiver.mjs'), String(port)]] },
    '/_control/stats',
  );
  const server = await wharfServer.start();
  const api = new Pool(server.url, { connections: 16 });
  const lat = await localReceiver();
  const stuck = await localReceiver(true);
  const bare = new Agent({ keepAliveTimeout: 10_000 });
  const control = async (action: string) =>
    (await (await fetch(`${receiver.url}/_control/${action}`, { method: action === 'stats' ? 'GET' : 'POST' })).json()) as {
      count: number;
      first: number | null;
      last: number | null;
      held: number;
    };

  try {
    const cookie = await benchCookie(server.url);
    const call = async (method: 'GET' | 'POST' | 'PUT', pathname: string, token: string, body?: unknown, extra: Record<string, string> = {}) => {
      const res = await api.request({
        method,
        path: pathname,
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = (await res.body.json()) as any;
      if (res.statusCode >= 300) throw new Error(`${method} ${pathname}: ${res.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const pat = (await call('POST', '/api/personal-access-tokens', '', { name: 'bench' }, { cookie, origin: server.url })).data.token as string;
    const session = async (name: string, url: string) =>
      (await call('POST', '/api/sandbox-sessions', pat, { name, webhook_url: url, webhook_enabled: true, webhook_events: ['messages.received'] })).data as {
        id: number;
        api_key: string;
      };
    let sender = 0;
    const receive = (s: { api_key: string }) =>
      call('POST', '/api/sandbox/receive', s.api_key, {
        from: `+1415${String(1_000_000 + (sender++ % 8_000_000)).padStart(7, '0')}`,
        text: 'benchmark message',
      });
    const pending = async (sessionId?: number) =>
      (await call('GET', `/api/dispatches?status=pending&per_page=1${sessionId ? `&session_id=${sessionId}` : ''}`, pat)).data.total as number;

    const throughputSessions: { id: number; api_key: string }[] = [];
    for (let i = 0; i < SESSIONS; i++) throughputSessions.push(await session(`throughput ${i}`, `${receiver.url}/hook`));
    const latencySession = await session('latency', lat.url);

    // A real delivery body, for the bare loop to send.
    const first = lat.next();
    await receive(latencySession);
    await first;
    const sampleBody = Buffer.from(lat.lastBody());

    /** Queues perSession deliveries per session while the receiver holds its answers, then lets it answer: deliveries/s of the drain. */
    const drain = async () => {
      await control('reset');
      await control('pause');
      const fillStart = now();
      await pool(SESSIONS * perSession, 16, (i) => receive(throughputSessions[i % SESSIONS]!));
      const fillMs = now() - fillStart;
      const total = SESSIONS * perSession;
      // Wait until the dispatcher holds all its slots at the receiver.
      for (let i = 0; i < 500 && (await control('stats')).count < Math.min(total, CONCURRENCY); i++) await sleep(10);
      await control('reset');
      const held = (await control('resume')).held;
      const expected = total - held;
      for (let i = 0; i < 12_000; i++) {
        const s = await control('stats');
        if (s.count >= expected) return { rate: (s.count - 1) / ((s.last! - s.first!) / 1000), fillMs, total };
        await sleep(5);
      }
      throw new Error(`drain: the receiver got ${(await control('stats')).count} of ${expected}`);
    };
    const bareLoop = async () => {
      await control('reset');
      const total = SESSIONS * perSession;
      await pool(total, CONCURRENCY, async (i) => {
        const res = await bare.request({
          origin: receiver.url,
          path: '/hook',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-webhook-signature': 'secret', 'webhook-id': `msg_${i}` },
          body: sampleBody,
        });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`bare POST: ${res.statusCode}`);
      });
      const s = await control('stats');
      return (s.count - 1) / ((s.last! - s.first!) / 1000);
    };
    const latency = async (n: number) => {
      const wharfMs: number[] = [];
      const apiMs: number[] = [];
      const bareMs: number[] = [];
      for (let i = 0; i < n; i++) {
        const arrival = lat.next();
        const t0 = now();
        await receive(latencySession);
        apiMs.push(now() - t0);
        wharfMs.push((await arrival) - t0);
        const bareArrival = lat.next();
        const t1 = now();
        const res = await bare.request({
          origin: lat.origin,
          path: '/hook',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: sampleBody,
        });
        await res.body.text();
        bareMs.push((await bareArrival) - t1);
      }
      return { wharfMs, apiMs, bareMs };
    };

    await latency(20); // warm-up
    const wharfRates: number[] = [];
    const bareRates: number[] = [];
    const fills: number[] = [];
    for (let round = 0; round < rounds; round++) {
      bareRates.push(await bareLoop());
      const d = await drain();
      wharfRates.push(d.rate);
      fills.push((d.total / d.fillMs) * 1000);
    }
    // The last outcomes are written a few milliseconds after the receiver answered.
    for (let i = 0; (await pending()) !== 0; i++) {
      if (i === 100) throw new Error('deliveries left pending after the drains');
      await sleep(50);
    }
    const calm = await latency(samples);

    // One receiver that never answers, 10,000 events queued for it.
    const stuckSession = await session('stuck', stuck.url);
    const stuckStart = now();
    await pool(stuckEvents, 16, () => receive(stuckSession));
    const stuckFillS = (now() - stuckStart) / 1000;
    const stuckPendingBefore = await pending(stuckSession.id);
    const busy = await latency(samples);
    const busyRates: number[] = [];
    for (let round = 0; round < rounds; round++) busyRates.push((await drain()).rate);
    const stuckPendingAfter = await pending(stuckSession.id);
    const stuckOpen = stuck.open();
    const stuckRequests = stuck.count();
    const rss = server.rssMiB();
    const elapsedS = (now() - stuckStart) / 1000;

    const ratio = median(wharfRates) / median(bareRates);
    const row = (name: string, v: number[]) => `| ${name} | ${fmt(median(v))} | ${fmt(percentile(v, 50))} | ${fmt(percentile(v, 99))} |`;
    return [
      `Throughput: a backlog of ${SESSIONS} × ${perSession} deliveries drained to a receiver in its own process (${rounds} rounds, interleaved with the bare loop).`,
      '',
      '| sender | deliveries/s (median) | rounds |',
      '|---|---|---|',
      `| bare undici POST loop, ${CONCURRENCY} concurrent, keep-alive | ${fmt(median(bareRates), 0)} | ${bareRates.map((r) => fmt(r, 0)).join(', ')} |`,
      `| wharf dispatcher (${SESSIONS} sessions, concurrency limits ${process.env.BENCH_WEBHOOK_PER_SESSION ? `${process.env.BENCH_WEBHOOK_PER_SESSION} per session` : 'at their defaults'}) | ${fmt(median(wharfRates), 0)} | ${wharfRates.map((r) => fmt(r, 0)).join(', ')} |`,
      '',
      `**Ratio: ${fmt(ratio)}** (aim at least 0.5). Queuing the backlog through POST /api/sandbox/receive ran at ${fmt(median(fills), 0)} events/s.`,
      '',
      `Latency, one message at a time (${samples} samples, ms):`,
      '',
      '| path | median | p50 | p99 |',
      '|---|---|---|---|',
      row('bare undici POST -> receiver', calm.bareMs),
      row('POST /api/sandbox/receive -> its answer', calm.apiMs),
      row('POST /api/sandbox/receive -> webhook at the receiver', calm.wharfMs),
      '',
      `One stuck receiver: ${stuckEvents} events queued in ${fmt(stuckFillS, 1)} s for a session whose receiver never answers (timeout 10 s, default).`,
      '',
      '| with the stuck backlog | value |',
      '|---|---|',
      `| other session, POST -> webhook p50 / p99 (ms) | ${fmt(percentile(busy.wharfMs, 50))} / ${fmt(percentile(busy.wharfMs, 99))} (without: ${fmt(percentile(calm.wharfMs, 50))} / ${fmt(percentile(calm.wharfMs, 99))}) |`,
      `| other sessions' drain, deliveries/s (median) | ${fmt(median(busyRates), 0)} (without: ${fmt(median(wharfRates), 0)}; ratio ${fmt(median(busyRates) / median(wharfRates))}) |`,
      `| stuck session: requests open at its receiver | ${stuckOpen} (per-session limit 8) |`,
      `| stuck session: attempts made in ${fmt(elapsedS, 0)} s | ${stuckRequests} |`,
      `| stuck session: pending after queuing / at the end | ${stuckPendingBefore} / ${stuckPendingAfter} |`,
      `| server RSS (private part), MiB | ${fmt(rss.total, 1)} (${fmt(rss.anon, 1)}) |`,
    ].join('\n');
  } finally {
    await api.close();
    await bare.close();
    await lat.close();
    await stuck.close();
    await server.stop();
    await receiver.stop();
  }
}
