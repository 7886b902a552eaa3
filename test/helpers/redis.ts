// Test helper: a real Redis for the tests.
//
// - REDIS_URL set: use that server (redis://[:password@]host:port) after checking that it answers.
// - otherwise: `bash test/redis/redis-server.sh up` brings up (or finds) the project's redis-server
//   on 127.0.0.1:6390, installing Debian's package first when it is missing. The script is
//   idempotent and serialised with flock, so concurrent test workers and worktrees share one server.
//
// Tests never meet on it: each app gets a key prefix of its own (rateLimitRedisEnv). A test that
// stops, pauses or kills Redis starts a private redis-server of its own (startPrivateRedis), never
// the shared one. Never skips: if no Redis can be had, ensureRedis() throws with the script's output.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { freePort } from './cli.ts';
import { ensureDebianTool } from './debian.ts';
import { runUpScript } from './fixture-script.ts';

const SCRIPT = fileURLToPath(new URL('../redis/redis-server.sh', import.meta.url));

let pending: Promise<string> | undefined;

/** The URL of a reachable Redis, password included; memoised per process (a failed attempt is not). */
export function ensureRedis(): Promise<string> {
  pending ??= resolveUrl().catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

async function resolveUrl(): Promise<string> {
  const url = process.env.REDIS_URL || (await runUpScript(SCRIPT, 'ensureRedis', 'the test Redis', 'REDIS_URL'));
  await assertAnswers(url, process.env.REDIS_URL ? 'REDIS_URL' : SCRIPT);
  return url;
}

async function assertAnswers(url: string, source: string): Promise<void> {
  const client = redisClient(url);
  try {
    await client.connect();
    const pong = await client.ping();
    if (pong !== 'PONG') throw new Error(`PING answered ${pong}`);
  } catch (err) {
    throw new Error(`ensureRedis: Redis at ${url.replace(/\/\/[^@]*@/, '//')} (from ${source}) does not answer: ${(err as Error).message}`);
  } finally {
    client.disconnect();
  }
}

/** A client for the test itself (to look at keys, or to pause the server): connects on first use. */
export function redisClient(url: string, caFile?: string): Redis {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    ...(caFile ? { tls: { ca: fs.readFileSync(caFile) } } : {}),
  });
  client.on('error', () => {}); // failures surface as rejected commands
  return client;
}

/** A key prefix no other test uses. */
export function testKeyPrefix(): string {
  return `wharf-test:${randomUUID()}:`;
}

/**
 * WHARF_* variables for an app whose rate limit counts in Redis (the shared test server unless
 * `url` is given), under `keyPrefix` (a fresh one unless given: two apps given the same one share
 * counters, as instances of one Wharf do).
 */
export async function rateLimitRedisEnv(options: { url?: string; keyPrefix?: string } = {}): Promise<Record<string, string>> {
  return {
    WHARF_PLUGINS__RATE_LIMIT__STORE: 'redis',
    WHARF_PLUGINS__RATE_LIMIT__REDIS__URL: options.url ?? (await ensureRedis()),
    WHARF_PLUGINS__RATE_LIMIT__REDIS__KEY_PREFIX: options.keyPrefix ?? testKeyPrefix(),
  };
}

/**
 * The store the rate-limit tests run against: memory by default; Redis when WHARF_TEST_RATE_LIMIT_STORE
 * is "redis" (the vitest project "rate limit on redis" runs the same tests that way).
 */
export async function rateLimitStoreEnv(): Promise<Record<string, string>> {
  return process.env.WHARF_TEST_RATE_LIMIT_STORE === 'redis' ? rateLimitRedisEnv() : {};
}

export interface PrivateRedis {
  port: number;
  password: string;
  /** redis://:password@127.0.0.1:port, or rediss:// when started with TLS. */
  url: string;
  /** Its own client, for the test. */
  client: Redis;
  /** SIGKILL, and wait until it is gone: the port refuses connections. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is saved). */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: it keeps its connections and its port but answers nothing. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** PEM files of a server certificate for 127.0.0.1 and localhost, and of the authority that signed it. */
export interface TestTls {
  ca: string;
  cert: string;
  key: string;
  /** The directory holding them, to remove once done. */
  dir: string;
}

/** A fresh certificate authority and a server certificate it signed (openssl), in a temporary directory. */
export async function makeTestTls(): Promise<TestTls> {
  const openssl = await ensureDebianTool('/usr/bin/openssl', 'openssl');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-test-tls-'));
  const file = (name: string) => path.join(dir, name);
  const run = (args: string[]) => execFileSync(openssl, args, { cwd: dir, stdio: 'pipe' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=wharf test CA', '-keyout', file('ca.key'), '-out', file('ca.pem')]);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', file('server.key'), '-out', file('server.csr')]);
  fs.writeFileSync(file('san.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\n');
  run([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    file('san.ext'),
    '-out',
    file('server.pem'),
  ]);
  return { ca: file('ca.pem'), cert: file('server.pem'), key: file('server.key'), dir };
}

/**
 * A redis-server of the test's own on a free loopback port, for tests that stop, pause or kill
 * it; with `tls`, it speaks only TLS on that port. Uses the binary the shared server's script
 * installed (so it calls ensureRedis() first).
 */
export async function startPrivateRedis(options: { tls?: TestTls } = {}): Promise<PrivateRedis> {
  await ensureRedis();
  const port = await freePort();
  const { tls } = options;
  const password = `pw-${randomUUID()}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-test-redis-private-'));
  // The password in a file, not on the command line.
  const conf = path.join(dir, 'redis.conf');
  fs.writeFileSync(
    conf,
    [
      'bind 127.0.0.1',
      ...(tls
        ? ['port 0', `tls-port ${port}`, `tls-cert-file ${tls.cert}`, `tls-key-file ${tls.key}`, `tls-ca-cert-file ${tls.ca}`, 'tls-auth-clients no']
        : [`port ${port}`]),
      'daemonize no',
      `dir ${dir}`,
      'save ""',
      'appendonly no',
      `requirepass ${password}`,
      'enable-debug-command local',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  let child: ChildProcess | undefined;
  let log = '';
  const url = `${tls ? 'rediss' : 'redis'}://:${password}@127.0.0.1:${port}`;
  const client = redisClient(url, tls?.ca);

  async function launch(): Promise<void> {
    const started = spawn('redis-server', [conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    started.stdout!.on('data', (d) => (log += d));
    started.stderr!.on('data', (d) => (log += d));
    child = started;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`private redis-server exited (${started.exitCode}):\n${log}`);
      const probe = redisClient(url, tls?.ca);
      try {
        await probe.connect();
        if ((await probe.ping()) === 'PONG') return;
      } catch {
        // not yet
      } finally {
        probe.disconnect();
      }
      if (Date.now() > deadline) throw new Error(`private redis-server did not answer on ${port}:\n${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function kill(): Promise<void> {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise((resolve) => current.once('exit', resolve));
    current.kill('SIGKILL');
    await exited;
  }

  await launch();
  return {
    port,
    password,
    url,
    client,
    kill,
    restart: launch,
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    async stop() {
      client.disconnect();
      child?.kill('SIGCONT');
      await kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
