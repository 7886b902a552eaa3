/**
 * Phase 1 of an upload of 100 files (issues 4 and 16): presigned URLs per second through
 * `POST /api/files/upload` (dashboard session; one HeadBucket to the store, 100 reservations in
 * one transaction, 100 presigned PUTs, the request log and metrics on) against the bare baseline
 * of issue 16: node:http + better-sqlite3 + a hand-written SigV4 signer on node:crypto
 * (bench/baselines/upload-presign.mjs: JSON body, token lookup, 100 presigned PUTs). Both pinned
 * to the same core, rounds interleaved; reports the median of the rounds' ratios and the CPU time
 * each server spent per URL. Usage: node bench/run.ts upload-presign
 * (BENCH_DRIVER=fs: the embedded store; BENCH_BEFORE=DIR: also Wharf from the checkout in DIR, say
 * main's, as a fourth server in the same rounds, to compare before and after a change;
 * BENCH_DATABASE=postgres: the Wharf servers each on a fresh PostgreSQL database, the baselines
 * still on SQLite, on the file of a third, idle Wharf that made their app and token).
 */
import fs from 'node:fs';
import path from 'node:path';
import { cpuMicros, fmt, median, medianRatio, node, root, startServer, wrk } from './lib.ts';
import { freshDatabase } from '../test/helpers/postgres.ts';
import { type StorageBench, storageBench, wrkScript } from './storage-setup.ts';

const FILES = 100;

export async function run(options: { rounds?: number; seconds?: number; connections?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? 4;
  const driver = process.env.BENCH_DRIVER === 'fs' ? 'fs' : 's3';
  const postgres = process.env.BENCH_DATABASE === 'postgres';
  const database = async (): Promise<Record<string, string>> =>
    postgres ? { WHARF_DATABASE__URL: await freshDatabase(), ...(driver === 'fs' ? { WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true' } : {}) } : {};
  const engine = postgres ? ', PostgreSQL' : '';
  const bench = await storageBench('presign', await database());
  const beforeDir = process.env.BENCH_BEFORE;
  let before: StorageBench | undefined;
  let bareBench: StorageBench | undefined;
  try {
    const app = await bench.createApp('uploads');
    const body = JSON.stringify({
      appId: app.id,
      prefix: 'bench/batch',
      files: Array.from({ length: FILES }, (_, i) => ({ name: `photo ${String(i).padStart(3, '0')}.jpg`, size: 100_000 + i, type: 'image/jpeg' })),
    });
    const phase1 = async (b: StorageBench, appId: string): Promise<{ presignedUrl: string }[]> => {
      const res = await fetch(`${b.url}/api/files/upload`, {
        method: 'POST',
        headers: { ...b.dashboard, 'content-type': 'application/json' },
        body: body.replace(app.id, appId),
      });
      if (res.status !== 200) throw new Error(`phase 1: ${res.status} ${await res.text()}`);
      const uploads = ((await res.json()) as { uploads: { presignedUrl: string }[] }).uploads;
      if (uploads.length !== FILES) throw new Error('phase 1 answered the wrong number of URLs');
      return uploads;
    };
    const sample = await phase1(bench, app.id);
    const wharfCase = (b: StorageBench, appId: string, name: string) => ({
      name,
      url: `${b.url}/api/files/upload`,
      pid: b.server.child.pid!,
      tail: () => b.stderrTail(),
      script: wrkScript(bench.dataDir, `presign-${b.server.child.pid}`, {
        method: 'POST',
        body: body.replace(app.id, appId),
        headers: { Cookie: b.dashboard.cookie!, Origin: b.dashboard.origin!, 'Content-Type': 'application/json' },
      }),
    });
    let beforeCase: ReturnType<typeof wharfCase> | undefined;
    if (beforeDir) {
      before = await storageBench('presign-before', await database(), path.resolve(beforeDir));
      const beforeApp = await before.createApp('uploads');
      await phase1(before, beforeApp.id);
      beforeCase = wharfCase(before, beforeApp.id, `wharf serve (${beforeDir}, ${driver} driver${engine})`);
    }
    // The baselines look the token up in a SQLite file.
    if (postgres) bareBench = await storageBench('presign-bare');
    const bare = bareBench ?? bench;
    const bareApp = bareBench ? await bareBench.createApp('uploads') : app;
    const token = await bare.createToken(bareApp.id);
    const bareBody = body.replace(app.id, bareApp.id);

    const { endpoint, region, accessKeyId, secretAccessKey } = bench.target;
    const publicEndpoint = new URL(sample[0]!.presignedUrl).origin;
    const target = JSON.stringify({ endpoint: driver === 'fs' ? publicEndpoint : endpoint, region, accessKeyId, secretAccessKey });
    const bareServer = (reserve: boolean) =>
      startServer({
        name: reserve ? 'the same + the 100 reservations in one transaction' : 'bare node:http + better-sqlite3 + SigV4 on node:crypto',
        argsFor: (port) => [node, [path.join(root, 'bench/baselines/upload-presign.mjs'), String(port), bare.dbPath, target, ...(reserve ? ['reserve'] : [])]],
      });
    const baseline = await bareServer(false);
    const reserving = await bareServer(true);
    try {
      const first = await fetch(`${baseline.url}/api/files/upload`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: bareBody,
      });
      const bareUrls = ((await first.json()) as { uploads: { presignedUrl: string }[] }).uploads;
      if (first.status !== 200 || bareUrls.length !== FILES) throw new Error(`baseline: ${first.status}`);
      // The baseline's URL must be accepted by the store like Wharf's (s3 driver: Ceph RGW checks it).
      if (driver !== 'fs') {
        const put = await fetch(bareUrls[0]!.presignedUrl, { method: 'PUT', headers: { 'content-type': 'image/jpeg' }, body: Buffer.alloc(100_000) });
        if (put.status !== 200) throw new Error(`the store refused the baseline's URL: ${put.status} ${await put.text()}`);
      }
      const bareScript = wrkScript(bench.dataDir, 'presign-bare', {
        method: 'POST',
        body: bareBody,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      });
      const cases: { name: string; url: string; pid: number; script: string; tail?: () => string }[] = [
        {
          name: baseline.name,
          url: `${baseline.url}/api/files/upload`,
          pid: baseline.child.pid!,
          script: bareScript,
        },
        wharfCase(bench, app.id, `wharf serve (source, ${driver} driver${engine})`),
        { name: reserving.name, url: `${reserving.url}/api/files/upload`, pid: reserving.child.pid!, script: bareScript },
        ...(beforeCase ? [beforeCase] : []),
      ];
      const urls = cases.map(() => [] as number[]);
      const p50 = cases.map(() => [] as number[]);
      const cpu = cases.map(() => [] as number[]);
      for (let round = 0; round < rounds; round++) {
        for (const [i, c] of cases.entries()) {
          wrk(c.url, { seconds: 1, script: c.script, connections }); // warm-up
          const before = cpuMicros(c.pid);
          const r = wrk(c.url, { seconds, script: c.script, connections });
          if (r.errors) throw new Error(`${c.name}: ${r.errors} errors under load: ${r.errorText} (${c.tail?.() ?? ''})`);
          cpu[i]!.push((cpuMicros(c.pid) - before) / (r.rps * seconds * FILES));
          urls[i]!.push(r.rps * FILES);
          p50[i]!.push(r.p50ms);
        }
      }
      for (const c of new Set(cases.map((c) => c.script))) fs.rmSync(c, { force: true });
      const lines = ['| server | presigned URLs/s (median) | request p50 (ms) | CPU µs per URL (median) |', '|---|---|---|---|'];
      for (const [i, c] of cases.entries()) lines.push(`| ${c.name} | ${fmt(median(urls[i]!), 0)} | ${fmt(median(p50[i]!))} | ${fmt(median(cpu[i]!), 1)} |`);
      lines.push(
        '',
        `**Wharf / baseline: ${fmt(medianRatio(urls[1]!, urls[0]!))}** URLs/s (median of the rounds' ratios; aim at least 0.5); CPU per URL, baseline / Wharf: ${fmt(medianRatio(cpu[0]!, cpu[1]!))}.`,
        '',
        `Against the baseline that also records the reservations: Wharf / it ${fmt(medianRatio(urls[1]!, urls[2]!))} URLs/s, CPU per URL it / Wharf ${fmt(medianRatio(cpu[2]!, cpu[1]!))}.`,
        ...(beforeCase
          ? [
              '',
              `Before (${beforeDir}) / baseline: ${fmt(medianRatio(urls[3]!, urls[0]!))} URLs/s, CPU per URL baseline / before ${fmt(medianRatio(cpu[0]!, cpu[3]!))}; this / before: ${fmt(medianRatio(urls[1]!, urls[3]!))} URLs/s, CPU per URL before / this ${fmt(medianRatio(cpu[3]!, cpu[1]!))}.`,
            ]
          : []),
        '',
        `(${rounds} rounds of ${seconds} s, interleaved; ${FILES} files per request, wrk -t1 -c${connections}; per-round URLs/s: ${cases
          .map((c, i) => `${c.name} ${urls[i]!.map((v) => fmt(v, 0)).join('/')}`)
          .join('; ')})`,
      );
      return lines.join('\n');
    } finally {
      await baseline.stop();
      await reserving.stop();
    }
  } finally {
    await before?.cleanup();
    await bareBench?.cleanup();
    await bench.cleanup();
  }
}
