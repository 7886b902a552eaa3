/**
 * Two instances against one (issue 15): `wharf serve` x2 on one PostgreSQL database with the
 * rate-limit counters in Redis (test/helpers/cluster.ts, as the README's "several instances"
 * deployment runs them), for two requests: `POST /api/tokens/validate` (reads only) and the
 * send-message loop (bench/messaging.ts's setup) from two sandbox sessions. "One instance": two
 * wrk processes (for send-message one per sender session) both at instance 1; "two instances":
 * the same two wrk processes, one at each instance. Throughput is the sum of the two wrk runs'
 * 2xx answers per second; rounds interleaved.
 *
 * CPU, each as a share of one core over the measured seconds: each instance, the PostgreSQL
 * backends serving this database (their /proc CPU time), and the whole machine (/proc/stat; 200 %
 * is both cores), so the reader can tell what limits the figure on this 2-core machine. The
 * instances run on both cores (unpinned); wrk and this process on core 0 (bench/run.ts).
 * Usage: node bench/run.ts instances
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startCluster } from '../test/helpers/cluster.ts';
import { BENCH_USER, benchCookie, cpuMicros, fmt, median, medianRatio, perRound, wrkAsync } from './lib.ts';
import { type SendSetup, sendSetup } from './messaging.ts';
import { createApp, createToken, wrkScript } from './storage-setup.ts';
import { ensureS3, s3Client } from '../test/helpers/s3.ts';
import { removeBuckets } from '../test/helpers/storage.ts';

/** Busy and total jiffies of the whole machine so far (/proc/stat's first line). */
function machineTicks(): { busy: number; total: number } {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = fields[3]! + fields[4]!; // idle + iowait
  return { busy: total - idle, total };
}

/** CPU µs of each PostgreSQL backend connected to `database` now (gone ones are not counted). */
async function backendsCpu(client: pg.Client, database: string): Promise<Map<number, number>> {
  const { rows } = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      cpu.set(pid, cpuMicros(pid));
    } catch {
      // gone meanwhile
    }
  }
  return cpu;
}

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 25; // per wrk process, two at a time
  const huge = '1000000000';
  const cluster = await startCluster({
    instances: 2,
    // The limiter counts in Redis on every request, but does not refuse the load.
    env: Object.fromEntries(
      ['DEFAULT', 'SEND_MESSAGE', 'SESSIONS', 'FILES'].flatMap((rule) =>
        ['LIMIT', 'ANONYMOUS'].map((key) => [`WHARF_PLUGINS__RATE_LIMIT__RULES__${rule}__${key}`, huge]),
      ),
    ),
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-instances-'));
  const database = new URL(cluster.databaseUrl).pathname.slice(1);
  const client = new pg.Client({ connectionString: cluster.databaseUrl });
  try {
    // The instances on both cores (they inherit this process's core 0 otherwise).
    for (const i of cluster.instances) execFileSync('taskset', ['-a', '-p', '-c', '0-1', String(i.pid)], { stdio: 'ignore' });
    await client.connect();
    const created = await cluster.command(['admin', 'create-user', '--email', BENCH_USER.email, '--password-stdin', '--org', 'Bench'], BENCH_USER.password);
    if (created.status !== 0) throw new Error(`admin create-user: ${created.stderr}`);
    const cookie = await benchCookie(cluster.url);
    const senders: SendSetup[] = [await sendSetup(cluster.url, cookie, dir), await sendSetup(cluster.url, cookie, dir)];
    const dashboard = { cookie, origin: cluster.url };
    const app = await createApp(cluster.url, dashboard, 'validate');
    const validateBody = JSON.stringify({ token: await createToken(cluster.url, dashboard, app.id) });
    const validate = { script: wrkScript(dir, 'validate', { method: 'POST', body: validateBody, headers: { 'Content-Type': 'application/json' } }) };
    const [a, b] = cluster.instances.map((i) => i.url) as [string, string];
    for (const url of [a, b]) {
      const res = await fetch(`${url}/api/tokens/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: validateBody });
      if (res.status !== 200) throw new Error(`validate at ${url}: ${res.status} ${await res.text()}`);
    }
    const workloads = [
      { request: 'POST /api/tokens/validate', path: '/api/tokens/validate', loads: [validate, validate], allowErrors: false },
      {
        request: 'POST /api/send-message to a sandbox session',
        path: '/api/send-message',
        // Concurrent sends may conflict on PostgreSQL: refused 8 times, a send is answered 503 (counted).
        allowErrors: true,
        loads: senders.map((s) => ({ headers: s.keyHeaders, script: s.script(s.recipient.phone_number) })),
      },
    ];
    const cases = workloads.flatMap((w) => [
      { name: `${w.request}, one instance (both wrk at instance 1)`, workload: w, targets: [a, a] },
      { name: `${w.request}, two instances (one wrk at each)`, workload: w, targets: [a, b] },
    ]);
    const series = () => new Map(cases.map((c) => [c.name, [] as number[]]));
    const [rps, p99, refused, cpuA, cpuB, cpuPg, busy] = [series(), series(), series(), series(), series(), series(), series()];
    const loadBefore = fmt(os.loadavg()[0]!);
    const share = (micros: number) => (100 * micros) / (seconds * 1e6);
    for (let round = 0; round < rounds; round++) {
      for (const c of cases) {
        const go = (s: number) => Promise.all(c.targets.map((url, i) => wrkAsync(url + c.workload.path, { ...c.workload.loads[i]!, connections, seconds: s })));
        await go(1); // warm-up
        const before = {
          a: cpuMicros(cluster.instances[0]!.pid),
          b: cpuMicros(cluster.instances[1]!.pid),
          pg: await backendsCpu(client, database),
          m: machineTicks(),
        };
        const results = await go(seconds);
        const after = {
          a: cpuMicros(cluster.instances[0]!.pid),
          b: cpuMicros(cluster.instances[1]!.pid),
          pg: await backendsCpu(client, database),
          m: machineTicks(),
        };
        const answers = results.reduce((n, r) => n + r.requests, 0);
        const errors = results.reduce((n, r) => n + r.errors, 0);
        if (errors && !c.workload.allowErrors) throw new Error(`${c.name}: ${errors} errors under load`);
        rps.get(c.name)!.push(results.reduce((n, r) => n + r.rps * (1 - r.errors / r.requests), 0));
        p99.get(c.name)!.push(Math.max(...results.map((r) => r.p99ms)));
        refused.get(c.name)!.push((100 * errors) / answers);
        cpuA.get(c.name)!.push(share(after.a - before.a));
        cpuB.get(c.name)!.push(share(after.b - before.b));
        cpuPg.get(c.name)!.push(share([...after.pg].reduce((n, [pid, t]) => n + t - (before.pg.get(pid) ?? 0), 0)));
        busy.get(c.name)!.push((200 * (after.m.busy - before.m.busy)) / (after.m.total - before.m.total));
      }
    }
    const m = (values: Map<string, number[]>, name: string, digits = 0) => fmt(median(values.get(name)!), digits);
    const lines = [
      '| request, case | 2xx req/s (sum, median) | p99 (ms, worse wrk) | non-2xx % | instance 1 CPU % | instance 2 CPU % | PostgreSQL backends CPU % | machine busy % (of 200) |',
      '|---|---|---|---|---|---|---|---|',
    ];
    for (const c of cases)
      lines.push(
        `| ${c.name} | ${m(rps, c.name)} | ${m(p99, c.name, 2)} | ${m(refused, c.name, 1)} | ${m(cpuA, c.name)} | ${m(cpuB, c.name)} | ${m(cpuPg, c.name)} | ${m(busy, c.name)} |`,
      );
    lines.push('');
    for (let i = 0; i < cases.length; i += 2) {
      const [one, two] = [cases[i]!.name, cases[i + 1]!.name];
      lines.push(
        `**${cases[i]!.workload.request}: two instances / one, 2xx req/s ${fmt(medianRatio(rps.get(two)!, rps.get(one)!))}** (median of the rounds' ratios).`,
        '',
      );
    }
    const names = cases.map((c) => c.name);
    lines.push(
      `(${rounds} rounds of ${seconds} s per case, interleaved; two wrk -t1 -c${connections} at once; from source, PostgreSQL ${database} on the test server, rate-limit store Redis with limits raised out of reach; machine load average (1 min) ${loadBefore} before the rounds, ${fmt(os.loadavg()[0]!)} after; per-round req/s: ${perRound(names, rps)}; per-round machine busy %: ${perRound(names, busy)})`,
    );
    return lines.join('\n');
  } finally {
    await client.end().catch(() => {});
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
    // The app's bucket, under the cluster's bucket prefix.
    const prefix = /bucket_prefix = "([^"]+)"/.exec(fs.readFileSync(cluster.configFile, 'utf8'))?.[1];
    if (prefix) {
      const s3 = s3Client(await ensureS3());
      try {
        await removeBuckets(s3, prefix);
      } finally {
        s3.destroy();
      }
    }
  }
}
