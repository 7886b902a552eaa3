/**
 * Webhook latency under load (issue 16): POST /api/sandbox/receive sent open-loop at a steady
 * rate (default 1,000 events/s) to one sandbox session whose webhook points at a receiver in this
 * process; each event's latency is its arrival at the receiver minus the moment its request was
 * sent. The baseline is a bare undici POST loop to the same receiver at the same rate. Rounds
 * interleave the two; the server is pinned to one core (see `pinned` in lib.ts).
 * Usage: node bench/run.ts webhooks-rate (BENCH_RATE, BENCH_RATE_SECONDS to change the load;
 * BENCH_RATES=200,400,600 measures each rate in turn on the same server, to find the capacity:
 * the highest rate whose answers keep up; BENCH_WEBHOOK_PER_SESSION sets concurrency_per_session,
 * and a list (8,32) runs one server per limit, measured in the same rounds).
 * BENCH_ENGINE=postgres puts the server's database on PostgreSQL (a fresh database on the test
 * server, test/pg/postgres.sh, or POSTGRES_URL), and then also reports the CPU time the PostgreSQL server's
 * processes spent per event during each server's rounds, when that server runs on this machine; BENCH_BASE=DIR runs a second Wharf from the sources in DIR (say an
 * export of main with this tree's node_modules linked in), measured in the same rounds, so that
 * before and after are compared interleaved. BENCH_SESSIONS=N spreads the events over N sandbox
 * sessions of one organization (event n to session n mod N; default 1): one session's receives
 * are recorded one after another (its events stay in order), so one session measures that chain
 * and several measure the server. Besides send -> arrival, each server's lag is
 * reported: an event's arrival at the receiver minus the moment its answer came back, which
 * shows how far deliveries fall behind the answers and depends less on the load of the machine.
 */
import fs from 'node:fs';
import os from 'node:os';
import { Agent, Pool } from 'undici';
import { benchCookie, cpuMicros, fmt, median, postgresCpuMicros } from './lib.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { localReceiver, percentile, webhooksServer } from './webhooks.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

/** Calls `fire(i)` for i < total at `rate` a second, open loop (a late call is not waited for); resolves when every call settled. */
async function openLoop(rate: number, total: number, fire: (i: number) => Promise<void>): Promise<void> {
  const settled: Promise<void>[] = [];
  const start = now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((now() - start) * rate) / 1000) + 1);
    while (sent < due) settled.push(fire(sent++));
    await sleep(1);
  }
  await Promise.all(settled);
}

export async function run(options: { rounds?: number; rate?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  const rates = options.rate ? [options.rate] : (process.env.BENCH_RATES ?? process.env.BENCH_RATE ?? '1000').split(',').map(Number);
  const seconds = options.seconds ?? Number(process.env.BENCH_RATE_SECONDS ?? 5);
  const engine = process.env.BENCH_ENGINE === 'postgres' ? 'postgres' : 'sqlite';
  const limits = (process.env.BENCH_WEBHOOK_PER_SESSION ?? '').split(',').filter(Boolean).map(Number);
  const sessionCount = Math.max(1, Number(process.env.BENCH_SESSIONS ?? 1));
  const trees = [
    { label: 'wharf', root: undefined as string | undefined },
    ...(process.env.BENCH_BASE ? [{ label: 'base', root: process.env.BENCH_BASE }] : []),
  ].flatMap((tree) =>
    limits.length > 1
      ? limits.map((perSession, i) => ({ ...tree, label: i === 0 ? tree.label : `${tree.label}-${perSession}`, perSession }))
      : [{ ...tree, perSession: limits[0] }],
  );
  const receiver = await localReceiver();
  const bare = new Agent({ keepAliveTimeout: 10_000 });
  const targets: {
    label: string;
    perSession: number | undefined;
    dir: string;
    server: Awaited<ReturnType<ReturnType<typeof webhooksServer>['start']>>;
    api: Pool;
  }[] = [];
  // Arrival times by sequence number, read from the text of each delivered message.
  const arrivals = new Map<number, number>();
  const seqOf = (body: Buffer) => Number(/bench #(\d+)#/.exec(body.toString('utf8'))?.[1] ?? -1);
  const watch = async () => {
    for (;;) {
      const t = await receiver.next();
      // The first arrival counts (a retry after a timed-out attempt delivers it again).
      const n = seqOf(receiver.lastBody());
      if (!arrivals.has(n)) arrivals.set(n, t);
    }
  };
  void watch();
  try {
    let seq = 0;
    const call = async (api: Pool, pathname: string, token: string, body: unknown, extra: Record<string, string> = {}) => {
      const res = await api.request({
        method: 'POST',
        path: pathname,
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
        body: JSON.stringify(body),
      });
      const json = (await res.body.json()) as any;
      if (res.statusCode >= 300) throw new Error(`POST ${pathname}: ${res.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const senders = new Map<string, (n: number) => Promise<unknown>>();
    /** The port of the PostgreSQL server the trees use (one server, a database each). */
    let postgresPort: number | undefined;
    for (const tree of trees) {
      const env: Record<string, string> = {};
      if (engine === 'postgres') {
        env.WHARF_DATABASE__URL = await freshDatabase();
        postgresPort = Number(new URL(env.WHARF_DATABASE__URL).port || 5432);
      }
      const wharfServer = webhooksServer(`webhooks-rate-${tree.label}`, { root: tree.root, env, perSession: tree.perSession });
      const server = await wharfServer.start();
      const api = new Pool(server.url, { connections: 32 });
      const target = { label: tree.label, perSession: tree.perSession, dir: wharfServer.dir, server, api };
      targets.push(target);
      const cookie = await benchCookie(server.url);
      const pat = (await call(api, '/api/personal-access-tokens', '', { name: 'bench' }, { cookie, origin: server.url })).data.token as string;
      const keys: string[] = [];
      for (let i = 0; i < sessionCount; i++) {
        const session = (
          await call(api, '/api/sandbox-sessions', pat, {
            name: `rate ${i}`,
            webhook_url: receiver.url,
            webhook_enabled: true,
            webhook_events: ['messages.received'],
          })
        ).data as { api_key: string };
        keys.push(session.api_key);
      }
      senders.set(tree.label, (n: number) =>
        call(target.api, '/api/sandbox/receive', keys[n % sessionCount]!, {
          from: `+1415${String(1_000_000 + (n % 1000)).padStart(7, '0')}`,
          text: `bench #${n}#`,
        }),
      );
    }
    await senders.get('wharf')!(seq++);
    for (let i = 0; i < 100 && arrivals.size === 0; i++) await sleep(20);
    const sample = receiver.lastBody().toString('utf8');

    // Answer times by sequence number (Wharf's rounds), for the lag of deliveries behind answers.
    const answeredAt = new Map<number, number>();
    /** One round: `total` sends at `rate`; latencies (ms) of the sends, and how many arrived. */
    const measure = async (rate: number, total: number, send: (n: number) => Promise<void>) => {
      arrivals.clear();
      answeredAt.clear();
      const sentAt = new Map<number, number>();
      const first = seq;
      await openLoop(rate, total, async () => {
        const n = seq++;
        sentAt.set(n, now());
        await send(n);
      });
      for (let i = 0; i < 500 && arrivals.size < total; i++) await sleep(20);
      const ms: number[] = [];
      for (let n = first; n < first + total; n++) {
        const at = arrivals.get(n);
        if (at !== undefined) ms.push(at - sentAt.get(n)!);
      }
      return ms;
    };
    const answered: number[] = [];
    /** Each arrived event's arrival minus its answer, ms, of the last round. */
    const lagOf = () => {
      const lag: number[] = [];
      for (const [n, at] of answeredAt) {
        const arrived = arrivals.get(n);
        if (arrived !== undefined) lag.push(arrived - at);
      }
      return lag;
    };
    // Each round of a server on connections of its own: a keep-alive connection left idle while
    // the other server's round ran may be closed by the server just as a request goes out on it
    // (ECONNRESET, and a POST is not retried).
    const fresh = async (label: string) => {
      const target = targets.find((t) => t.label === label);
      if (!target) return;
      await target.api.close();
      target.api = new Pool(target.server.url, { connections: 32 });
    };
    // Requests that failed (a reset connection, say), by server: counted and reported, not fatal.
    const failures = new Map<string, { count: number; first: string }>();
    const viaWharf = (label: string) => async (n: number) => {
      const t0 = now();
      try {
        await senders.get(label)!(n);
      } catch (err) {
        const failed = failures.get(label) ?? { count: 0, first: String(err) };
        failed.count++;
        failures.set(label, failed);
        return;
      }
      const t1 = now();
      answered.push(t1 - t0);
      answeredAt.set(n, t1);
    };
    const viaBare = async (n: number) => {
      const res = await bare.request({
        origin: receiver.origin,
        path: '/hook',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: sample.replace(/bench #\d+#/, `bench #${n}#`),
      });
      await res.body.text();
    };
    for (const { label } of targets) {
      await fresh(label);
      await measure(rates[0]!, rates[0]! * seconds, viaWharf(label)); // warm-up
    }
    type Stats = { p50: number; p95: number; p99: number; lost: number };
    const stats = (ms: number[], lost: number): Stats => ({ p50: percentile(ms, 50), p95: percentile(ms, 95), p99: percentile(ms, 99), lost });
    const sections: string[] = [];
    /** "Wharf: <what>: 812 µs (median; rounds ...)." for a tree's per-round figures; undefined without any. */
    const perEvent = (label: string, what: string, rounds: number[]) =>
      rounds.length === 0
        ? undefined
        : `${label === 'wharf' ? 'Wharf' : label}: ${what}: ${fmt(median(rounds), 0)} µs (median; rounds ${rounds.map((v) => fmt(v, 0)).join(', ')}).`;
    for (const rate of rates) {
      const total = rate * seconds;
      const cpuPerEvent = new Map<string, number[]>(targets.map((t) => [t.label, []]));
      const postgresPerEvent = new Map<string, number[]>(targets.map((t) => [t.label, []]));
      const answers = new Map<string, Stats[]>(targets.map((t) => [t.label, []]));
      const lags = new Map<string, Stats[]>(targets.map((t) => [t.label, []]));
      const load: number[] = [];
      const results = new Map<string, Stats[]>([['bare', []], ...targets.map((t) => [t.label, []] as [string, Stats[]])]);
      for (let round = 0; round < rounds; round++) {
        for (const [name, send] of [['bare', viaBare], ...targets.map((t) => [t.label, viaWharf(t.label)] as const)] as const) {
          answered.length = 0;
          const target = targets.find((t) => t.label === name);
          await fresh(name);
          const cpu = target ? cpuMicros(target.server.child.pid!) : 0;
          const postgresCpu = target && postgresPort ? postgresCpuMicros(postgresPort) : undefined;
          const ms = await measure(rate, total, send);
          load.push(os.loadavg()[0]!);
          results.get(name)!.push(stats(ms, total - ms.length));
          if (target) {
            cpuPerEvent.get(name)!.push((cpuMicros(target.server.child.pid!) - cpu) / total);
            const postgresAfter = postgresCpu === undefined ? undefined : postgresCpuMicros(postgresPort!);
            if (postgresAfter !== undefined) postgresPerEvent.get(name)!.push((postgresAfter - postgresCpu!) / total);
            answers.get(name)!.push(stats(answered, 0));
            lags.get(name)!.push(stats(lagOf(), 0));
          }
        }
      }
      const row = (label: string, r: Stats[]) =>
        `| ${label} | ${fmt(median(r.map((x) => x.p50)))} | ${fmt(median(r.map((x) => x.p95)))} | ${fmt(median(r.map((x) => x.p99)))} | ${r.map((x) => `${fmt(x.p50)}/${fmt(x.p95)}`).join(', ')} | ${r.reduce((a, x) => a + x.lost, 0)} |`;
      const name = (label: string) => {
        const limit = targets.find((t) => t.label === label)?.perSession;
        const tree = label === 'wharf' || label.startsWith('wharf-') ? '' : `${label.replace(/-\d+$/, '')}: `;
        return `${tree}POST /api/sandbox/receive${limits.length > 1 ? ` (per session ${limit})` : ''}`;
      };
      sections.push(
        [
          `Latency at ${rate} events/s for ${seconds} s per round (${rounds} rounds, interleaved), send -> arrival at a receiver in the benchmark's process, ms:`,
          '',
          '| path | p50 (median) | p95 (median) | p99 (median) | rounds p50/p95 | not arrived |',
          '|---|---|---|---|---|---|',
          row('bare undici POST -> receiver', results.get('bare')!),
          ...targets.flatMap(({ label }) => [
            row(`${name(label)} -> its answer`, answers.get(label)!),
            row(`${name(label)} -> webhook at the receiver`, results.get(label)!),
            row(`${name(label)}: its answer -> webhook (lag)`, lags.get(label)!),
          ]),
          '',
          ...[
            ...targets.map(({ label }) =>
              perEvent(label, 'CPU time per event (receive, record, deliver, write the outcome; user + system)', cpuPerEvent.get(label)!),
            ),
            ...targets.map(({ label }) =>
              perEvent(label, "PostgreSQL's CPU time per event (its processes on this machine, during the round)", postgresPerEvent.get(label)!),
            ),
          ].filter((line) => line !== undefined),
          '',
          ...[...failures].map(
            ([label, f]) =>
              `${label}: ${f.count} requests failed in all (first: ${f.first}); its server ${targets.find((t) => t.label === label)?.server.child.exitCode === null ? 'still running' : 'exited'}.`,
          ),
          `Load average (1 min) at the end of each measurement: ${fmt(Math.min(...load))}–${fmt(Math.max(...load))}.`,
          '',
          `**p50 ratio Wharf / bare: ${fmt(median(results.get('wharf')!.map((x) => x.p50)) / median(results.get('bare')!.map((x) => x.p50)))}** (aim: Wharf p50 at most 20 ms)`,
          '',
        ].join('\n'),
      );
    }
    return [
      ...sections,
      `(open loop, requests over 32 keep-alive connections; the server from source${process.env.BENCH_BASE ? ` (base: ${process.env.BENCH_BASE})` : ''}, database on ${engine}, pinned with taskset -c ${process.env.BENCH_CPU ?? '1'}; rate_limit, storage and tokens off; ${sessionCount === 1 ? 'one session' : `${sessionCount} sessions of one organization, event n to session n mod ${sessionCount}, each`} subscribed to messages.received; concurrency_per_session ${limits.length ? limits.join(', ') : 'default'})`,
    ].join('\n\n');
  } finally {
    for (const target of targets) {
      await target.api.close();
      await target.server.stop();
      fs.rmSync(target.dir, { recursive: true, force: true });
    }
    await bare.close();
    await receiver.close();
  }
}
