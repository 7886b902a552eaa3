// Test helper: several `wharf serve` processes as one Wharf, the way the README's "Deployment:
// several instances" section runs them.
//
// - One PostgreSQL database (a fresh one, test/helpers/postgres.ts, or one given) for every instance.
// - One Redis (the shared test server, test/helpers/redis.ts) for the rate-limit counters, under
//   a key prefix of the cluster's own.
// - One config file for all (--config), and per instance only its data dir and port.
// - The same keys everywhere: generated once (core/keys.ts loadKeys), or those of a moved instance,
//   and the key files copied into each data dir's keys/, as an operator copies them. Session
//   cookies and encrypted columns made by one instance are read by the others.
// - A load balancer in front (test/helpers/balancer.ts: round robin over the instances up,
//   a refused connection tried on the next instance), whose URL is every instance's public URL:
//   it issues the session cookies, so a cookie from one instance is valid on all. Tests send
//   requests through it (`cluster.url`), or straight to one instance (`instance.url`, with that
//   URL as Origin) to choose which.
// - Only the plugins that run on PostgreSQL (postgresPlugins()); the others are disabled until
//   their port lands. Once storage runs there, it is on the s3 driver against the test S3 server
//   (Ceph RGW, test/helpers/s3.ts) with a bucket prefix of the cluster's own.
//
// Tests of takeovers (webhook deliveries, messaging sessions, uploads) add their plugins' settings
// with `toml`/`env`, drive a client through `cluster.url` and kill()/restart() instances under it;
// `running()` says which instances are up.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { loadKeys } from '../../core/keys.ts';
import { tempDir } from './app.ts';
import { startBalancer } from './balancer.ts';
import { serve, type Served, wharfAsync } from './cli.ts';
import { freshDatabase, postgresPlugins } from './postgres.ts';
import { ensureRedis, testKeyPrefix } from './redis.ts';
import { ensureS3 } from './s3.ts';
import { storageToml, uniquePrefix } from './storage.ts';

export interface ClusterOptions {
  /** How many instances (default 2). */
  instances?: number;
  /**
   * More of the shared config file (TOML), after the cluster's own sections. Tables the cluster
   * writes ([server], [database], [plugins.rate_limit], [plugins.rate_limit.redis],
   * [plugins.identity], and storage's once it runs) cannot be opened again: set their keys with `env`.
   */
  toml?: string;
  /** More WHARF_* variables, for every instance. */
  env?: Record<string, string>;
  /** An existing database (one `wharf migrate-data` filled, say) instead of a fresh one. */
  databaseUrl?: string;
  /** A `keys/` directory to copy into every data dir (that database's) instead of new keys. */
  keysDir?: string;
}

export interface Instance {
  readonly index: number;
  readonly dataDir: string;
  /** Where this instance listens now (a new port after a restart); throws when it is down. */
  readonly url: string;
  readonly up: boolean;
  /** Its process id now; throws when it is down. */
  readonly pid: number;
  /** Its output so far (all its runs). */
  output(): string;
  /** SIGKILL: no drain, no cleanup (its serve.pid stays behind); resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (SIGKILL after 15 s): a clean stop; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Starts it again on its data dir (a new port); resolves once /healthz answers. */
  restart(): Promise<void>;
}

export interface Cluster {
  instances: Instance[];
  /** The load balancer in front of the instances that are up (the public URL). */
  url: string;
  /** Requests the balancer gave each instance (by index), and those it tried again on another. */
  balanced(): { served: number[]; retried: number };
  /** The shared database. */
  databaseUrl: string;
  redisUrl: string;
  /** The public URL every instance is configured with: the balancer's. */
  publicUrl: string;
  /** The shared config file. */
  configFile: string;
  /** The variables every instance runs with (database, plugins off, key prefix...). */
  env: Record<string, string>;
  /** The instances up now. */
  running(): Instance[];
  /** Runs a `wharf` command (admin, migrate...) against the cluster's database and config. */
  command(args: string[], input?: string): ReturnType<typeof wharfAsync>;
  /** Creates a user owning a new organization (`wharf admin create-user --org`); its email and password. */
  createUser(org: string): Promise<{ email: string; password: string }>;
  /** Stops every instance. */
  close(): Promise<void>;
}

/**
 * Storage on the s3 driver against the test S3 server once storage runs on PostgreSQL (the
 * storage tests' own sections, with a bucket prefix of the cluster's); until then only the
 * identity settings those sections start with (a cheap password hash for the tests).
 */
async function pluginSections(): Promise<string> {
  if (!postgresPlugins().runs.includes('storage')) return '[plugins.identity]\nscrypt_cost = 1024';
  return storageToml(await ensureS3(), { prefix: uniquePrefix('cluster'), storage: 'driver = "s3"' });
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const count = options.instances ?? 2;
  const root = tempDir('wharf-cluster-');
  const [databaseUrl, redisUrl] = await Promise.all([options.databaseUrl ?? freshDatabase(), ensureRedis()]);
  const instances: (Instance & { start(): Promise<void> })[] = [];
  const balancer = await startBalancer(() =>
    instances.map((i) => ({
      index: i.index,
      target: i.up ? i.url : undefined,
    })),
  );
  const publicUrl = balancer.url;
  const configFile = path.join(root, 'wharf.toml');
  fs.writeFileSync(
    configFile,
    [
      '[server]',
      `public_url = "${publicUrl}"`,
      '[database]',
      `url = "${databaseUrl}"`,
      '[plugins.rate_limit]',
      'store = "redis"',
      '[plugins.rate_limit.redis]',
      `url = "${redisUrl}"`,
      `key_prefix = "${testKeyPrefix()}"`,
      await pluginSections(),
      options.toml ?? '',
      '',
    ].join('\n'),
  );
  const env: Record<string, string> = {
    ...Object.fromEntries(postgresPlugins().not.map((name) => [`WHARF_PLUGINS__${name.toUpperCase()}__ENABLED`, 'false'])),
    ...options.env,
  };
  // The keys, made once (or given) and copied into every data dir.
  let keysDir = options.keysDir;
  if (!keysDir) {
    loadKeys(path.join(root, 'seed'));
    keysDir = path.join(root, 'seed', 'keys');
  }
  const dataDirs = Array.from({ length: count }, (_, i) => {
    const dir = path.join(root, `instance-${i}`);
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.cpSync(keysDir, path.join(dir, 'keys'), { recursive: true });
    return dir;
  });
  const args = (dataDir: string) => ['--config', configFile, '--data-dir', dataDir];

  for (const [index, dataDir] of dataDirs.entries()) {
    let served: Served | undefined;
    let earlier = '';
    instances.push({
      index,
      dataDir,
      get url() {
        if (!served) throw new Error(`instance ${index} is down`);
        return served.url;
      },
      get up() {
        return served !== undefined;
      },
      get pid() {
        if (!served) throw new Error(`instance ${index} is down`);
        return served.child.pid!;
      },
      output: () => earlier + (served?.output() ?? ''),
      async start() {
        served = await serve(args(dataDir), { env, timeoutMs: 60_000 });
      },
      async kill() {
        if (!served) return;
        const s = served;
        served = undefined;
        earlier += s.output();
        await s.stop('SIGKILL');
      },
      async stop() {
        if (!served) return null;
        const s = served;
        served = undefined;
        earlier += s.output();
        const timer = setTimeout(() => s.child.kill('SIGKILL'), 15_000);
        try {
          return await s.stop('SIGTERM');
        } finally {
          clearTimeout(timer);
        }
      },
      async restart() {
        if (served) throw new Error(`instance ${index} is up`);
        await this.start();
      },
    });
  }
  const cluster: Cluster = {
    instances,
    url: balancer.url,
    balanced: () => ({ served: [...balancer.served], retried: balancer.retried }),
    databaseUrl,
    redisUrl,
    publicUrl,
    configFile,
    env,
    running: () => instances.filter((i) => i.up),
    command: (argv, input) => wharfAsync([...argv, ...args(dataDirs[0]!)], { env, input }),
    async createUser(org) {
      const email = `user-${randomUUID().slice(0, 8)}@example.test`;
      const password = 'correct horse battery staple';
      const r = await cluster.command(['admin', 'create-user', '--email', email, '--password-stdin', '--org', org], password);
      if (r.status !== 0) throw new Error(`admin create-user failed: ${r.stderr}`);
      return { email, password };
    },
    async close() {
      await Promise.all(instances.map((i) => i.stop()));
      await balancer.close();
    },
  };
  try {
    // Together, as a deployment starts them: the migrations run once (the advisory lock), the others wait.
    await Promise.all(instances.map((i) => i.start()));
  } catch (err) {
    await cluster.close();
    throw err;
  }
  return cluster;
}
