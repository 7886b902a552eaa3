/**
 * The Redis store against a real redis-server (test/redis/redis-server.sh; private servers for
 * the tests that pause or kill one): counters shared by instances, what a caller sees while Redis
 * is slow, stopped or gone, start-up without Redis, TLS, and config errors. The headers and 429s
 * themselves are limits.test.ts's, which runs on Redis too.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../../core/config.ts';
import { builtinPlugins } from '../../../plugins/index.ts';
import { startApp, type TestApp, tempDir } from '../../helpers/app.ts';
import { serve, type Served, wharf } from '../../helpers/cli.ts';
import { openRedisStore } from '../../../plugins/rate_limit/redis-store.ts';
import { makeTestTls, type PrivateRedis, rateLimitRedisEnv, startPrivateRedis, type TestTls, testKeyPrefix } from '../../helpers/redis.ts';

/** One rule of 5 per caller on /api/cli (GET /api/cli/config answers anyone); X-Forwarded-For picks the caller. */
const TOML = `
[server]
trust_proxy = true
[plugins.rate_limit.rules.cli]
prefixes = ["/api/cli"]
limit = 5
anonymous = 5
`;

let lastAddress = 0;
/** A caller no other test of this file uses. */
function newAddress(): Record<string, string> {
  return { 'x-forwarded-for': `198.51.100.${++lastAddress}` };
}

interface Seen {
  status: number;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  retryAfter: string | null;
  ms: number;
}

async function call(base: string, headers: Record<string, string>): Promise<Seen> {
  const started = performance.now();
  const res = await fetch(new URL('/api/cli/config', base), { headers });
  await res.arrayBuffer();
  const h = (name: string) => res.headers.get(name);
  return {
    status: res.status,
    limit: h('x-ratelimit-limit'),
    remaining: h('x-ratelimit-remaining'),
    reset: h('x-ratelimit-reset'),
    retryAfter: h('retry-after'),
    ms: performance.now() - started,
  };
}

/** A metric's value from GET /metrics (undefined when absent). */
async function metric(app: TestApp, name: string): Promise<number | undefined> {
  const text = await (await app.fetch('/metrics')).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** Polls `check` (a throw counts as false: the test's own client may be reconnecting too). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const messages = (app: TestApp) => app.logs.map((line) => String(line.msg));

describe('several instances on one Redis', () => {
  const apps: TestApp[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });

  it('share each counter: requests spread over two instances hit the limit at the configured total, with the same headers', async () => {
    const env = await rateLimitRedisEnv(); // one key prefix for both: two instances of one Wharf
    const [a, b] = [await startApp(TOML, { env }), await startApp(TOML, { env })];
    apps.push(a!, b!);
    const address = newAddress();
    const seen: Seen[] = [];
    for (let i = 0; i < 8; i++) seen.push(await call((i % 2 ? b! : a!).url, address));
    expect(seen.map((s) => [s.status, s.limit, s.remaining])).toEqual([
      [200, '5', '4'],
      [200, '5', '3'],
      [200, '5', '2'],
      [200, '5', '1'],
      [200, '5', '0'],
      [429, '5', '0'],
      [429, '5', '0'],
      [429, '5', '0'],
    ]);
    // One window for both: the same end (to the second), and the same wait on either instance.
    const resets = seen.map((s) => Number(s.reset));
    expect(Math.max(...resets) - Math.min(...resets)).toBeLessThanOrEqual(1);
    const waits = seen.filter((s) => s.status === 429).map((s) => Number(s.retryAfter));
    expect(Math.max(...waits) - Math.min(...waits)).toBeLessThanOrEqual(1);
    expect(waits[0]).toBeGreaterThanOrEqual(55);

    // Another Wharf on the same Redis, under a key prefix of its own, counts on its own.
    const other = await startApp(TOML, { env: await rateLimitRedisEnv() });
    apps.push(other);
    expect(await call(other.url, address)).toMatchObject({ status: 200, remaining: '4' });
  });

  it('count concurrent requests exactly once each (the count is one atomic step in Redis)', async () => {
    const env = await rateLimitRedisEnv();
    const [a, b] = [await startApp(TOML, { env }), await startApp(TOML, { env })];
    apps.push(a!, b!);
    const address = newAddress();
    const seen = await Promise.all(Array.from({ length: 30 }, (_, i) => call((i % 2 ? b! : a!).url, address)));
    expect(seen.filter((s) => s.status === 200)).toHaveLength(5);
    expect(seen.filter((s) => s.status === 429)).toHaveLength(25);
    expect(
      seen
        .filter((s) => s.status === 200)
        .map((s) => s.remaining)
        .sort(),
    ).toEqual(['0', '1', '2', '3', '4']);
  });

  it('(control) with the memory store, the same spread gets twice the limit: what the shared store prevents', async () => {
    const [a, b] = [await startApp(TOML), await startApp(TOML)];
    apps.push(a!, b!);
    const address = newAddress();
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await call((i % 2 ? b! : a!).url, address)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
  });

  it('share counters between two `wharf serve` processes', async () => {
    const env = await rateLimitRedisEnv();
    const served: Served[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const dir = tempDir();
        const config = path.join(dir, 'wharf.toml');
        fs.writeFileSync(config, TOML);
        served.push(await serve(['--config', config, '--data-dir', dir], { env, timeoutMs: 60_000 }));
      }
      const address = newAddress();
      const seen = await Promise.all(Array.from({ length: 12 }, (_, i) => call(served[i % 2]!.url, address)));
      expect(seen.filter((s) => s.status === 200)).toHaveLength(5);
      expect(seen.every((s) => s.limit === '5')).toBe(true);
    } finally {
      await Promise.all(served.map((s) => s.stop()));
    }
    // Neither process wrote the Redis URL's password anywhere.
    const password = new URL(env.WHARF_PLUGINS__RATE_LIMIT__REDIS__URL!).password;
    for (const s of served) expect(s.output()).not.toContain(password);
  });
});

describe('when Redis is slow, stopped or gone', () => {
  let redis: PrivateRedis;
  let app: TestApp;
  let keyPrefix: string;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    keyPrefix = testKeyPrefix();
    app = await startApp(TOML, { env: { ...(await rateLimitRedisEnv({ url: redis.url, keyPrefix })), WHARF_PLUGINS__RATE_LIMIT__REDIS__TIMEOUT_MS: '200' } });
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  /** The count Redis holds for a caller of the cli rule (null: none). */
  const countInRedis = (address: Record<string, string>) => redis.client.get(`${keyPrefix}cli:anonymous:ip:${address['x-forwarded-for']}`);

  /** While Redis is out: every request answered quickly, the limit still held (in memory), nothing but 200s and 429s. */
  async function expectServedFromMemory(): Promise<void> {
    const address = newAddress();
    const seen: Seen[] = [];
    for (let i = 0; i < 7; i++) seen.push(await call(app.url, address));
    expect(seen.map((s) => [s.status, s.limit, s.remaining])).toEqual([
      [200, '5', '4'],
      [200, '5', '3'],
      [200, '5', '2'],
      [200, '5', '1'],
      [200, '5', '0'],
      [429, '5', '0'],
      [429, '5', '0'],
    ]);
    // The timeout is 200 ms: no request waits much longer than that (the bound leaves room for a
    // loaded machine). And after one failure requests skip Redis for a second, so the seven together
    // take less than the 1400 ms they would if each waited for its own timeout.
    for (const s of seen) expect(s.ms).toBeLessThan(1500);
    expect(seen.reduce((sum, s) => sum + s.ms, 0)).toBeLessThan(1200);
  }

  async function expectSharedAgain(): Promise<void> {
    await until('Redis to count again', async () => {
      const address = newAddress();
      await call(app.url, address);
      return (await countInRedis(address)) === '1';
    });
    expect(await metric(app, 'wharf_rate_limit_store_up')).toBe(1);
  }

  it('counts in Redis while it answers', async () => {
    const address = newAddress();
    expect(await call(app.url, address)).toMatchObject({ status: 200, remaining: '4' });
    expect(await countInRedis(address)).toBe('1');
    expect(await metric(app, 'wharf_rate_limit_store_up')).toBe(1);
    expect(await metric(app, 'wharf_rate_limit_fallback_total')).toBe(0);
  });

  it('an answer that came in time counts however late this process reads it: a stall past timeout_ms is no outage', async () => {
    const downs: string[] = [];
    let fallbacks = 0;
    const prefix = `${keyPrefix}stall:`;
    const store = await openRedisStore(
      { url: redis.url, keyPrefix: prefix, timeoutMs: 100, connectTimeoutMs: 5000 },
      { down: (reason) => downs.push(reason), up() {}, fallback: () => fallbacks++ },
    );
    try {
      const counter = store.counter({ name: 'probe', limit: 3, windowSeconds: 60 });
      const decisions = [];
      for (let i = 0; i < 4; i++) {
        const pending = counter.consume('caller');
        // The command is sent; then this process does not run for three of its timeouts (as on a
        // loaded machine), while Redis answers at once. Its timer is due before it reads the answer.
        const until = Date.now() + 300;
        while (Date.now() < until) {
          // stalled
        }
        decisions.push(await pending);
      }
      expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
      ]);
      expect(await redis.client.get(`${prefix}probe:caller`)).toBe('4');
      expect(fallbacks).toBe(0);
      expect(downs).toEqual([]);
    } finally {
      await store.close?.();
    }
  });

  it('slow (DEBUG SLEEP): requests wait one short timeout at most, then count in memory; a warning, a metric; shared again after', async () => {
    const before = app.logs.length;
    const sleeping = redis.client.call('DEBUG', 'SLEEP', '3');
    try {
      await new Promise((r) => setTimeout(r, 100)); // the server is inside the sleep
      await expectServedFromMemory();
      expect(await metric(app, 'wharf_rate_limit_store_up')).toBe(0);
      expect(await metric(app, 'wharf_rate_limit_fallback_total')).toBeGreaterThanOrEqual(7);
    } finally {
      await sleeping;
    }
    await expectSharedAgain();
    const lines = app.logs.slice(before);
    const down = lines.filter((l) => String(l.msg).startsWith('rate limit store unavailable'));
    expect(down).toHaveLength(1); // once per outage, not once per request
    expect(down[0]).toMatchObject({ level: 'warn', reason: 'Command timed out' });
    expect(messages(app).slice(before)).toContain('rate limit store answers again; counters are shared again');
  });

  it('stopped (SIGSTOP): the same, and it picks up again after SIGCONT', async () => {
    redis.pause();
    try {
      await expectServedFromMemory();
    } finally {
      redis.resume();
    }
    await expectSharedAgain();
  });

  it('killed: requests never wait for it; once it is back (empty), counters are shared again', async () => {
    await redis.kill();
    await expectServedFromMemory();
    await redis.restart();
    await expectSharedAgain();
  });

  it('never logs the password, through all of the above', () => {
    const text = JSON.stringify(app.logs);
    expect(text).not.toContain(redis.password);
    expect(text).toContain(`redis://127.0.0.1:${redis.port}`); // the server is named, without it
  });
});

describe('start-up', () => {
  it('refuses to start without Redis, in one line naming it (never its password)', async () => {
    const redis = await startPrivateRedis();
    await redis.stop(); // its port is free now: nothing listens there
    const dir = tempDir();
    const r = wharf(['serve', '--data-dir', dir, '--listen', '127.0.0.1:0'], {
      env: {
        ...(await rateLimitRedisEnv({ url: redis.url })),
        WHARF_PLUGINS__RATE_LIMIT__REDIS__CONNECT_TIMEOUT_MS: '2000',
        WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0',
      },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `wharf: plugin "rate_limit" failed to start: cannot reach Redis at redis://127.0.0.1:${redis.port}: connect ECONNREFUSED 127.0.0.1:${redis.port}\n`,
    );
    expect(r.stdout + r.stderr).not.toContain(redis.password);
  });

  it('refuses a wrong password, a server that does not answer, and a user that may not run the limiter', async () => {
    const redis = await startPrivateRedis();
    try {
      const startWith = async (url: string) => {
        try {
          const app = await startApp('', { env: { ...(await rateLimitRedisEnv({ url })), WHARF_PLUGINS__RATE_LIMIT__REDIS__CONNECT_TIMEOUT_MS: '1000' } });
          await app.close();
          return 'started';
        } catch (err) {
          return (err as Error).message;
        }
      };
      const where = `redis://127.0.0.1:${redis.port}`;
      expect(await startWith(`redis://:not-the-password@127.0.0.1:${redis.port}`)).toBe(
        `plugin "rate_limit" failed to start: cannot reach Redis at ${where}: WRONGPASS invalid username-password pair or user is disabled.`,
      );
      await redis.client.call('ACL', 'SETUSER', 'noscripts', 'on', '>noscripts-pw', '~*', '+@all', '-eval', '-evalsha');
      const refused = await startWith(`redis://noscripts:noscripts-pw@127.0.0.1:${redis.port}`);
      expect(refused).toMatch(new RegExp(`^plugin "rate_limit" failed to start: Redis at ${where} refused the rate limiter's commands: NOPERM .*'eval`, 'i'));
      expect(refused).not.toContain('noscripts-pw');
      redis.pause();
      try {
        const started = Date.now();
        expect(await startWith(redis.url)).toBe(
          `plugin "rate_limit" failed to start: cannot reach Redis at ${where}: connected, but no answer in 1000 ms (connect_timeout_ms)`,
        );
        expect(Date.now() - started).toBeLessThan(5000);
      } finally {
        redis.resume();
      }
      expect(await startWith(redis.url)).toBe('started');
      // The permissions the README asks of an ACL user are enough.
      await redis.client.call('ACL', 'SETUSER', 'wharf', 'on', '>wharf-pw', '~wharf-acl:*', '+@read', '+@write', '+eval', '+evalsha', '+info');
      const app = await startApp(TOML, { env: await rateLimitRedisEnv({ url: `redis://wharf:wharf-pw@127.0.0.1:${redis.port}`, keyPrefix: 'wharf-acl:' }) });
      try {
        const address = newAddress();
        expect(await call(app.url, address)).toMatchObject({ status: 200, remaining: '4' });
        expect(await redis.client.get(`wharf-acl:cli:anonymous:ip:${address['x-forwarded-for']}`)).toBe('1');
      } finally {
        await app.close();
      }
    } finally {
      await redis.stop();
    }
  });
});

describe('TLS (rediss://)', () => {
  let tls: TestTls;
  let redis: PrivateRedis;
  beforeAll(async () => {
    tls = await makeTestTls();
    redis = await startPrivateRedis({ tls });
  });
  afterAll(async () => {
    await redis?.stop();
    if (tls) fs.rmSync(tls.dir, { recursive: true, force: true });
  });

  it("counts over TLS, trusting the server's private authority from tls_ca_file", async () => {
    const keyPrefix = testKeyPrefix();
    const app = await startApp(TOML, {
      env: { ...(await rateLimitRedisEnv({ url: redis.url, keyPrefix })), WHARF_PLUGINS__RATE_LIMIT__REDIS__TLS_CA_FILE: tls.ca },
    });
    try {
      const address = newAddress();
      expect(await call(app.url, address)).toMatchObject({ status: 200, remaining: '4' });
      expect(await redis.client.get(`${keyPrefix}cli:anonymous:ip:${address['x-forwarded-for']}`)).toBe('1');
    } finally {
      await app.close();
    }
  });

  it('refuses to start when the certificate is not trusted, and a plain redis:// URL to a TLS port', async () => {
    const message = async (env: Record<string, string>) => {
      try {
        await (await startApp('', { env })).close();
        return 'started';
      } catch (err) {
        return (err as Error).message;
      }
    };
    const env = await rateLimitRedisEnv({ url: redis.url });
    expect(await message({ ...env, WHARF_PLUGINS__RATE_LIMIT__REDIS__CONNECT_TIMEOUT_MS: '1000' })).toMatch(
      /^plugin "rate_limit" failed to start: cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+: .*certificate/,
    );
    const plain = redis.url.replace(/^rediss:/, 'redis:');
    expect(await message({ ...env, WHARF_PLUGINS__RATE_LIMIT__REDIS__URL: plain, WHARF_PLUGINS__RATE_LIMIT__REDIS__CONNECT_TIMEOUT_MS: '1000' })).toMatch(
      /^plugin "rate_limit" failed to start: cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+: /,
    );
  });
});

describe('config', () => {
  const problems = (toml: string, env: Record<string, string> = {}) => {
    try {
      resolveConfig(builtinPlugins, { toml: { text: toml, file: 'test.toml' }, env });
    } catch (err) {
      if (err instanceof ConfigError) return err.lines;
      throw err;
    }
    return [];
  };

  it.each([
    ['store = "redis" without a url', '[plugins.rate_limit]\nstore = "redis"\n', 'test.toml:1: "plugins.rate_limit.redis.url": required when store = "redis"'],
    [
      'a url while the store is memory',
      '[plugins.rate_limit.redis]\nurl = "redis://127.0.0.1:6379"\n',
      'test.toml: "plugins.rate_limit.store": is "memory" but redis.url is set: set store = "redis" to use that Redis, or remove redis.url',
    ],
    [
      'a url that is not Redis, which is not repeated (it may hold a password)',
      '[plugins.rate_limit]\nstore = "redis"\n[plugins.rate_limit.redis]\nurl = "https://:hunter2@cache.example:6379"\n',
      'test.toml:4: "plugins.rate_limit.redis.url": expected redis://[[user]:password@]host[:port][/db], or rediss://... for TLS',
    ],
    [
      'a database that is not a number',
      '[plugins.rate_limit]\nstore = "redis"\n[plugins.rate_limit.redis]\nurl = "redis://:hunter2@cache.example:6379/cache"\n',
      'test.toml:4: "plugins.rate_limit.redis.url": expected redis://[[user]:password@]host[:port][/db], or rediss://... for TLS',
    ],
    [
      'a certificate authority without TLS',
      '[plugins.rate_limit]\nstore = "redis"\n[plugins.rate_limit.redis]\nurl = "redis://cache.example"\ntls_ca_file = "/etc/ssl/ca.pem"\n',
      'test.toml:5: "plugins.rate_limit.redis.tls_ca_file": needs a rediss:// url (TLS)',
    ],
  ])('%s', (_name, toml, line) => {
    expect(problems(toml)).toEqual([line]);
  });

  it('accepts a URL with a user, a password, a database and TLS, from the environment', () => {
    expect(
      problems('[plugins.rate_limit]\nstore = "redis"\n', { WHARF_PLUGINS__RATE_LIMIT__REDIS__URL: 'rediss://wharf:s3cret@redis.internal:6380/2' }),
    ).toEqual([]);
  });
});
