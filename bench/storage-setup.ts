import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { builtinPlugins } from '../plugins/index.ts';
import { ensureS3, s3Client, type S3Target } from '../test/helpers/s3.ts';
import { removeBuckets } from '../test/helpers/storage.ts';
import { benchCookie, createBenchUser, node, profiling, root, type Server, startServer } from './lib.ts';

export interface StorageBench {
  target: S3Target;
  dataDir: string;
  dbPath: string;
  server: Server;
  url: string;
  /** Dashboard headers: the `__session` cookie and a same-origin Origin. */
  dashboard: Record<string, string>;
  createApp(name: string): Promise<{ id: string; bucketName: string }>;
  createToken(appId: string): Promise<string>;
  /** Stops the server (it can be started again with `restart`). */
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** Stops everything and removes the buckets and the data dir. */
  cleanup(): Promise<void>;
  /** The last lines the server wrote on stderr, for error messages. */
  stderrTail(): string;
}

/** Creates an app (its bucket) through the dashboard API at `url`, with `dashboard`'s cookie and Origin. */
export async function createApp(url: string, dashboard: Record<string, string>, name: string): Promise<{ id: string; bucketName: string }> {
  const res = await fetch(`${url}/api/apps`, {
    method: 'POST',
    headers: { ...dashboard, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (res.status !== 201) throw new Error(`create app: ${res.status} ${await res.text()}`);
  return (await res.json()) as { id: string; bucketName: string };
}

/** Creates an upload token for `appId` through the dashboard API at `url`; the token. */
export async function createToken(url: string, dashboard: Record<string, string>, appId: string): Promise<string> {
  const res = await fetch(`${url}/api/tokens`, {
    method: 'POST',
    headers: { ...dashboard, 'content-type': 'application/json' },
    body: JSON.stringify({ appId, name: 'bench' }),
  });
  if (res.status !== 201) throw new Error(`create token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/**
 * A storage bench: a fresh data dir, the bench user, `wharf serve` started; `env` for the server
 * and its commands (e.g. WHARF_DATABASE__URL); `sources`: the checkout whose bin/wharf.ts runs
 * (this one by default; another, say main's, to compare before and after in one run).
 */
export async function storageBench(tag: string, env: Record<string, string> = {}, sources = root): Promise<StorageBench> {
  const target = await ensureS3();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-bench-${tag}-`));
  const prefix = `wb-${tag}-${randomBytes(3).toString('hex')}-`;
  const config = path.join(dataDir, 'wharf.toml');
  // Benchmarks measure the storage code: the limiter (when this build has it) would refuse the load.
  const rateLimit = builtinPlugins.some((p) => p.name === 'rate_limit') ? '[plugins.rate_limit]\nenabled = false\n' : '';
  // BENCH_DRIVER=fs: the embedded store of the server itself instead of the s3 driver on the target.
  const store =
    process.env.BENCH_DRIVER === 'fs'
      ? 'driver = "fs"\n[plugins.storage.fs]\nlisten = "127.0.0.1:0"\n'
      : `[plugins.storage.s3]\nendpoint = "${target.endpoint}"\nregion = "${target.region}"\naccess_key = "${target.accessKeyId}"\nsecret_key = "${target.secretAccessKey}"\n`;
  fs.writeFileSync(config, `[log]\nlevel = "info"\n${rateLimit}[plugins.storage]\nbucket_prefix = "${prefix}"\n${store}`);
  const wharf = path.join(sources, 'bin/wharf.ts');
  createBenchUser([node, [wharf]], dataDir, ['--config', config], env);
  const spec = {
    name: 'wharf serve (source)',
    env,
    argsFor: (port: number): [string, string[]] => [
      node,
      [...profiling(), wharf, 'serve', '--config', config, '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir],
    ],
  };
  let stderr = '';
  const watch = (s: Server) => s.child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  let server = await startServer(spec);
  watch(server);
  const cookie = await benchCookie(server.url);

  const bench: StorageBench = {
    target,
    dataDir,
    dbPath: path.join(dataDir, 'wharf.db'),
    server,
    url: server.url,
    dashboard: { cookie, origin: server.url },
    createApp: (name) => createApp(bench.url, bench.dashboard, name),
    createToken: (appId) => createToken(bench.url, bench.dashboard, appId),
    async stop() {
      await server.stop();
    },
    async restart() {
      server = await startServer(spec);
      watch(server);
      bench.server = server;
      bench.url = server.url;
      // A session cookie is bound to the server's URL; the new port needs a new sign-in.
      bench.dashboard = { cookie: await benchCookie(server.url), origin: server.url };
    },
    stderrTail: () => `exit code ${server.child.exitCode}; stderr: ${stderr}`,
    async cleanup() {
      if (server.child.exitCode === null) await server.stop();
      const s3 = s3Client(target);
      try {
        await removeBuckets(s3, prefix);
      } finally {
        s3.destroy();
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return bench;
}

/** Percentile of sorted samples (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** A wrk Lua script that sends one request shape; removed by the caller. */
export function wrkScript(dir: string, name: string, request: { method: string; body?: string; headers?: Record<string, string> }): string {
  const file = path.join(dir, `${name}.lua`);
  const lines = [`wrk.method = ${JSON.stringify(request.method)}`];
  if (request.body !== undefined) lines.push(`wrk.body = ${luaString(request.body)}`);
  for (const [k, v] of Object.entries(request.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${luaString(v)}`);
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function luaString(text: string): string {
  return `[==[${text}]==]`;
}
