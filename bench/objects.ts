/**
 * Object throughput (issue 5): PUT and GET of one 64 MiB object and of 1,000 objects of 4 KiB,
 * through @aws-sdk/client-s3 over HTTP, against the embedded store (the `fs` driver's endpoint,
 * stand-alone in a process of its own, objects under the system temp dir) and against Ceph RGW (test/s3/ceph-rgw.sh, or
 * $S3_ENDPOINT) in the same run, interleaved; `dd` to the same disk is the physical bound for
 * writes (conv=fdatasync for the large file, oflag=dsync for 1,000 synchronous 4 KiB writes) and
 * `dd` reading the file back (from the page cache, like the GETs) for reads. The 4 KiB requests
 * are also sent by wrk through presigned URLs, and the 64 MiB ones by curl (SigV4 headers, the
 * payload's SHA-256 computed before the clock), which measure the servers rather than the SDK;
 * every row reports the servers' and the client's CPU per MiB. Both servers are pinned to
 * BENCH_CPU (default 1): the embedded one at its start, Ceph's daemons (radosgw, ceph-osd, ceph-mon:
 * every thread) for the run (their CPUs are put back after; BENCH_CEPH_CPU=none leaves them on every core); dd runs in every round, as the stores do.
 * Usage: node bench/run.ts objects. BENCH_BASE=DIR also runs the embedded store of another
 * checkout (main's, say) in the same rounds; BENCH_OBJECTS=big runs the 64 MiB workloads alone;
 * BENCH_ROUNDS (3), BENCH_SECONDS (5, wrk).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ensureS3, s3Client, type S3Target } from '../test/helpers/s3.ts';
import { removeBuckets } from '../test/helpers/storage.ts';
import { SignatureV4 } from '@smithy/signature-v4';
import { SigV4Presigner } from '../plugins/storage/drivers/sigv4.ts';
import { EMPTY_SHA256, NodeSha256 } from '../plugins/storage/drivers/fs/auth.ts';
import { cpuMicros, fmt, median, medianRatio, node, profiling, root, wrk } from './lib.ts';

const MiB = 1024 * 1024;
const BIG = 64 * MiB;
const SMALL = 4 * 1024;
const COUNT = 1000;
const CONCURRENCY = 16;

interface Figures {
  bigPut: number[];
  bigGet: number[];
  /** The same 64 MiB through curl, signed before the clock starts (see {@link curlRequest}). */
  bigPutCurl: number[];
  bigGetCurl: number[];
  smallPut: number[];
  smallGet: number[];
}

const figures = (): Figures => ({ bigPut: [], bigGet: [], bigPutCurl: [], bigGetCurl: [], smallPut: [], smallGet: [] });

const mibps = (bytes: number, ms: number) => bytes / MiB / (ms / 1000);

async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function pool(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

async function drain(s3: S3Client, bucket: string, key: string): Promise<number> {
  const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  let n = 0;
  for await (const chunk of out.Body as AsyncIterable<Uint8Array>) n += chunk.length;
  return n;
}

/**
 * A request by curl, signed with SigV4 in its headers (the SDK's own signer), `x-amz-content-sha256`
 * the body's SHA-256 given here: the server still checks the body against it, but the client hashes
 * nothing while the clock runs. curl sends a file from the page cache and drops what it receives:
 * a client that costs little next to the servers (the SDK hashes 64 MiB before a PUT, and reads
 * a GET's body at about twice the server's CPU per MiB). Returns the bytes received.
 */
async function curlRequest(target: S3Target, method: 'PUT' | 'GET', bucket: string, key: string, body?: BigFile): Promise<number> {
  const url = new URL(`${target.endpoint}/${bucket}/${key}`);
  const signer = new SignatureV4({
    service: 's3',
    region: target.region,
    credentials: { accessKeyId: target.accessKeyId, secretAccessKey: target.secretAccessKey },
    sha256: NodeSha256,
    uriEscapePath: false,
  });
  // Host and Content-Length are signed and sent by curl itself, with the same values.
  const headers: Record<string, string> = { host: url.host, 'x-amz-content-sha256': body?.sha256 ?? EMPTY_SHA256 };
  if (body) headers['content-length'] = String(body.size);
  const signed = await signer.sign({ method, protocol: url.protocol, hostname: url.hostname, port: Number(url.port), path: url.pathname, query: {}, headers });
  const args = ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', '-X', method, '-H', 'Expect:'];
  for (const [k, v] of Object.entries(signed.headers)) if (k !== 'host' && k !== 'content-length') args.push('-H', `${k}: ${v}`);
  if (body) args.push('-T', body.file);
  args.push(url.href);
  const [status, size] = execFileSync('curl', args, { encoding: 'utf8' }).split(' ');
  if (status !== '200') throw new Error(`curl ${method} ${key}: ${status}`);
  return Number(size);
}

/** CPU time (user + system, µs) of this process and of its children waited for (curl, dd). */
function clientMicros(): number {
  const own = process.cpuUsage();
  const fields = fs
    .readFileSync('/proc/self/stat', 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  // cutime and cstime: fields 16 and 17 (1-based), in clock ticks of 10 ms.
  return own.user + own.system + (Number(fields[13]) + Number(fields[14])) * 10_000;
}

/** The 64 MiB body: in memory for the SDK, in a file (page cache) for curl, and its SHA-256. */
interface BigFile {
  file: string;
  size: number;
  sha256: string;
}

interface Big extends BigFile {
  bytes: Buffer;
}

/**
 * One round of the workloads against one store: MiB/s into `into`, the server's CPU ms per MiB
 * (from `cpu()`, µs) into `cpuInto`, this process's (the client's) into `clientInto`.
 * `only === 'big'` runs the 64 MiB workloads alone.
 */
async function round(
  s3: S3Client,
  target: S3Target,
  bucket: string,
  big: Big,
  small: Buffer[],
  r: number,
  into: Figures,
  cpu: () => number,
  cpuInto: Figures,
  clientInto: Figures,
  only: string | undefined,
): Promise<void> {
  const bigKey = `big/${r}.bin`;
  const measure = async (key: keyof Figures, bytes: number, work: () => Promise<void>) => {
    const before = cpu();
    const client = clientMicros();
    into[key].push(mibps(bytes, await timed(work)));
    cpuInto[key].push((cpu() - before) / 1000 / (bytes / MiB));
    clientInto[key].push((clientMicros() - client) / 1000 / (bytes / MiB));
  };
  await measure('bigPut', BIG, async () => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: bigKey, Body: big.bytes, ContentLength: BIG }))));
  await measure('bigGet', BIG, async () => {
    if ((await drain(s3, bucket, bigKey)) !== BIG) throw new Error('short read of the 64 MiB object');
  });
  await measure('bigPutCurl', BIG, async () => void (await curlRequest(target, 'PUT', bucket, `${bigKey}.curl`, big)));
  await measure('bigGetCurl', BIG, async () => {
    if ((await curlRequest(target, 'GET', bucket, `${bigKey}.curl`)) !== BIG) throw new Error('short read of the 64 MiB object');
  });
  if (only === 'big') return;
  await measure('smallPut', COUNT * SMALL, () =>
    pool(
      COUNT,
      CONCURRENCY,
      async (i) => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `small/${r}/${i}`, Body: small[i]!, ContentLength: SMALL }))),
    ),
  );
  await measure('smallGet', COUNT * SMALL, () =>
    pool(COUNT, CONCURRENCY, async (i) => {
      if ((await drain(s3, bucket, `small/${r}/${i}`)) !== SMALL) throw new Error('short read of a 4 KiB object');
    }),
  );
}

/** dd onto the disk holding `dir`: MiB/s from the wall clock around dd. */
function dd(args: string[], bytes: number): number {
  const t0 = performance.now();
  execFileSync('dd', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  return mibps(bytes, performance.now() - t0);
}

/** One round of dd on the disk holding `dir`, into `out` (interleaved with the stores' rounds: the disk is shared). */
function ddRound(dir: string, out: Figures, only: string | undefined): void {
  const file = path.join(dir, 'dd.bin');
  const bigPut = dd(['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${BIG / MiB}`, 'conv=fdatasync'], BIG);
  const bigGet = dd([`if=${file}`, 'of=/dev/null', 'bs=1M'], BIG);
  out.bigPut.push(bigPut);
  out.bigPutCurl.push(bigPut);
  out.bigGet.push(bigGet);
  out.bigGetCurl.push(bigGet);
  if (only !== 'big') {
    out.smallPut.push(dd(['if=/dev/zero', `of=${file}`, `bs=${SMALL}`, `count=${COUNT}`, 'oflag=dsync'], COUNT * SMALL));
    out.smallGet.push(dd([`if=${file}`, 'of=/dev/null', `bs=${SMALL}`], COUNT * SMALL));
  }
  fs.rmSync(file, { force: true });
}

/** The local Ceph daemons: radosgw and ceph-osd serve S3, ceph-mon answers them (map and auth checks). */
const CEPH_DAEMONS = ['radosgw', 'ceph-osd', 'ceph-mon', 'ceph-mgr'];

/**
 * The local Ceph daemons' pids ({@link CEPH_DAEMONS}; none when Ceph is not local, $S3_ENDPOINT
 * elsewhere), pinned (every thread: `taskset -a`) to `cpu` for the run as the embedded store is,
 * unless `cpu` is 'none' (BENCH_CEPH_CPU=none: Ceph as started, on every core, the second view);
 * `restore` puts their CPUs back.
 */
function pinCeph(cpu: string): { pids: number[]; pinned: boolean; restore(): void } {
  const saved: [string, string][] = [];
  const pids: number[] = [];
  for (const name of CEPH_DAEMONS) {
    for (const pid of spawnSync('pgrep', ['-x', name], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean)) {
      const list = /list: (.+)/.exec(spawnSync('taskset', ['-c', '-p', pid], { encoding: 'utf8' }).stdout)?.[1]?.trim();
      if (!list) continue;
      pids.push(Number(pid));
      if (cpu === 'none') continue;
      saved.push([pid, list]);
      if (spawnSync('taskset', ['-a', '-c', '-p', cpu, pid], { stdio: 'ignore' }).status !== 0) {
        restore();
        throw new Error(`taskset could not pin ${name} (${pid}) to CPU ${cpu}`);
      }
    }
  }
  function restore() {
    for (const [pid, list] of saved) spawnSync('taskset', ['-a', '-c', '-p', list, pid], { stdio: 'ignore' });
  }
  return { pids, pinned: saved.length > 0, restore };
}

/**
 * 4 KiB PUTs or GETs through presigned URLs (one per key, cycled) under wrk: requests per second,
 * and the server's CPU time per request (`cpu()`: user + system µs of its processes so far).
 */
function wrkObjects(dir: string, name: string, urls: string[], method: 'PUT' | 'GET', seconds: number, cpu: () => number): { rps: number; cpuUs: number } {
  const origin = new URL(urls[0]!).origin;
  const script = path.join(dir, `${name}.lua`);
  const paths = urls.map((u) => JSON.stringify(u.slice(origin.length))).join(',\n');
  fs.writeFileSync(
    script,
    `local paths = {\n${paths}\n}\nlocal i = 0\nwrk.method = "${method}"\n` +
      (method === 'PUT' ? `wrk.body = string.rep("x", ${SMALL})\nwrk.headers["Content-Type"] = "application/octet-stream"\n` : '') +
      `request = function()\n  i = i % #paths + 1\n  return wrk.format(nil, paths[i])\nend\n`,
  );
  try {
    wrk(`${origin}/`, { script, connections: CONCURRENCY, seconds: 1, timeout: 10 });
    const before = cpu();
    const r = wrk(`${origin}/`, { script, connections: CONCURRENCY, seconds, timeout: 10 });
    if (r.errors) throw new Error(`${name}: ${r.errors} errors under wrk`);
    return { rps: r.rps, cpuUs: (cpu() - before) / (r.rps * seconds) };
  } finally {
    fs.rmSync(script, { force: true });
  }
}

/** The V8 flags `checkout`'s binary starts with (its build/v8-flags.ts; none in a checkout from before that file). */
async function binaryFlags(checkout: string): Promise<readonly string[]> {
  const file = path.join(checkout, 'build/v8-flags.ts');
  return fs.existsSync(file) ? ((await import(file)) as { BINARY_V8_FLAGS: readonly string[] }).BINARY_V8_FLAGS : [];
}

/** The embedded endpoint of `checkout` in a process of its own, pinned to `cpus`, with that checkout's binary V8 flags ({@link binaryFlags}; profiled with BENCH_CPU_PROF). */
async function startEmbedded(
  checkout: string,
  objectsDir: string,
  region: string,
  cpus: string,
): Promise<{ url: string; pid: number; flags: readonly string[]; close(): Promise<void> }> {
  const flags = await binaryFlags(checkout);
  const child = spawn(
    'taskset',
    [
      '-c',
      cpus,
      node,
      ...(await binaryFlags(checkout)),
      ...profiling(),
      path.join(checkout, 'bench/objects-store.ts'),
      objectsDir,
      region,
      'bench',
      'bench-secret',
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.trim());
    });
    child.once('exit', (code) => reject(new Error(`the embedded store exited (${code})`)));
  });
  return {
    url,
    pid: child.pid!,
    flags,
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export async function run(options: { rounds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  // BENCH_OBJECTS=big: the 64 MiB workloads alone (for profiles of that path).
  const only = process.env.BENCH_OBJECTS;
  // Ceph RGW (or $S3_ENDPOINT): never the embedded store standing in for it.
  delete process.env.WHARF_TEST_STORE;
  const ceph: S3Target = await ensureS3();
  const objectsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-objects-'));
  const cpus = process.env.BENCH_CPU ?? '1';
  const load = [os.loadavg()[0]!];
  // BENCH_BASE=DIR: the embedded store of another checkout (main's, say) in the same rounds.
  const baseRoot = process.env.BENCH_BASE;
  const embedded = await startEmbedded(process.env.BENCH_EMBEDDED_ROOT ?? root, path.join(objectsDir, 'this'), ceph.region, cpus);
  const base = baseRoot ? await startEmbedded(baseRoot, path.join(objectsDir, 'base'), ceph.region, cpus) : undefined;
  // BENCH_CEPH_CPU=none: Ceph's daemons unpinned (the embedded store still on `cpus`), a second view.
  const cephPins = pinCeph(process.env.BENCH_CEPH_CPU ?? cpus);
  // Put Ceph's CPUs back even when the run is stopped (a timeout, ^C).
  const stopped = () => {
    cephPins.restore();
    process.exit(130);
  };
  process.once('SIGTERM', stopped);
  process.once('SIGINT', stopped);
  const local = (url: string): S3Target => ({
    endpoint: url,
    region: ceph.region,
    accessKeyId: 'bench',
    secretAccessKey: 'bench-secret',
    forcePathStyle: true,
  });
  const prefix = `wb-objects-${randomBytes(3).toString('hex')}-`;
  // CPU time of each server: the embedded process; Ceph's daemons (none when Ceph is not local).
  const stores = [
    { name: 'embedded', target: local(embedded.url), cpu: () => cpuMicros(embedded.pid) },
    { name: 'Ceph RGW', target: ceph, cpu: () => cephPins.pids.reduce((sum, pid) => sum + cpuMicros(pid), 0) },
    ...(base ? [{ name: 'embedded (base)', target: local(base.url), cpu: () => cpuMicros(base.pid) }] : []),
  ].map((s) => ({ ...s, s3: s3Client(s.target), figures: figures(), server: figures(), client: figures() }));
  const bucket = `${prefix}b`;
  const bigBytes = randomBytes(BIG);
  const bigFile = path.join(objectsDir, 'big.bin');
  fs.writeFileSync(bigFile, bigBytes);
  const big: Big = { bytes: bigBytes, file: bigFile, size: BIG, sha256: createHash('sha256').update(bigBytes).digest('hex') };
  const small = Array.from({ length: COUNT }, () => randomBytes(SMALL));
  const disk = figures();
  try {
    for (const s of stores) await s.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    // Warm-up: connections, the JIT, RGW's first writes.
    for (const s of stores) await s.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'warm', Body: small[0]! }));
    for (let r = 0; r < rounds; r++) {
      for (const s of stores) await round(s.s3, s.target, bucket, big, small, r, s.figures, s.cpu, s.server, s.client, only);
      ddRound(objectsDir, disk, only);
    }
    load.push(os.loadavg()[0]!);
    // The same 4 KiB requests from wrk through presigned URLs: the server's throughput, not the SDK's.
    const seconds = Number(process.env.BENCH_SECONDS ?? 5);
    const wrkRps = stores.map(() => ({ put: [] as number[], get: [] as number[] }));
    const wrkCpu = stores.map(() => ({ put: [] as number[], get: [] as number[] }));
    if (only !== 'big') {
      const presigned = stores.map((s) => {
        const signer = new SigV4Presigner({
          credentials: { accessKeyId: s.target.accessKeyId, secretAccessKey: s.target.secretAccessKey },
          region: s.target.region,
          forcePathStyle: true,
        });
        const endpoint = new URL(s.target.endpoint);
        const sign = (method: 'PUT' | 'GET', key: string) => signer.presignSync({ method, endpoint, bucket, key, expiresInSeconds: 3600 });
        return {
          put: Array.from({ length: COUNT }, (_, i) => sign('PUT', `wrk/${i}`)),
          get: Array.from({ length: COUNT }, (_, i) => sign('GET', `small/0/${i}`)),
        };
      });
      for (let r = 0; r < rounds; r++) {
        for (const [i, s] of stores.entries()) {
          for (const method of ['PUT', 'GET'] as const) {
            const key = method === 'PUT' ? 'put' : 'get';
            const got = wrkObjects(objectsDir, `${key}-${i}`, presigned[i]![key], method, seconds, s.cpu);
            wrkRps[i]![key].push(got.rps);
            wrkCpu[i]![key].push(got.cpuUs);
          }
        }
      }
      load.push(os.loadavg()[0]!);
    }
    const [emb, rgw] = stores;
    const rows: [string, keyof Figures, string][] = [
      ['PUT 1 × 64 MiB, SDK', 'bigPut', 'bs=1M count=64 conv=fdatasync'],
      ['GET 1 × 64 MiB, SDK', 'bigGet', 'read back, bs=1M (page cache)'],
      ['PUT 1 × 64 MiB, curl, payload hashed before the clock', 'bigPutCurl', 'as above'],
      ['GET 1 × 64 MiB, curl', 'bigGetCurl', 'as above'],
      ...(only === 'big'
        ? []
        : ([
            [`PUT ${COUNT} × 4 KiB, SDK, ${CONCURRENCY} at a time`, 'smallPut', `bs=4k count=${COUNT} oflag=dsync`],
            [`GET ${COUNT} × 4 KiB, SDK, ${CONCURRENCY} at a time`, 'smallGet', 'read back, bs=4k (page cache)'],
          ] as [string, keyof Figures, string][])),
    ];
    /** How busy the client kept its core: its CPU per MiB × MiB/s, medians of the rounds (near 100%: the client is the bottleneck). */
    const busy = (store: (typeof stores)[number], key: keyof Figures) =>
      `${fmt(median(store.client[key].map((ms, r) => (ms * store.figures[key][r]!) / 10)), 0)}%`;
    const row = ([what, key, bound]: [string, keyof Figures, string]) =>
      `| ${what} | ${fmt(median(emb!.figures[key]), 1)} | ${fmt(median(rgw!.figures[key]), 1)} | ${fmt(medianRatio(emb!.figures[key], rgw!.figures[key]))} | ` +
      `${fmt(median(emb!.server[key]), 1)} / ${fmt(median(rgw!.server[key]), 1)} = ${fmt(medianRatio(rgw!.server[key], emb!.server[key]))} | ` +
      `${fmt(median(emb!.client[key]), 1)} / ${fmt(median(rgw!.client[key]), 1)} (${busy(emb!, key)} / ${busy(rgw!, key)}) | ${fmt(median(disk[key]), 1)} | ${fmt(median(emb!.figures[key]) / median(disk[key]))} | ${bound} |`;
    // µs per 4 KiB request, as ms per MiB like the other rows.
    const perMiB = (v: number[]) => (median(v) * (MiB / SMALL)) / 1000;
    const wrkRow = (key: 'put' | 'get') =>
      `| ${key.toUpperCase()} 4 KiB, presigned URLs, wrk -c${CONCURRENCY}, ${seconds} s | ${fmt((median(wrkRps[0]![key]) * SMALL) / MiB, 1)} | ${fmt((median(wrkRps[1]![key]) * SMALL) / MiB, 1)} | ` +
      `${fmt(medianRatio(wrkRps[0]![key], wrkRps[1]![key]))} | ${fmt(perMiB(wrkCpu[0]![key]), 0)} / ${fmt(perMiB(wrkCpu[1]![key]), 0)} = ${fmt(medianRatio(wrkCpu[1]![key], wrkCpu[0]![key]))} | wrk | | | |`;
    const per = (f: Figures, key: keyof Figures) => f[key].map((v) => fmt(v, 1)).join('/');
    const out = [
      '| workload | embedded MiB/s | Ceph RGW MiB/s | embedded / Ceph (median of rounds) | server CPU ms per MiB, embedded / Ceph = Ceph ÷ embedded | client CPU ms per MiB, to embedded / to Ceph (its core busy) | dd MiB/s | embedded / dd | dd as run |',
      '|---|---|---|---|---|---|---|---|---|',
      ...rows.map(row),
      ...(only === 'big' ? [] : [wrkRow('put'), wrkRow('get')]),
      '',
      `Server CPU time (user + system from /proc: the embedded process; Ceph's radosgw, ceph-osd and ceph-mon, which also serve any other client of this Ceph meanwhile) per MiB: ` +
        `it does not count the time a server waited for its core, so it moves much less than MiB/s while other sessions load the machine. Client CPU: this process (the SDK) and its children (curl), on the other core.` +
        (only === 'big'
          ? ''
          : ` wrk per request: PUT embedded ${fmt(median(wrkCpu[0]!.put), 0)} µs, Ceph ${fmt(median(wrkCpu[1]!.put), 0)} µs; GET embedded ${fmt(median(wrkCpu[0]!.get), 0)} µs, Ceph ${fmt(median(wrkCpu[1]!.get), 0)} µs; ` +
            `req/s per round: PUT embedded ${wrkRps[0]!.put.map((v) => fmt(v, 0)).join('/')}, Ceph ${wrkRps[1]!.put.map((v) => fmt(v, 0)).join('/')}; ` +
            `GET embedded ${wrkRps[0]!.get.map((v) => fmt(v, 0)).join('/')}, Ceph ${wrkRps[1]!.get.map((v) => fmt(v, 0)).join('/')}.`),
      '',
      `(${rounds} rounds, stores and dd interleaved; load average ${load.map((l) => fmt(l, 1)).join(' → ')}; per-round MiB/s embedded vs Ceph: ` +
        rows
          .map(([what, key]) => `${what.split(',')[0]}${key.endsWith('Curl') ? ' curl' : ''} ${per(emb!.figures, key)} vs ${per(rgw!.figures, key)}`)
          .join('; ') +
        `. Embedded objects and dd under ${os.tmpdir()}, the disk Ceph's OSD uses when started by test/s3/ceph-rgw.sh (its memstore keeps objects in memory); ` +
        `the embedded endpoint in a process of its own pinned to CPU ${cpus} (V8 flags as its binary's: ${embedded.flags.join(' ') || 'none'}${base ? `; the base's: ${base.flags.join(' ') || 'none'}` : ''}), ` +
        (cephPins.pinned
          ? `Ceph's daemons (${cephPins.pids.length} processes, every thread) pinned to the same CPU`
          : `Ceph's daemons not pinned (${cephPins.pids.length ? 'BENCH_CEPH_CPU=none: on every core' : 'not local'})`) +
        `; the client and wrk on the other.)`,
    ];
    const b = stores[2];
    if (b) {
      out.push(
        '',
        `This checkout's embedded store against ${baseRoot}'s (BENCH_BASE), in the same rounds:`,
        '',
        '| workload | base MiB/s | this MiB/s | this / base (median of rounds) | server CPU ms per MiB, base / this |',
        '|---|---|---|---|---|',
        ...rows.map(
          ([what, key]) =>
            `| ${what} | ${fmt(median(b.figures[key]), 1)} | ${fmt(median(emb!.figures[key]), 1)} | ${fmt(medianRatio(emb!.figures[key], b.figures[key]))} | ${fmt(median(b.server[key]), 2)} / ${fmt(median(emb!.server[key]), 2)} |`,
        ),
        ...(only === 'big'
          ? []
          : (['put', 'get'] as const).map(
              (key) =>
                `| ${key.toUpperCase()} 4 KiB, wrk | ${fmt((median(wrkRps[2]![key]) * SMALL) / MiB, 1)} | ${fmt((median(wrkRps[0]![key]) * SMALL) / MiB, 1)} | ${fmt(medianRatio(wrkRps[0]![key], wrkRps[2]![key]))} | ${fmt(perMiB(wrkCpu[2]![key]), 0)} / ${fmt(perMiB(wrkCpu[0]![key]), 0)} |`,
            )),
      );
    }
    return out.join('\n');
  } finally {
    for (const s of stores) {
      await removeBuckets(s.s3, prefix).catch(() => undefined);
      s.s3.destroy();
    }
    cephPins.restore();
    process.off('SIGTERM', stopped);
    process.off('SIGINT', stopped);
    await embedded.close();
    await base?.close();
    fs.rmSync(objectsDir, { recursive: true, force: true });
  }
}
