import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, resolveConfig, type AnyPlugin } from '../../../core/config.ts';
import { WharfError } from '../../../core/errors.ts';
import { definePlugin } from '../../../core/plugin.ts';
import { AccessTokens } from '../../../plugins/identity/access-tokens.ts';
import { builtinPlugins } from '../../../plugins/index.ts';
import { rateLimitConfig } from '../../../plugins/rate_limit/config.ts';
import { addressKey, compileRules, principalKey, rateLimiter } from '../../../plugins/rate_limit/middleware.ts';
import type { RateLimitStore } from '../../../plugins/rate_limit/store.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { signIn } from '../../helpers/identity.ts';
import { probePlugin } from '../../helpers/plugins.ts';
import { ensureRedis, rateLimitStoreEnv, redisClient } from '../../helpers/redis.ts';

/**
 * Principals of the kinds other plugins are adding (pat, sessionKey, appToken) and of a future
 * kind, from bearer tokens `tk_<kind>_<id>`: the limiter must key them without knowing them.
 */
const kindsPlugin: AnyPlugin = definePlugin({
  name: 'kinds',
  description: 'test principals of any kind',
  config: z.strictObject({}),
  setup({ auth, api }) {
    auth.register({
      name: 'test:kinds',
      source: { bearer: (token) => token.startsWith('tk_') },
      resolve(token) {
        const [, kind = '', id = ''] = token.split('_');
        if (kind === 'throw') throw new WharfError('forbidden', 'Not a member of that organization');
        const principals: Record<string, Record<string, unknown>> = {
          pat: { kind: 'pat', patId: id, orgId: 'o1', userId: 'u1' },
          sessionKey: { kind: 'sessionKey', sessionId: Number(id), orgId: 'o1' },
          appToken: { kind: 'appToken', appId: id, orgId: 'o1' },
          robot: { kind: 'robot', id },
          mystery: { kind: 'mystery' },
        };
        return (principals[kind] ?? null) as never;
      },
    });
    const group = api.group({ prefixes: ['/kinds'], envelope: 'messaging' });
    group.route({
      method: 'GET',
      path: '/kinds/me',
      summary: 'me',
      tag: 'Test',
      auth: { kinds: 'any', needs: 'credential', schemes: [] },
      handler(ctx, { auth }) {
        ctx.body = auth;
      },
    });
    return { routes: [group] };
  },
});

const plugins = [...builtinPlugins, probePlugin, kindsPlugin];

const TOML = `
[server]
body_limit_bytes = 2048
trust_proxy = true
[plugins.identity]
scrypt_cost = 1024
[plugins.example]
enabled = true
[plugins.rate_limit.rules.default]
limit = 10000
anonymous = 10000
[plugins.rate_limit.rules.login]
limit = 10000
anonymous = 10000
[plugins.rate_limit.rules.cli]
prefixes = ["/api/cli"]
limit = 5
anonymous = 4
kinds = { oauth = 6 }
[plugins.rate_limit.rules.probe]
prefixes = ["/plain", "/msg"]
limit = 3
[plugins.rate_limit.rules.kinds]
prefixes = ["/kinds"]
limit = 5
anonymous = 4
kinds = { pat = 7 }
[plugins.rate_limit.rules.quick]
prefixes = ["/example"]
limit = 2
window_seconds = 2
`;

let app: TestApp;
beforeAll(async () => {
  app = await startApp(TOML, { plugins, env: await rateLimitStoreEnv() });
});
afterAll(() => app.close());

/** Every test counts anonymous calls from an address of its own (trust_proxy is on). */
let lastAddress = 0;
function newAddress(): Record<string, string> {
  return { 'x-forwarded-for': `203.0.113.${++lastAddress}` };
}

function limits(res: { headers: Headers }) {
  const h = (name: string) => res.headers.get(name);
  return { limit: h('x-ratelimit-limit'), remaining: h('x-ratelimit-remaining'), reset: h('x-ratelimit-reset') };
}

async function remainingOf(method: string, path: string, headers: Record<string, string>, times: number) {
  const out: { status: number; limit: string | null; remaining: string | null }[] = [];
  for (let i = 0; i < times; i++) {
    const res = await app.request(method, path, { headers });
    const { limit, remaining } = limits(res);
    out.push({ status: res.status, limit, remaining });
  }
  return out;
}

async function oauthBearer(userId: string, orgId: string): Promise<string> {
  const tokens = new AccessTokens(app.running.keys, app.running.config.core.server.public_url, 3600);
  return `Bearer ${await tokens.issue({ userId, orgId })}`;
}

/** These tests run once per store (vitest.config.ts): memory, and Redis when WHARF_TEST_RATE_LIMIT_STORE=redis. */
const STORE = process.env.WHARF_TEST_RATE_LIMIT_STORE === 'redis' ? 'redis' : 'memory';

describe(`the store under test (${STORE})`, () => {
  it('is the one that counts', async () => {
    const config = app.running.config.plugins.rate_limit as { store: string; redis: { key_prefix: string } };
    expect(config.store).toBe(STORE);
    const address = newAddress();
    expect((await app.request('GET', '/api/cli/me', { headers: address })).status).toBe(401);
    if (STORE === 'memory') return;
    const redis = redisClient(await ensureRedis());
    try {
      const key = `${config.redis.key_prefix}cli:anonymous:ip:${address['x-forwarded-for']}`;
      expect(await redis.get(key)).toBe('1');
    } finally {
      redis.disconnect();
    }
  });
});

describe('X-RateLimit-* headers on every response of a limited path', () => {
  it('count down on successes, per credential (dashboard session)', async () => {
    const user = await signIn(app);
    expect(await remainingOf('GET', '/api/cli/me', user.headers, 3)).toEqual([
      { status: 200, limit: '5', remaining: '4' },
      { status: 200, limit: '5', remaining: '3' },
      { status: 200, limit: '5', remaining: '2' },
    ]);
  });

  it('are on 401s, and invalid credentials of any shape count against the address, with anonymous calls', async () => {
    const address = newAddress();
    const calls: Record<string, string>[] = [
      { ...address, authorization: 'Bearer garbage' },
      { ...address },
      { ...address, authorization: 'Bearer eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln' },
      { ...address, cookie: '__session=not-a-session' },
    ];
    const seen = [];
    for (const headers of calls) {
      const res = await app.request('GET', '/api/cli/me', { headers });
      const { limit, remaining } = limits(res);
      seen.push({ status: res.status, limit, remaining });
    }
    expect(seen).toEqual([
      { status: 401, limit: '4', remaining: '3' },
      { status: 401, limit: '4', remaining: '2' },
      { status: 401, limit: '4', remaining: '1' },
      { status: 401, limit: '4', remaining: '0' },
    ]);
    // A fresh random token does not get a fresh allowance.
    const refused = await app.request('GET', '/api/cli/me', { headers: { ...address, authorization: `Bearer random-${Date.now()}` } });
    expect(refused.status).toBe(429);
    // Another address has its own.
    expect(limits(await app.request('GET', '/api/cli/me', { headers: newAddress() })).remaining).toBe('3');
  });

  it('are on 404s of unknown routes under a limited prefix, which share the rule counter', async () => {
    const user = await signIn(app);
    const res = await app.request('GET', '/api/cli/nowhere', { headers: user.headers });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Not found' });
    expect(limits(res)).toMatchObject({ limit: '5', remaining: '4' });
    const msg = await app.request('GET', '/msg/nowhere', { headers: newAddress() });
    expect(msg.status).toBe(404);
    expect(msg.body).toEqual({ success: false, error: 'Not found', message: 'Not found' });
    expect(limits(msg)).toMatchObject({ limit: '3', remaining: '2' });
    expect((await app.request('GET', '/api/cli/me', { headers: user.headers })).headers.get('x-ratelimit-remaining')).toBe('3');
  });

  it('are on route-level errors, 405s, 413s and cross-site refusals', async () => {
    const address = newAddress();
    const missing = await app.request('GET', '/msg/missing', { headers: address });
    expect([missing.status, limits(missing).remaining]).toEqual([404, '2']);
    const method = await app.request('DELETE', '/msg/echo', { headers: address });
    expect([method.status, limits(method).remaining]).toEqual([405, '1']);
    const big = await app.request('POST', '/plain/echo', {
      raw: JSON.stringify({ pad: 'x'.repeat(4096) }),
      headers: { ...address, 'content-type': 'application/json' },
    });
    expect([big.status, limits(big).limit]).toEqual([413, '3']);
    const user = await signIn(app);
    const crossSite = await app.request('POST', '/api/orgs', { body: { name: 'Evil' }, headers: { cookie: user.cookie, origin: 'https://evil.example' } });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body).toEqual({ error: 'Cross-site request refused' });
    expect(limits(crossSite)).toMatchObject({ limit: '10000', remaining: '9999' });
  });

  it('give the window end as Unix seconds', async () => {
    const address = newAddress();
    const before = Date.now();
    const res = await app.request('GET', '/api/cli/me', { headers: address });
    const after = Date.now();
    const reset = Number(limits(res).reset);
    expect(reset).toBeGreaterThanOrEqual(Math.ceil((before + 60_000) / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil((after + 60_000) / 1000));
    // The window is fixed: later requests report the same end.
    const again = await app.request('GET', '/api/cli/me', { headers: address });
    expect(Number(limits(again).reset)).toBe(reset);
  });
});

describe('429', () => {
  it('answers {message, retry_after} without success, with Retry-After and the headers, in every envelope', async () => {
    for (const path of ['/msg/missing', '/plain/missing']) {
      const address = newAddress();
      for (let i = 0; i < 3; i++) expect((await app.request('GET', path, { headers: address })).status).toBe(404);
      const started = Date.now();
      const res = await app.request('GET', path, { headers: address });
      expect(res.status).toBe(429);
      const retryAfter = Number(res.headers.get('retry-after'));
      // The window began at the first of the four requests, a moment ago.
      expect(retryAfter).toBeGreaterThanOrEqual(50);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(res.body).toStrictEqual({ message: `Too many requests; try again in ${retryAfter} seconds`, retry_after: retryAfter });
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const { limit, remaining, reset } = limits(res);
      expect([limit, remaining]).toEqual(['3', '0']);
      expect(Number(reset) - Math.ceil(started / 1000)).toBeGreaterThanOrEqual(retryAfter - 1);
      expect(Number(reset) - Math.floor(started / 1000)).toBeLessThanOrEqual(retryAfter + 1);
    }
  });

  it('refuses a flooding caller before its body is read (429, not 413)', async () => {
    const address = newAddress();
    for (let i = 0; i < 3; i++) await app.request('GET', '/plain/missing', { headers: address });
    const big = await app.request('POST', '/plain/echo', {
      raw: JSON.stringify({ pad: 'x'.repeat(4096) }),
      headers: { ...address, 'content-type': 'application/json' },
    });
    expect(big.status).toBe(429);
  });

  it('restores the allowance when the window ends', async () => {
    const address = newAddress();
    const first = await app.request('GET', '/example/hello?name=Ada', { headers: address });
    expect([first.status, limits(first).limit, limits(first).remaining]).toEqual([200, '2', '1']);
    expect((await app.request('GET', '/example/hello?name=Ada', { headers: address })).status).toBe(200);
    const refused = await app.request('GET', '/example/hello?name=Ada', { headers: address });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect([1, 2]).toContain(retryAfter);
    expect(refused.body).toStrictEqual({
      message: `Too many requests; try again in ${retryAfter} second${retryAfter === 1 ? '' : 's'}`,
      retry_after: retryAfter,
    });
    await new Promise((r) => setTimeout(r, Number(limits(refused).reset) * 1000 - Date.now() + 50));
    const back = await app.request('GET', '/example/hello?name=Ada', { headers: address });
    expect([back.status, limits(back).remaining]).toEqual([200, '1']);
  });
});

describe('one counter per caller', () => {
  it('two users do not share, and one over its limit does not stop the other', async () => {
    const [a, b] = [await signIn(app), await signIn(app)];
    const runA = await remainingOf('GET', '/api/cli/me', a.headers, 6);
    expect(runA.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    const runB = await remainingOf('GET', '/api/cli/me', b.headers, 1);
    expect(runB).toEqual([{ status: 200, limit: '5', remaining: '4' }]);
  });

  it("a command-line token counts apart from the cookie, with its kind's own limit, and its tokens share one counter", async () => {
    const user = await signIn(app);
    const [one, two] = [await oauthBearer(user.userId, user.orgId), await oauthBearer(user.userId, user.orgId)];
    expect(await remainingOf('GET', '/api/cli/me', { authorization: one }, 2)).toEqual([
      { status: 200, limit: '6', remaining: '5' },
      { status: 200, limit: '6', remaining: '4' },
    ]);
    expect(await remainingOf('GET', '/api/cli/me', { authorization: two }, 1)).toEqual([{ status: 200, limit: '6', remaining: '3' }]);
    expect(await remainingOf('GET', '/api/cli/me', user.headers, 1)).toEqual([{ status: 200, limit: '5', remaining: '4' }]);
  });

  it('keys PATs, session keys, app tokens and future kinds by kind and id, whatever the address', async () => {
    const get = async (token: string) => {
      const res = await app.request('GET', '/kinds/me', { headers: { ...newAddress(), authorization: `Bearer ${token}` } });
      return `${res.status} ${limits(res).limit}/${limits(res).remaining}`;
    };
    expect(await get('tk_pat_p1')).toBe('200 7/6');
    expect(await get('tk_pat_p1')).toBe('200 7/5');
    expect(await get('tk_pat_p2')).toBe('200 7/6');
    expect(await get('tk_sessionKey_7')).toBe('200 5/4');
    expect(await get('tk_sessionKey_7')).toBe('200 5/3');
    expect(await get('tk_sessionKey_8')).toBe('200 5/4');
    expect(await get('tk_appToken_a1')).toBe('200 5/4');
    expect(await get('tk_robot_r1')).toBe('200 5/4');
    expect(await get('tk_robot_r1')).toBe('200 5/3');
  });

  it('counts a principal without an id, and a credential whose resolver throws, by address', async () => {
    const address = newAddress();
    const mystery = await app.request('GET', '/kinds/me', { headers: { ...address, authorization: 'Bearer tk_mystery' } });
    expect([mystery.status, limits(mystery).limit, limits(mystery).remaining]).toEqual([200, '4', '3']);
    const refused = await app.request('GET', '/kinds/me', { headers: { ...address, authorization: 'Bearer tk_throw' } });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ success: false, message: 'Not a member of that organization' });
    expect([limits(refused).limit, limits(refused).remaining]).toEqual(['4', '2']);
  });

  it('matches prefixes on whole segments and ignoring case, as the router does', async () => {
    const user = await signIn(app);
    const upper = await app.request('GET', '/API/CLI/me', { headers: user.headers });
    expect(upper.status).toBe(200);
    expect(limits(upper)).toMatchObject({ limit: '5', remaining: '4' });
    const other = await app.request('GET', '/api/clix', { headers: user.headers });
    expect(limits(other).limit).toBe('10000');
  });

  it('reduces addresses to counter keys: IPv4 as is, IPv6 by subnet', () => {
    expect(addressKey('203.0.113.9', 64)).toBe('ip:203.0.113.9');
    expect(addressKey('::ffff:203.0.113.9', 64)).toBe('ip:203.0.113.9');
    expect(addressKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd', 64)).toBe('ip:2001:db8:1:2:0:0:0:0/64');
    expect(addressKey('2001:db8:1:2::1', 64)).toBe(addressKey('2001:db8:1:2:ffff::9', 64));
    expect(addressKey('2001:db8:1:2::1', 56)).toBe('ip:2001:db8:1:0:0:0:0:0/56');
    expect(addressKey('2001:db8:1:2::1', 128)).toBe('ip:2001:db8:1:2:0:0:0:1/128');
    expect(addressKey('::1', 128)).toBe('ip:0:0:0:0:0:0:0:1/128');
    expect(addressKey('fe80::1%eth0', 64)).toBe('ip:fe80:0:0:0:0:0:0:0/64');
    expect(addressKey('64:ff9b::192.0.2.33', 128)).toBe('ip:64:ff9b:0:0:0:0:c000:221/128');
    expect(addressKey('', 64)).toBe('ip:unknown');
    expect(addressKey('10.1.2.3%eth0', 64)).toBe('ip:10.1.2.3');
    expect(principalKey({ kind: 'session', userId: 'u1', sessionId: 's1' } as never)).toBe('session:u1');
    expect(principalKey({ kind: 'pat', patId: 'p1', userId: 'u1' } as never)).toBe('pat:p1');
    expect(principalKey({ kind: 'mystery' })).toBeUndefined();
  });
});

describe('a store that fails', () => {
  it('lets the request through uncounted and logs a warning, rather than failing every request', async () => {
    const broken: RateLimitStore = {
      counter: () => ({
        consume: () => Promise.reject(new Error('connection refused')),
      }),
    };
    const warnings: unknown[] = [];
    const limiter = rateLimiter({ rules: compileRules(rateLimitConfig.parse({}), broken), ipv6Subnet: 64 });
    const headers: Record<string, string> = {};
    const ctx = {
      path: '/api/send-message',
      ip: '203.0.113.1',
      state: {},
      set: (name: string, value: string) => void (headers[name] = value),
      log: { warn: (...args: unknown[]) => void warnings.push(args) },
    };
    let reached = false;
    await limiter(ctx as never, async () => {
      reached = true;
    });
    expect(reached).toBe(true);
    expect(headers).toEqual({});
    expect(warnings).toEqual([[expect.objectContaining({ rule: 'send_message' }), 'rate limit store failed; request not counted']]);
  });
});

describe('health routes, proxies and the switch', () => {
  it('never limits /healthz, /readyz and /metrics, and without trust_proxy ignores X-Forwarded-For', async () => {
    const small = await startApp('[plugins.rate_limit.rules.default]\nlimit = 2\nanonymous = 2\n', { env: await rateLimitStoreEnv() });
    try {
      for (let i = 0; i < 5; i++) {
        for (const path of ['/healthz', '/readyz', '/metrics', '/HEALTHZ/']) {
          const res = await small.fetch(path);
          await res.arrayBuffer();
          expect(res.status).not.toBe(429);
          expect(res.headers.get('x-ratelimit-limit')).toBeNull();
        }
      }
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await small.request('GET', '/api/cli/config', { headers: { 'x-forwarded-for': `198.51.100.${i}` } })).status);
      expect(statuses).toEqual([200, 200, 429]);
      const metrics = await (await small.fetch('/metrics')).text();
      expect(metrics).toMatch(/wharf_rate_limited_total\{rule="default"\} 1/);
    } finally {
      await small.close();
    }
  });

  it('sets no headers when disabled', async () => {
    const off = await startApp('[plugins.rate_limit]\nenabled = false\n');
    try {
      const res = await off.request('GET', '/api/cli/config');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBeNull();
    } finally {
      await off.close();
    }
  });
});

describe('config errors are one line each', () => {
  const problem = (toml: string) => {
    try {
      resolveConfig(builtinPlugins, { toml: { text: toml, file: 'test.toml' } });
    } catch (err) {
      if (err instanceof ConfigError) return err.lines;
      throw err;
    }
    return [];
  };

  it.each([
    [
      'a prefix that is not a path',
      '[plugins.rate_limit.rules.groups]\nprefixes = ["api/groups"]\nlimit = 5\n',
      'test.toml:2: "plugins.rate_limit.rules.groups.prefixes.0": must be a path prefix starting with "/" (no wildcard, query or spaces), like "/api/files"',
    ],
    [
      'a wildcard',
      '[plugins.rate_limit.rules.groups]\nprefixes = ["/api/groups/*"]\nlimit = 5\n',
      'test.toml:2: "plugins.rate_limit.rules.groups.prefixes.0": must be a path prefix starting with "/" (no wildcard, query or spaces), like "/api/files"',
    ],
    [
      'a prefix another rule has (compared without case and trailing slash)',
      '[plugins.rate_limit.rules.uploads]\nprefixes = ["/API/Files/"]\nlimit = 5\n',
      'test.toml:2: "plugins.rate_limit.rules.uploads.prefixes.0": prefix "/API/Files/" is already covered by rule "files"',
    ],
    [
      'a rule of its own without a limit (a misspelt built-in rule, say)',
      '[plugins.rate_limit.rules.send_mesage]\nanonymous = 5\n',
      'test.toml:1: "plugins.rate_limit.rules.send_mesage": rule "send_mesage" needs "prefixes" and "limit" (built-in rules, which have defaults: default, send_message, sessions, files, login)',
    ],
    [
      'an unknown credential kind',
      '[plugins.rate_limit.rules.send_message]\nkinds = { sesion = 5 }\n',
      'test.toml:2: unknown key "plugins.rate_limit.rules.send_message.kinds.sesion"',
    ],
    [
      'a zero limit',
      '[plugins.rate_limit.rules.send_message]\nlimit = 0\n',
      'test.toml:2: "plugins.rate_limit.rules.send_message.limit": Too small: expected number to be >=1',
    ],
    [
      'a health route',
      '[plugins.rate_limit.rules.probes]\nprefixes = ["/metrics"]\nlimit = 5\n',
      'test.toml:2: "plugins.rate_limit.rules.probes.prefixes.0": health, readiness and metrics routes (/healthz, /readyz, /metrics) are never limited',
    ],
    ['a misspelt key', '[plugins.rate_limit.rules.login]\nlimits = 5\n', 'test.toml:2: unknown key "plugins.rate_limit.rules.login.limits"'],
  ])('%s', (_name, toml, line) => {
    expect(problem(toml)).toEqual([line]);
  });

  it('accepts rules of its own and per-kind limits', () => {
    const config = resolveConfig(builtinPlugins, {
      toml: {
        text: '[plugins.rate_limit.rules.groups]\nprefixes = ["/api/groups"]\nlimit = 30\nkinds = { session_key = 10 }\nwindow_seconds = 10\n',
        file: 'test.toml',
      },
    });
    expect((config.plugins.rate_limit as { rules: Record<string, unknown> }).rules.groups).toEqual({
      prefixes: ['/api/groups'],
      limit: 30,
      kinds: { session_key: 10 },
      window_seconds: 10,
    });
  });
});
