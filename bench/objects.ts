/**
 * Object throughput (issue 5): PUT and GET of one 64 MiB object and of 1,000 objects of 4 KiB,
 * through @aws-sdk/client-s3 over HTTP, against the embedded store (the `fs` driver's endpoint,
 * stand-alone, objects under the system temp dir) and against Ceph RGW (test/s3/ceph-rgw.sh, or
 * $S3_ENDPOINT) in the same run, interleaved; `dd` to the same disk is the physical bound for
 * writes (conv=fdatasync for the large file, oflag=dsync for 1,000 synchronous 4 KiB writes) and
 * `dd` reading the file back (from the page cache, like the GETs) for reads.
 * Usage: node bench/run.ts objects
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { createLogger } from '../core/logger.ts';
import { startStandaloneStore } from '../plugins/storage/drivers/fs/index.ts';
import { ensureS3, s3Client, type S3Target } from '../test/helpers/s3.ts';
import { removeBuckets } from '../test/helpers/storage.ts';
import { fmt, median } from './lib.ts';

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

async function round(s3: S3Client, bucket: string, big: Buffer, small: Buffer[], r: number, into: Figures): Promise<void> {
  const bigKey = `big/${r}.bin`;
  into.bigPut.push(
    mibps(BIG, await timed(async () => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: bigKey, Body: big, ContentLength: BIG }))))),
  );
  into.bigGet.push(
    mibps(
      BIG,
      await timed(async () => {
        if ((await drain(s3, bucket, bigKey)) !== BIG) throw new Error('short read of the 64 MiB object');
      }),
    ),
  );
  into.smallPut.push(
    mibps(
      COUNT * SMALL,
      await timed(() =>
        pool(
          COUNT,
          CONCURRENCY,
          async (i) => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `small/${r}/${i}`, Body: small[i]!, ContentLength: SMALL }))),
        ),
      ),
    ),
  );
  into.smallGet.push(
    mibps(
      COUNT * SMALL,
      await timed(() =>
        pool(COUNT, CONCURRENCY, async (i) => {
          if ((await drain(s3, bucket, `small/${r}/${i}`)) !== SMALL) throw new Error('short read of a 4 KiB object');
        }),
      ),
    ),
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

export async function run(options: { rounds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  // Ceph RGW (or $S3_ENDPOINT): never the embedded store standing in for it.
  delete process.env.WHARF_TEST_STORE;
  const ceph: S3Target = await ensureS3();
  const objectsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-objects-'));
  const embedded = await startStandaloneStore({
    objectsDir,
    listen: '127.0.0.1:0',
    region: ceph.region,
    root: { accessKey: 'bench', secretKey: 'bench-secret' },
    log: createLogger('silent'),
  });
  const embeddedTarget: S3Target = { endpoint: embedded.url, region: ceph.region, accessKeyId: 'bench', secretAccessKey: 'bench-secret', forcePathStyle: true };
  const prefix = `wb-objects-${randomBytes(3).toString('hex')}-`;
  const stores = [
    { name: 'embedded (fs driver endpoint)', s3: s3Client(embeddedTarget), figures: { bigPut: [], bigGet: [], smallPut: [], smallGet: [] } as Figures },
    { name: 'Ceph RGW', s3: s3Client(ceph), figures: { bigPut: [], bigGet: [], smallPut: [], smallGet: [] } as Figures },
  ];
  const bucket = `${prefix}b`;
  const big = randomBytes(BIG);
  const small = Array.from({ length: COUNT }, () => randomBytes(SMALL));
  try {
    for (const s of stores) await s.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    // Warm-up: connections, the JIT, RGW's first writes.
    for (const s of stores) await s.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'warm', Body: small[0]! }));
    for (let r = 0; r < rounds; r++) for (const s of stores) await round(s.s3, bucket, big, small, r, s.figures);
    const disk = ddFigures(objectsDir, rounds);
    const [emb, rgw] = [stores[0]!.figures, stores[1]!.figures];
    const row = (what: string, key: keyof Figures, bound: string) =>
      `| ${what} | ${fmt(median(emb[key]), 1)} | ${fmt(median(rgw[key]), 1)} | ${fmt(median(disk[key]), 1)} | ${fmt(median(emb[key]) / median(rgw[key]))} | ${fmt(median(emb[key]) / median(disk[key]))} | ${bound} |`;
    const per = (f: Figures, key: keyof Figures) => f[key].map((v) => fmt(v, 1)).join('/');
    return [
      '| workload | embedded MiB/s | Ceph RGW MiB/s | dd MiB/s | embedded / Ceph | embedded / dd | dd as run |',
      '|---|---|---|---|---|---|---|',
      row('PUT 1 × 64 MiB', 'bigPut', 'bs=1M count=64 conv=fdatasync'),
      row('GET 1 × 64 MiB', 'bigGet', 'read back, bs=1M (page cache)'),
      row(`PUT ${COUNT} × 4 KiB (${CONCURRENCY} at a time)`, 'smallPut', `bs=4k count=${COUNT} oflag=dsync`),
      row(`GET ${COUNT} × 4 KiB (${CONCURRENCY} at a time)`, 'smallGet', 'read back, bs=4k (page cache)'),
      '',
      `4 KiB objects per second (median): PUT embedded ${fmt((median(emb.smallPut) * MiB) / SMALL, 0)}, Ceph ${fmt((median(rgw.smallPut) * MiB) / SMALL, 0)}; GET embedded ${fmt((median(emb.smallGet) * MiB) / SMALL, 0)}, Ceph ${fmt((median(rgw.smallGet) * MiB) / SMALL, 0)}.`,
      '',
      `(${rounds} rounds, stores interleaved; @aws-sdk/client-s3 over HTTP on loopback, payloads SHA-256-signed by the client for both; per-round MiB/s embedded/Ceph: ` +
        `64 MiB PUT ${per(emb, 'bigPut')} vs ${per(rgw, 'bigPut')}, GET ${per(emb, 'bigGet')} vs ${per(rgw, 'bigGet')}; ` +
        `4 KiB PUT ${per(emb, 'smallPut')} vs ${per(rgw, 'smallPut')}, GET ${per(emb, 'smallGet')} vs ${per(rgw, 'smallGet')}. ` +
        `Embedded objects and dd under ${os.tmpdir()}, the disk Ceph's OSD uses when started by test/s3/ceph-rgw.sh.)`,
    ].join('\n');
  } finally {
    for (const s of stores) {
      await removeBuckets(s.s3, prefix).catch(() => undefined);
      s.s3.destroy();
    }
    await embedded.close();
    fs.rmSync(objectsDir, { recursive: true, force: true });
  }
}
