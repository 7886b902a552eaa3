/** Shared pieces of the benchmarks: servers to start, wrk to load them, medians and ratios. */
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const node = process.execPath;

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Server {
  name: string;
  child: ChildProcess;
  url: string;
  /** Milliseconds from spawn to the first 200 on the probe path. */
  startMs: number;
  /** Resident memory in MiB: all of it, and the private (anonymous) part. */
  rssMiB(): { total: number; anon: number };
  stop(): Promise<void>;
}

export interface ServerSpec {
  name: string;
  /** Command and arguments; the port is appended by `argsFor`. */
  argsFor(port: number): [string, string[]];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * The core a server under test is pinned to (`taskset -c`), so that Wharf and its baseline get
 * the same single core and the load generator the other: BENCH_CPU (default 1); BENCH_CPU=none
 * runs servers unpinned.
 */
export function pinned(cmd: string, args: string[]): [string, string[]] {
  const cpu = process.env.BENCH_CPU ?? '1';
  if (cpu === 'none') return [cmd, args];
  return ['taskset', ['-c', cpu, cmd, ...args]];
}

/** Node's flags for a server under test: `--cpu-prof` into BENCH_CPU_PROF (a directory) when set. */
export function profiling(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** Starts a server (pinned, see `pinned`) and polls `probe` every 2 ms until it answers 200. */
export async function startServer(spec: ServerSpec, probe = '/healthz'): Promise<Server> {
  const port = await freePort();
  const [cmd, args] = pinned(...spec.argsFor(port));
  const t0 = performance.now();
  const child = spawn(cmd, args, { cwd: spec.cwd ?? root, env: { ...process.env, ...spec.env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${spec.name} exited: ${stderr}`);
    try {
      const res = await fetch(url + probe);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not yet
    }
    if (performance.now() - t0 > 30_000) {
      child.kill('SIGKILL');
      throw new Error(`${spec.name} did not start: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  const startMs = performance.now() - t0;
  return {
    name: spec.name,
    child,
    url,
    startMs,
    rssMiB() {
      const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
      return { total: kb('VmRSS'), anon: kb('RssAnon') };
    },
    stop() {
      return new Promise((resolve) => {
        // Already gone (it crashed): no 'exit' is coming.
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
    },
  };
}

/** wrk from Debian's package, installed on first use. */
export function ensureWrk(): string {
  const found = spawnSync('sh', ['-c', 'command -v wrk']).stdout.toString().trim();
  if (found) return found;
  process.stderr.write('bench: installing wrk (apt-get)\n');
  execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk'], { stdio: 'inherit' });
  return 'wrk';
}

export interface WrkResult {
  rps: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  /** Responses and socket errors in all. */
  requests: number;
  /** wrk's own lines about the errors (`Non-2xx ...`, `Socket errors: ...`), for messages. */
  errorText: string;
}

/** timeout: seconds a request may take before wrk counts it as an error (wrk's default: 2). */
type WrkOptions = { connections?: number; seconds?: number; script?: string; headers?: Record<string, string>; timeout?: number };

function wrkArgs(url: string, options: WrkOptions): string[] {
  const args = ['-t1', `-c${options.connections ?? 50}`, `-d${options.seconds ?? 5}s`, '--latency'];
  if (options.timeout) args.push('--timeout', `${options.timeout}s`);
  for (const [k, v] of Object.entries(options.headers ?? {})) args.push('-H', `${k}: ${v}`);
  if (options.script) args.push('-s', options.script);
  args.push(url);
  return args;
}

function parseWrk(out: string): WrkResult {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]);
  const unit = (v: string, u: string) => Number(v) * (u === 'us' ? 0.001 : u === 's' ? 1000 : 1);
  const lat = (p: string) => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    return m ? unit(m[1]!, m[2]!) : NaN;
  };
  const errs = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = (errs ? Number(errs[1]) : 0) + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
  const requests = Number(/(\d+) requests in/.exec(out)![1]);
  const errorText = [errs?.[0], sock?.[0]].filter(Boolean).join('; ');
  return { rps, p50ms: lat('50'), p99ms: lat('99'), errors, requests, errorText };
}

/** Runs wrk against a URL: one thread, `connections` connections, `seconds` long. */
export function wrk(url: string, options: WrkOptions = {}): WrkResult {
  return parseWrk(execFileSync(ensureWrk(), wrkArgs(url, options), { encoding: 'utf8' }));
}

/** `wrk` in a child process without blocking this one: several at once, one per server. */
export function wrkAsync(url: string, options: WrkOptions = {}): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    execFile(ensureWrk(), wrkArgs(url, options), { encoding: 'utf8' }, (err, out) => (err ? reject(err) : resolve(parseWrk(out))));
  });
}

/**
 * The fields of /proc/PID/stat after the command's name (state is the first); undefined when the
 * process is gone. 1-based field n of stat(5) is index n - 3 here.
 */
function procStat(pid: number | string): string[] | undefined {
  try {
    return fs
      .readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
  } catch {
    return undefined;
  }
}

/** utime + stime (fields 14 and 15), and with `children` cutime + cstime (16 and 17) too: clock ticks of 10 ms. */
const ticks = (fields: string[], children = false) => Number(fields[11]) + Number(fields[12]) + (children ? Number(fields[13]) + Number(fields[14]) : 0);

/** CPU time (user + system) a process has used so far, in microseconds. */
export function cpuMicros(pid: number): number {
  const fields = procStat(pid);
  if (!fields) throw new Error(`cpuMicros: no process ${pid}`);
  return ticks(fields) * 10_000;
}

/**
 * CPU time (µs, user + system) of the local PostgreSQL server listening on `port`: its postmaster,
 * the children it has reaped (backends of closed connections) and those alive. Undefined when no
 * postmaster of this machine has `-p port` on its command line (a remote server, another launcher).
 */
export function postgresCpuMicros(port: number): number | undefined {
  const pids = fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  const postmaster = pids.find((pid) => {
    try {
      const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return args[0]?.endsWith('/postgres') && args[args.indexOf('-p') + 1] === String(port);
    } catch {
      return false;
    }
  });
  const own = postmaster && procStat(postmaster);
  if (!own) return undefined;
  let total = ticks(own, true);
  for (const pid of pids) {
    const fields = procStat(pid);
    // ppid is field 4.
    if (fields?.[1] === postmaster) total += ticks(fields);
  }
  return total * 10_000;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The median of the round-by-round ratios a[i] / b[i] (rounds interleaved, so each pair saw the same machine). */
export function medianRatio(a: readonly number[], b: readonly number[]): number {
  return median(a.map((v, i) => v / b[i]!));
}

export function fmt(n: number, digits = 2): string {
  return n.toFixed(digits);
}

/** Each name's per-round figures, `name a/b/c; name2 ...` (rounded to whole numbers). */
export function perRound(names: readonly string[], values: ReadonlyMap<string, readonly number[]>): string {
  return names
    .map(
      (name) =>
        `${name} ${values
          .get(name)!
          .map((v) => fmt(v, 0))
          .join('/')}`,
    )
    .join('; ');
}

/** The single executable, built when missing or older than the sources. */
export function ensureBinary(): string {
  const bin = path.join(root, 'dist/wharf');
  if (!fs.existsSync(bin) || process.env.BENCH_REBUILD === '1') {
    execFileSync(node, [path.join(root, 'build/build.ts')], { stdio: 'inherit' });
  }
  return bin;
}

/**
 * Drops a file's pages from the page cache (GNU dd: `iflag=nocache count=0`), so a binary's idle
 * RSS is measured as after installing it. Just written by the build, its cached pages are large
 * folios that the kernel maps whole around each fault: the same binary then showed 74 MiB of
 * file-backed RSS instead of 54 (BENCHMARKS.md, issue 16 part 5). The first start after this
 * reads from disk; the others find what it read.
 */
export function dropPageCache(file: string): void {
  execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}

export const baselines: Record<'http' | 'koa', ServerSpec> = {
  http: { name: 'bare node:http', argsFor: (port) => [node, [path.join(root, 'bench/baselines/bare-http.mjs'), String(port)]] },
  koa: { name: 'bare Koa', argsFor: (port) => [node, [path.join(root, 'bench/baselines/bare-koa.mjs'), String(port)]] },
};

export interface RequestCase {
  name: string;
  /** Path on the server. */
  url: string;
  headers: Record<string, string>;
  /** A wrk Lua script (method and body). */
  script?: string;
}

/**
 * Runs each case under wrk for `rounds` rounds, the cases interleaved within a round (a 1 s
 * warm-up each time), and returns the Markdown table of median req/s, the ratio to the first
 * case, and median p99. Any error response fails the benchmark.
 */
export function requestTable(baseUrl: string, cases: readonly RequestCase[], options: { rounds: number; seconds: number; ratioLabel: string }): string {
  const rps = new Map(cases.map((c) => [c.name, [] as number[]]));
  const p99 = new Map(cases.map((c) => [c.name, [] as number[]]));
  for (let round = 0; round < options.rounds; round++) {
    for (const c of cases) {
      const opts = { headers: c.headers, ...(c.script ? { script: c.script } : {}) };
      wrk(baseUrl + c.url, { ...opts, seconds: 1 });
      const r = wrk(baseUrl + c.url, { ...opts, seconds: options.seconds });
      if (r.errors) throw new Error(`${c.name}: ${r.errors} errors`);
      rps.get(c.name)!.push(r.rps);
      p99.get(c.name)!.push(r.p99ms);
    }
  }
  const base = median(rps.get(cases[0]!.name)!);
  const lines = [`| request | req/s (median) | ratio to ${options.ratioLabel} | p99 (ms) |`, '|---|---|---|---|'];
  for (const c of cases) {
    const r = median(rps.get(c.name)!);
    lines.push(`| ${c.name} | ${fmt(r, 0)} | ${fmt(r / base)} | ${fmt(median(p99.get(c.name)!))} |`);
  }
  return lines.join('\n');
}

/** The owner every benchmark signs in as. */
export const BENCH_USER = { email: 'bench@example.test', password: 'benchmark password' } as const;

/**
 * Creates the benchmark owner (and its organization "Bench") in a data dir, with `wharf admin
 * create-user` run as `command` (the source entry through Node, or the built binary).
 */
export function createBenchUser(
  command: [string, string[]],
  dataDir: string,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = {},
): { user: { id: string }; org: { id: string } } {
  const [file, args] = command;
  const out = execFileSync(
    file,
    [
      ...args,
      'admin',
      'create-user',
      '--email',
      BENCH_USER.email,
      '--password',
      BENCH_USER.password,
      '--org',
      'Bench',
      ...extra,
      '--data-dir',
      dataDir,
      '--json',
    ],
    { encoding: 'utf8', env: { ...process.env, ...env } },
  );
  return JSON.parse(out) as { user: { id: string }; org: { id: string } };
}

/** Signs the benchmark owner in at `url`; the `__session=...` cookie pair. */
export async function benchCookie(url: string): Promise<string> {
  const login = await fetch(`${url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: url },
    body: JSON.stringify(BENCH_USER),
  });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${await login.text()}`);
  const cookie = login.headers.getSetCookie().find((c) => c.startsWith('__session='));
  if (!cookie) throw new Error('login set no __session cookie');
  return cookie.split(';')[0]!;
}

export interface EngineCase {
  /** The row's name, e.g. `wharf serve (source) on PostgreSQL, POST /api/tokens/validate`. */
  name: string;
  url: string;
  /** A wrk Lua script (method and body). */
  script?: string;
  headers?: Record<string, string>;
  /** The server's process, whose CPU time is counted. */
  pid: number;
}

/**
 * The same request on two servers (the baseline first), `rounds` rounds interleaved (a 1 s
 * warm-up each time): the Markdown table of median req/s, p99 and the server's CPU µs per
 * request, and the ratios second / first. An error response fails the benchmark unless
 * `allowErrors`: then req/s counts the 2xx answers only, and the table gives the share refused.
 */
export function engineTable(
  cases: readonly [EngineCase, EngineCase],
  options: { rounds: number; seconds: number; connections: number; ratioLabel: string; allowErrors?: boolean },
): string {
  const { rounds, seconds, connections } = options;
  const series = () => new Map(cases.map((c) => [c.name, [] as number[]]));
  const [rps, p99, cpu, refused] = [series(), series(), series(), series()];
  for (let round = 0; round < rounds; round++) {
    for (const c of cases) {
      const opts = { connections, headers: c.headers, ...(c.script ? { script: c.script } : {}) };
      wrk(c.url, { ...opts, seconds: 1 }); // warm-up
      const before = cpuMicros(c.pid);
      const r = wrk(c.url, { ...opts, seconds });
      if (r.errors && !options.allowErrors) throw new Error(`${c.name}: ${r.errors} errors under load`);
      const ok = r.rps * (1 - r.errors / r.requests);
      cpu.get(c.name)!.push((cpuMicros(c.pid) - before) / (r.rps * seconds));
      rps.get(c.name)!.push(ok);
      p99.get(c.name)!.push(r.p99ms);
      refused.get(c.name)!.push((100 * r.errors) / r.requests);
    }
  }
  const [base, other] = cases.map((c) => c.name) as [string, string];
  const lines = [
    `| server, request | ${options.allowErrors ? '2xx ' : ''}req/s (median) | p99 (ms) | CPU µs per request (median) |${options.allowErrors ? ' non-2xx (% of answers, median) |' : ''}`,
    `|---|---|---|---|${options.allowErrors ? '---|' : ''}`,
  ];
  for (const c of cases)
    lines.push(
      `| ${c.name} | ${fmt(median(rps.get(c.name)!), 0)} | ${fmt(median(p99.get(c.name)!))} | ${fmt(median(cpu.get(c.name)!), 0)} |${options.allowErrors ? ` ${fmt(median(refused.get(c.name)!), 1)} |` : ''}`,
    );
  lines.push(
    '',
    `**${options.ratioLabel}: req/s ${fmt(medianRatio(rps.get(other)!, rps.get(base)!))}, p99 ${fmt(medianRatio(p99.get(other)!, p99.get(base)!))}, Wharf's CPU per request ${fmt(medianRatio(cpu.get(other)!, cpu.get(base)!))}** (medians of the rounds' ratios; CPU per answer of any status; the database server's own CPU, another process, is not counted).`,
    '',
    `(${rounds} rounds of ${seconds} s per case, interleaved; wrk -t1 -c${connections}; per-round req/s: ${perRound([base, other], rps)})`,
  );
  return lines.join('\n');
}
