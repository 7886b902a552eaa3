/**
 * Phase 1 of an upload of 100 files (issue 4): presigned URLs per second through
 * `POST /api/files/upload` (dashboard session; one HeadBucket to the store, 100 reservations in
 * one transaction, 100 presigned PUTs), against the AWS SDK presigner alone in this process
 * (no HTTP, no database, no store) as the ceiling. Usage: node bench/run.ts upload-presign
 */
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { fmt, median, wrk } from './lib.ts';
import { storageBench, wrkScript } from './storage-setup.ts';

const FILES = 100;

async function presignerAlone(endpoint: string, region: string, accessKeyId: string, secretAccessKey: string, ms: number): Promise<number> {
  const client = new S3Client({
    endpoint,
    region,
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  let n = 0;
  const started = performance.now();
  while (performance.now() - started < ms) {
    await Promise.all(
      Array.from({ length: FILES }, (_, i) =>
        getSignedUrl(
          client,
          new PutObjectCommand({ Bucket: 'bench', Key: `k/${n}/${i}.bin`, ContentType: 'application/octet-stream', ContentLength: 1000 + i }),
          {
            expiresIn: 3600,
            signableHeaders: new Set(['content-type']),
          },
        ),
      ),
    );
    n += FILES;
  }
  client.destroy();
  return n / ((performance.now() - started) / 1000);
}

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 4;
  const bench = await storageBench('presign');
  try {
    const app = await bench.createApp('uploads');
    const body = JSON.stringify({
      appId: app.id,
      prefix: 'bench/batch',
      files: Array.from({ length: FILES }, (_, i) => ({ name: `photo ${String(i).padStart(3, '0')}.jpg`, size: 100_000 + i, type: 'image/jpeg' })),
    });
    const headers = { ...bench.dashboard, 'content-type': 'application/json' };
    const check = await fetch(`${bench.url}/api/files/upload`, { method: 'POST', headers, body });
    if (check.status !== 200) throw new Error(`phase 1: ${check.status} ${await check.text()}`);
    if (((await check.json()) as { uploads: unknown[] }).uploads.length !== FILES) throw new Error('phase 1 answered the wrong number of URLs');

    const script = wrkScript(bench.dataDir, 'presign', {
      method: 'POST',
      body,
      headers: { Cookie: bench.dashboard.cookie!, Origin: bench.dashboard.origin!, 'Content-Type': 'application/json' },
    });
    const urls: number[] = [];
    const p50: number[] = [];
    const p99: number[] = [];
    const alone: number[] = [];
    const { endpoint, region, accessKeyId, secretAccessKey } = bench.target;
    for (let round = 0; round < rounds; round++) {
      wrk(`${bench.url}/api/files/upload`, { seconds: 1, script, connections });
      const r = wrk(`${bench.url}/api/files/upload`, { seconds, script, connections });
      if (r.errors) throw new Error(`${r.errors} errors under load (${bench.stderrTail()})`);
      urls.push(r.rps * FILES);
      p50.push(r.p50ms);
      p99.push(r.p99ms);
      alone.push(await presignerAlone(endpoint, region, accessKeyId, secretAccessKey, seconds * 1000));
    }
    return [
      `| what | presigned URLs/s (median) | request p50 (ms) | request p99 (ms) |`,
      '|---|---|---|---|',
      `| POST /api/files/upload, ${FILES} files per request, wrk -c${connections} | ${fmt(median(urls), 0)} | ${fmt(median(p50))} | ${fmt(median(p99))} |`,
      `| getSignedUrl alone (AWS SDK, in process, ${FILES} at a time) | ${fmt(median(alone), 0)} | | |`,
      '',
      `Wharf / presigner alone: ${fmt(median(urls) / median(alone))}`,
      '',
      `(${rounds} rounds of ${seconds} s, interleaved; per-round URLs/s: Wharf ${urls.map((v) => fmt(v, 0)).join('/')}, presigner ${alone.map((v) => fmt(v, 0)).join('/')})`,
    ].join('\n');
  } finally {
    await bench.cleanup();
  }
}
