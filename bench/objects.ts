/**
 * Object throughput (issue 5): PUT and GET of one 64 MiB object and of 1,000 objects of 4 KiB,
 * through @aws-sdk/client-s3 over HTTP, against the embedded store (the `fs` driver's endpoint,
 * stand-alone in a process of its own, objects under the system temp dir) and against Ceph RGW (test/s3/ceph-rgw.sh, or
 * $S3_ENDPOINT) in the same run, interleaved; `dd` to the same disk is the physical bound for
 * writes (conv=fdatasync for the large file, oflag=dsync for 1,000 synchronous 4 KiB writes) and
 * `dd` reading the file back (from the page cache, like the GETs) for reads. The 4 KiB requests
 * are also sent by wrk through presigned URLs, which measures the servers rather than the SDK.
 * Both servers are pinned to BENCH_CPU (default 1): the embedded one at its start, Ceph's
 * radosgw and ceph-osd for the run (their CPUs are put back after).
 * Usage: node bench/run.ts objects
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ensureS3, s3Client, type S3Target } from '../test/helpers/s3.ts';
import { removeBuckets } from '../test/helpers/storage.ts';
import { SigV4Presigner } from '../plugins/storage/drivers/sigv4.ts';
import { cpuMicros, fmt, median, medianRatio, node, profiling, root, wrk } from './lib.ts';

const MiB = 1024 * 1024;
const BIG = 64 * MiB;
const SMALL = 4 * 1024;
const COUNT = 1000;
const CONCURRENCY = 16;

interface Figures {
  bigPut: number[];
  bigGet: number[];
  smallPut: number[];
  smallGet: number[];
}

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

/** One round of the four workloads: MiB/s into `into`, the server's CPU ms per MiB (from `cpu()`, µs) into `cpuInto`. */
async function round(s3: S3Client, bucket: string, big: Buffer, small: Buffer[], r: number, into: Figures, cpu: () => number, cpuInto: Figures): Promise<void> {
  const bigKey = `big/${r}.bin`;
  const measure = async (key: keyof Figures, bytes: number, work: () => Promise<void>) => {
    const before = cpu();
    into[key].push(mibps(bytes, await timed(work)));
    cpuInto[key].push((cpu() - before) / 1000 / (bytes / MiB));
  };
  await measure('bigPut', BIG, async () => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: bigKey, Body: big, ContentLength: BIG }))));
  await measure('bigGet', BIG, async () => {
    if ((await drain(s3, bucket, bigKey)) !== BIG) throw new Error('short read of the 64 MiB object');
  });
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

function ddFigures(dir: string, rounds: number): Figures {
  const file = path.join(dir, 'dd.bin');
  const out: Figures = { bigPut: [], bigGet: [], smallPut: [], smallGet: [] };
  for (let r = 0; r < rounds; r++) {
    out.bigPut.push(dd(['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${BIG / MiB}`, 'conv=fdatasync'], BIG));
    out.bigGet.push(dd([`if=${file}`, 'of=/dev/null', 'bs=1M'], BIG));
    out.smallPut.push(dd(['if=/dev/zero', `of=${file}`, `bs=${SMALL}`, `count=${COUNT}`, 'oflag=dsync'], COUNT * SMALL));
    out.smallGet.push(dd([`if=${file}`, 'of=/dev/null', `bs=${SMALL}`], COUNT * SMALL));
  }
  fs.rmSync(file, { force: true });
  return out;
}

/**
 * Pins the local Ceph daemons that serve S3 (radosgw, ceph-osd: every thread) to `cpu` for the
 * run, as the embedded store is, and returns what puts their CPUs back. Nothing when Ceph is
 * not local ($S3_ENDPOINT elsewhere).
 */
function pinCeph(cpu: string): { pinned: string[]; restore(): void } {
  const saved: [string, string][] = [];
  for (const name of ['radosgw', 'ceph-osd']) {
    for (const pid of spawnSync('pgrep', ['-x', name], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean)) {
      const list = /list: (.+)/.exec(spawnSync('taskset', ['-c', '-p', pid], { encoding: 'utf8' }).stdout)?.[1]?.trim();
      if (!list) continue;
      spawnSync('taskset', ['-a', '-c', '-p', cpu, pid], { stdio: 'ignore' });
      saved.push([pid, list]);
    }
  }
  return {
    pinned: saved.map(([pid]) => pid),
    restore: () => {
      for (const [pid, list] of saved) spawnSync('taskset', ['-a', '-c', '-p', list, pid], { stdio: 'ignore' });
    },
  };
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
    wrk(`${origin}/`, { script, connections: CONCURRENCY, seconds: 1 });
    const before = cpu();
    const r = wrk(`${origin}/`, { script, connections: CONCURRENCY, seconds });
    if (r.errors) throw new Error(`${name}: ${r.errors} errors under wrk`);
    return { rps: r.rps, cpuUs: (cpu() - before) / (r.rps * seconds) };
  } finally {
    fs.rmSync(script, { force: true });
  }
}

/** The embedded endpoint in a process of its own, pinned to `cpus` (profiled with BENCH_CPU_PROF). */
async function startEmbedded(objectsDir: string, region: string, cpus: string): Promise<{ url: string; pid: number; close(): Promise<void> }> {
  const child = spawn(
    'taskset',
    [
      '-c',
      cpus,
      node,
      ...profiling(),
      path.join(process.env.BENCH_EMBEDDED_ROOT ?? root, 'bench/objects-store.ts'),
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
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export async function run(options: { rounds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  // Ceph RGW (or $S3_ENDPOINT): never the embedded store standing in for it.
  delete process.env.WHARF_TEST_STORE;
  const ceph: S3Target = await ensureS3();
  const objectsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-objects-'));
  const cpus = process.env.BENCH_CPU ?? '1';
  const embedded = await startEmbedded(objectsDir, ceph.region, cpus);
  const cephPins = pinCeph(cpus);
  // Put Ceph's CPUs back even when the run is stopped (a timeout, ^C).
  const stopped = () => {
    cephPins.restore();
    process.exit(130);
  };
  process.once('SIGTERM', stopped);
  process.once('SIGINT', stopped);
  const embeddedTarget: S3Target = { endpoint: embedded.url, region: ceph.region, accessKeyId: 'bench', secretAccessKey: 'bench-secret', forcePathStyle: true };
  const prefix = `wb-objects-${randomBytes(3).toString('hex')}-`;
  const stores = [
    {
      name: 'embedded (fs driver endpoint)',
      target: embeddedTarget,
      s3: s3Client(embeddedTarget),
      figures: { bigPut: [], bigGet: [], smallPut: [], smallGet: [] } as Figures,
    },
    { name: 'Ceph RGW', target: ceph, s3: s3Client(ceph), figures: { bigPut: [], bigGet: [], smallPut: [], smallGet: [] } as Figures },
  ];
  const bucket = `${prefix}b`;
  const big = randomBytes(BIG);
  const small = Array.from({ length: COUNT }, () => randomBytes(SMALL));
  try {
    for (const s of stores) await s.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    // Warm-up: connections, the JIT, RGW's first writes.
    for (const s of stores) await s.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'warm', Body: small[0]! }));
    // CPU time of each server: the embedded process; radosgw and ceph-osd (none when Ceph is not local).
    const cpuOf = [() => cpuMicros(embedded.pid), () => cephPins.pinned.reduce((sum, pid) => sum + cpuMicros(Number(pid)), 0)];
    const cpuFigures = stores.map((): Figures => ({ bigPut: [], bigGet: [], smallPut: [], smallGet: [] }));
    for (let r = 0; r < rounds; r++) for (const [i, s] of stores.entries()) await round(s.s3, bucket, big, small, r, s.figures, cpuOf[i]!, cpuFigures[i]!);
    // The same 4 KiB requests from wrk through presigned URLs: the server's throughput, not the SDK's.
    const seconds = Number(process.env.BENCH_SECONDS ?? 5);
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
    const wrkRps = stores.map(() => ({ put: [] as number[], get: [] as number[] }));
    const wrkCpu = stores.map(() => ({ put: [] as number[], get: [] as number[] }));
    for (let r = 0; r < rounds; r++) {
      for (const [i] of stores.entries()) {
        for (const method of ['PUT', 'GET'] as const) {
          const key = method === 'PUT' ? 'put' : 'get';
          const got = wrkObjects(objectsDir, `${key}-${i}`, presigned[i]![key], method, seconds, cpuOf[i]!);
          wrkRps[i]![key].push(got.rps);
          wrkCpu[i]![key].push(got.cpuUs);
        }
      }
    }
    const ratio = (key: 'put' | 'get') => medianRatio(wrkRps[0]![key], wrkRps[1]![key]);
    // µs per 4 KiB request, as ms per MiB like the other rows.
    const perMiB = (v: number[]) => (median(v) * (MiB / SMALL)) / 1000;
    const cpuCell = (key: 'put' | 'get') =>
      `${fmt(perMiB(wrkCpu[0]![key]), 0)} / ${fmt(perMiB(wrkCpu[1]![key]), 0)} = ${fmt(medianRatio(wrkCpu[1]![key], wrkCpu[0]![key]))}`;
    const disk = ddFigures(objectsDir, rounds);
    const [emb, rgw] = [stores[0]!.figures, stores[1]!.figures];
    const [embCpu, rgwCpu] = [cpuFigures[0]!, cpuFigures[1]!];
    const row = (what: string, key: keyof Figures, bound: string) =>
      `| ${what} | ${fmt(median(emb[key]), 1)} | ${fmt(median(rgw[key]), 1)} | ${fmt(median(disk[key]), 1)} | ${fmt(medianRatio(emb[key], rgw[key]))} | ${fmt(median(embCpu[key]), 1)} / ${fmt(median(rgwCpu[key]), 1)} = ${fmt(medianRatio(rgwCpu[key], embCpu[key]))} | ${fmt(median(emb[key]) / median(disk[key]))} | ${bound} |`;
    const per = (f: Figures, key: keyof Figures) => f[key].map((v) => fmt(v, 1)).join('/');
    return [
      '| workload | embedded MiB/s | Ceph RGW MiB/s | dd MiB/s | embedded / Ceph (median of rounds) | server CPU ms per MiB, embedded / Ceph = Ceph ÷ embedded | embedded / dd | dd as run |',
      '|---|---|---|---|---|---|---|---|',
      row('PUT 1 × 64 MiB', 'bigPut', 'bs=1M count=64 conv=fdatasync'),
      row('GET 1 × 64 MiB', 'bigGet', 'read back, bs=1M (page cache)'),
      row(`PUT ${COUNT} × 4 KiB (${CONCURRENCY} at a time)`, 'smallPut', `bs=4k count=${COUNT} oflag=dsync`),
      row(`GET ${COUNT} × 4 KiB (${CONCURRENCY} at a time)`, 'smallGet', 'read back, bs=4k (page cache)'),
      '',
      `| PUT 4 KiB, presigned URLs, wrk -c${CONCURRENCY}, ${seconds} s | ${fmt((median(wrkRps[0]!.put) * SMALL) / MiB, 1)} | ${fmt((median(wrkRps[1]!.put) * SMALL) / MiB, 1)} | | ${fmt(ratio('put'))} | ${cpuCell('put')} | | |`,
      `| GET 4 KiB, presigned URLs, wrk -c${CONCURRENCY}, ${seconds} s | ${fmt((median(wrkRps[0]!.get) * SMALL) / MiB, 1)} | ${fmt((median(wrkRps[1]!.get) * SMALL) / MiB, 1)} | | ${fmt(ratio('get'))} | ${cpuCell('get')} | | |`,
      '',
      `Server CPU time (user + system from /proc: the embedded process; radosgw and ceph-osd, which also serve any other client of this Ceph meanwhile) per MiB: it does not count the time a server waited for its core, so it moves much less than MiB/s while other sessions load the machine. ` +
        `wrk per request: PUT embedded ${fmt(median(wrkCpu[0]!.put), 0)} µs, Ceph ${fmt(median(wrkCpu[1]!.put), 0)} µs; GET embedded ${fmt(median(wrkCpu[0]!.get), 0)} µs, Ceph ${fmt(median(wrkCpu[1]!.get), 0)} µs.`,
      '',
      `4 KiB objects per second (median): PUT embedded ${fmt((median(emb.smallPut) * MiB) / SMALL, 0)}, Ceph ${fmt((median(rgw.smallPut) * MiB) / SMALL, 0)}; GET embedded ${fmt((median(emb.smallGet) * MiB) / SMALL, 0)}, Ceph ${fmt((median(rgw.smallGet) * MiB) / SMALL, 0)}; ` +
        `with wrk: PUT embedded ${wrkRps[0]!.put.map((v) => fmt(v, 0)).join('/')}, Ceph ${wrkRps[1]!.put.map((v) => fmt(v, 0)).join('/')}; ` +
        `GET embedded ${wrkRps[0]!.get.map((v) => fmt(v, 0)).join('/')}, Ceph ${wrkRps[1]!.get.map((v) => fmt(v, 0)).join('/')} (per round; wrk ratios are medians of the rounds' ratios).`,
      '',
      `(${rounds} rounds, stores interleaved; @aws-sdk/client-s3 over HTTP on loopback, payloads SHA-256-signed by the client for both; per-round MiB/s embedded/Ceph: ` +
        `64 MiB PUT ${per(emb, 'bigPut')} vs ${per(rgw, 'bigPut')}, GET ${per(emb, 'bigGet')} vs ${per(rgw, 'bigGet')}; ` +
        `4 KiB PUT ${per(emb, 'smallPut')} vs ${per(rgw, 'smallPut')}, GET ${per(emb, 'smallGet')} vs ${per(rgw, 'smallGet')}. ` +
        `Embedded objects and dd under ${os.tmpdir()}, the disk Ceph's OSD uses when started by test/s3/ceph-rgw.sh; ` +
        `the embedded endpoint in a process of its own and Ceph's radosgw and ceph-osd (every thread${cephPins.pinned.length ? '' : '; not local, not pinned'}) pinned to CPU ${cpus}, the client and wrk to the other.)`,
    ].join('\n');
  } finally {
    for (const s of stores) {
      await removeBuckets(s.s3, prefix).catch(() => undefined);
      s.s3.destroy();
    }
    cephPins.restore();
    process.off('SIGTERM', stopped);
    process.off('SIGINT', stopped);
    await embedded.close();
    fs.rmSync(objectsDir, { recursive: true, force: true });
  }
}
