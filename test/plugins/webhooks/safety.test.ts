/**
 * Where webhooks may go. Loopback, private, link-local and metadata addresses are refused when a
 * URL is saved (422 on webhook_url) and again when connecting, against the address really
 * connected to (DNS rebinding); the config opens private networks or named CIDRs. Also the
 * config's validation and the small parsers the dispatcher relies on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../../core/config.ts';
import { describeError, parseRetryAfter } from '../../../plugins/webhooks/dispatcher.ts';
import type { Resolver } from '../../../core/net.ts';
import { addressPolicy, BlockedAddressError, checkWebhookUrl, guardedAgent } from '../../../plugins/webhooks/network.ts';
import { builtinPlugins } from '../../../plugins/index.ts';
import { tempDir, type TestApp } from '../../helpers/app.ts';
import {
  answer,
  call,
  dispatchesOf,
  eventually,
  FAST_TOML,
  hookedSession,
  receive,
  Receiver,
  sandboxSession,
  startWebhooksApp,
  type Tenant,
  tenant,
} from './helpers.ts';

describe('saving a webhook URL (private networks not allowed: the default)', () => {
  let app: TestApp;
  let t: Tenant;
  beforeAll(async () => {
    app = await startWebhooksApp('');
    t = await tenant(app);
  });
  afterAll(() => app?.close());

  const PRIVATE =
    /which this server does not deliver webhooks to \(allow it with \[plugins\.webhooks\] allow_private_networks = true or the variable WHARF_PLUGINS__WEBHOOKS__ALLOW_PRIVATE_NETWORKS=true, or name its network in \[plugins\.webhooks\] allowed_networks\)$/;
  const METADATA =
    /a cloud metadata address, which this server does not deliver webhooks to \(only naming it in \[plugins\.webhooks\] allowed_networks allows it\)$/;
  const refused: [string, RegExp, RegExp][] = [
    ['http://127.0.0.1:8080/hook', /points to 127\.0\.0\.1, a loopback, private or link-local address/, PRIVATE],
    ['http://localhost:8080/hook', /host localhost resolves to (127\.0\.0\.1|::1), a loopback/, PRIVATE],
    ['http://10.1.2.3/hook', /points to 10\.1\.2\.3/, PRIVATE],
    ['http://192.168.1.20/hook', /points to 192\.168\.1\.20/, PRIVATE],
    ['http://169.254.169.254/latest/meta-data', /points to 169\.254\.169\.254/, METADATA],
    ['http://[::1]:9000/', /points to ::1/, PRIVATE],
    ['http://[::ffff:127.0.0.1]/', /points to ::ffff:7f00:1/, PRIVATE],
    ['http://[fd00:ec2::254]/', /points to fd00:ec2::254/, METADATA],
    ['http://0.0.0.0:8080/', /points to 0\.0\.0\.0/, PRIVATE],
    // IPv6 forms that carry an IPv4 address are judged by it.
    ['http://[::127.0.0.1]/', /points to ::7f00:1/, PRIVATE],
    ['http://[::ffff:0:127.0.0.1]/', /points to ::ffff:0:7f00:1/, PRIVATE],
    ['http://[64:ff9b:1::127.0.0.1]/', /points to 64:ff9b:1::7f00:1/, PRIVATE],
    ['http://[2002:7f00:1::1]/', /points to 2002:7f00:1::1/, PRIVATE],
    ['http://[::169.254.169.254]/', /points to ::a9fe:a9fe/, METADATA],
    ['http://[::ffff:0:169.254.169.254]/', /points to ::ffff:0:a9fe:a9fe/, METADATA],
    ['http://[64:ff9b::169.254.169.254]/', /points to 64:ff9b::a9fe:a9fe/, METADATA],
    ['http://[2002:a9fe:a9fe::1]/', /points to 2002:a9fe:a9fe::1/, METADATA],
  ];

  it.each(refused)('refuses %s with 422 on webhook_url, when creating and when updating', async (url, message, howToAllow) => {
    const created = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'Refused', webhook_url: url, webhook_enabled: true, webhook_events: [] });
    expect(created.status).toBe(422);
    expect(created.body).toMatchObject({ success: false, message: 'The given data was invalid.' });
    expect(created.body.errors.webhook_url[0]).toMatch(message);
    expect(created.body.errors.webhook_url[0]).toMatch(howToAllow);
    const s = await sandboxSession(app, t.pat, { name: 'Update' });
    const updated = await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { webhook_url: url });
    expect(updated.status).toBe(422);
    expect(updated.body.errors.webhook_url[0]).toMatch(message);
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data.webhook_url).toBeNull();
  });

  it('refuses what is not an http(s) URL, and accepts a public address', async () => {
    for (const url of ['not a url', 'ftp://example.com/hook', 'javascript:alert(1)']) {
      const res = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'Bad', webhook_url: url });
      expect(res.status).toBe(422);
      expect(res.body.errors.webhook_url).toEqual(['webhook_url: must be an http or https URL']);
    }
    const ok = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'Public', webhook_url: 'https://93.184.215.14/hook', webhook_enabled: true });
    expect(ok.status).toBe(201);
    expect(ok.body.data.webhook_url).toBe('https://93.184.215.14/hook');
  });

  it('accepts a host that does not resolve yet; the delivery is judged when it connects', async () => {
    const s = await hookedSession(app, t.pat, 'https://does-not-exist.invalid/hook');
    expect(s.body.webhook_url).toBe('https://does-not-exist.invalid/hook');
    const updated = await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { webhook_url: 'http://not-deployed-yet.invalid:8080/' });
    expect(updated.status).toBe(200);
    await receive(app, s);
    const [dispatch] = await eventually(async () => {
      const rows = await dispatchesOf(app, t.pat, s.id);
      return rows.length && rows[0].attempt_count > 0 ? rows : undefined;
    });
    const detail = await call(app, t.pat, 'GET', `/api/dispatches/${dispatch.id}`);
    expect(detail.body.data.attempts[0].error).toBe('host name does not resolve');
  });
});

describe('the allow-list', () => {
  it('allowed_networks opens named networks only; allow_private_networks opens private ones but not metadata addresses', async () => {
    const cidr = await startWebhooksApp('[plugins.webhooks]\nallowed_networks = ["127.0.0.0/8", "fd12:3456::/48"]\n');
    const open = await startWebhooksApp('[plugins.webhooks]\nallow_private_networks = true\n');
    try {
      const a = await tenant(cidr);
      const save = async (app: TestApp, pat: string, url: string) =>
        (await call(app, pat, 'POST', '/api/sandbox-sessions', { name: 'x', webhook_url: url })).status;
      expect(await save(cidr, a.pat, 'http://127.0.0.1:9/')).toBe(201);
      expect(await save(cidr, a.pat, 'http://[fd12:3456::1]/')).toBe(201);
      expect(await save(cidr, a.pat, 'http://10.0.0.1/')).toBe(422);
      expect(await save(cidr, a.pat, 'http://[fd12:3457::1]/')).toBe(422);
      const b = await tenant(open);
      expect(await save(open, b.pat, 'http://10.0.0.1/')).toBe(201);
      expect(await save(open, b.pat, 'http://localhost:9/')).toBe(201);
      expect(await save(open, b.pat, 'http://169.254.169.254/')).toBe(422);
      expect(await save(open, b.pat, 'http://[::ffff:169.254.169.254]/')).toBe(422);
    } finally {
      await cidr.close();
      await open.close();
    }
  });

  it('the policy reads mapped IPv6, metadata and CIDR entries', () => {
    const strict = addressPolicy({ allowPrivateNetworks: false, allowedNetworks: [] });
    expect(strict.allows('93.184.215.14')).toBe(true);
    expect(strict.allows('2606:2800:220:1::1')).toBe(true);
    for (const ip of [
      '127.0.0.1',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '10.0.0.1',
      '172.16.5.4',
      '100.64.0.1',
      '169.254.169.254',
      'fe80::1',
      'fc00::1',
      'nonsense',
    ]) {
      expect(strict.allows(ip), ip).toBe(false);
    }
    const lan = addressPolicy({ allowPrivateNetworks: true, allowedNetworks: [] });
    expect(lan.allows('192.168.0.10')).toBe(true);
    expect(lan.allows('169.254.169.254')).toBe(false);
    expect(lan.allows('fd00:ec2::254')).toBe(false);
    const metadata = addressPolicy({ allowPrivateNetworks: false, allowedNetworks: ['169.254.169.254'] });
    expect(metadata.allows('169.254.169.254')).toBe(true);
    expect(metadata.allows('169.254.169.253')).toBe(false);
  });
});

describe('connecting (DNS rebinding)', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await Receiver.start(answer(200, 'reached'));
  });
  afterAll(() => receiver?.close());

  it('refuses a name that resolved to a public address when saved and to loopback when connecting', async () => {
    let calls = 0;
    // The attacker's DNS: public on the first question, loopback afterwards.
    const rebinding: Resolver = async () => [{ address: ++calls === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
    const policy = addressPolicy({ allowPrivateNetworks: false, allowedNetworks: [] });
    expect(await checkWebhookUrl(`http://rebind.example:${receiver.port}/hook`, { policy, resolve: rebinding, timeoutMs: 1000 })).toBeNull();
    const agent = await guardedAgent({ policy, resolve: rebinding, connectTimeoutMs: 1000 });
    try {
      const err = await agent.request({ origin: `http://rebind.example:${receiver.port}`, path: '/hook', method: 'POST', body: '{}' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(BlockedAddressError);
      expect(describeError(err)).toBe('refused to connect to rebind.example: it resolves to 127.0.0.1, a loopback, private, link-local or metadata address');
      // IP literals are checked too (no lookup happens for them).
      const literal = await agent.request({ origin: `http://127.0.0.1:${receiver.port}`, path: '/hook', method: 'POST', body: '{}' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(literal).toBeInstanceOf(BlockedAddressError);
      expect(receiver.requests).toEqual([]);
    } finally {
      await agent.destroy();
    }
    // The same resolver with loopback allowed does reach the receiver: the hook is what connects.
    const open = await guardedAgent({
      policy: addressPolicy({ allowPrivateNetworks: false, allowedNetworks: ['127.0.0.1'] }),
      resolve: rebinding,
      connectTimeoutMs: 1000,
    });
    try {
      const res = await open.request({ origin: `http://rebind.example:${receiver.port}`, path: '/hook', method: 'POST', body: '{}' });
      expect(res.statusCode).toBe(200);
      expect(await res.body.text()).toBe('reached');
      expect(receiver.requests).toHaveLength(1);
      expect(receiver.requests[0]!.headers.host).toBe(`rebind.example:${receiver.port}`);
    } finally {
      await open.destroy();
    }
  });

  it('checks deliveries at connect time: a URL saved while allowed is refused after the allow-list closes', async () => {
    const dataDir = tempDir();
    const hang = await Receiver.start(() => {
      // never answers: the delivery is still in flight when the server stops
    });
    const first = await startWebhooksApp(FAST_TOML.replace('timeout_ms = 1000', 'timeout_ms = 60000'), { dataDir });
    let second: TestApp | undefined;
    try {
      const owner = await tenant(first);
      const s = await hookedSession(first, owner.pat, hang.url(), ['messages.received']);
      await receive(first, s, 'queued');
      await hang.waitFor(1, 5000);
      await first.close();
      second = await startWebhooksApp(FAST_TOML.replace('allow_private_networks = true', 'allow_private_networks = false'), { dataDir });
      const [d] = await eventually(
        async () => {
          const list = await dispatchesOf(second!, owner.pat, s.id);
          return list[0]?.status === 'abandoned' ? list : null;
        },
        10_000,
        'the refused delivery to be abandoned',
      );
      expect(d).toMatchObject({
        attempt_count: 5,
        last_status_code: null,
        last_error: 'refused to connect to 127.0.0.1: a loopback, private, link-local or metadata address',
      });
      expect(hang.requests).toHaveLength(1);
    } finally {
      await second?.close();
      await hang.close();
    }
  });
});

describe('config', () => {
  const lines = (toml: string): string[] => {
    try {
      resolveConfig(builtinPlugins, { toml: { text: toml, file: 'wharf.toml' }, env: {}, flags: { dataDir: tempDir() } });
    } catch (err) {
      if (err instanceof ConfigError) return err.lines;
      throw err;
    }
    return [];
  };

  it('refuses bad values with the key path', () => {
    expect(lines('[plugins.webhooks]\nallowed_networks = ["10.0.0.0/33"]\n').join('\n')).toMatch(/plugins\.webhooks\.allowed_networks\.0.*CIDR/);
    expect(lines('[plugins.webhooks]\nmax_attempts = 6\n').join('\n')).toMatch(/plugins\.webhooks\.max_attempts/);
    expect(lines('[plugins.webhooks]\nretry_schedule_seconds = []\n').join('\n')).toMatch(/plugins\.webhooks\.retry_schedule_seconds/);
    expect(lines('[plugins.webhooks]\ntimeout_ms = 10\n').join('\n')).toMatch(/plugins\.webhooks\.timeout_ms/);
    expect(lines('[plugins.webhooks]\nretries = 3\n').join('\n')).toMatch(/retries/);
    expect(lines('[plugins.webhooks]\nallowed_networks = ["192.168.0.0/16", "fd00::/8", "127.0.0.1"]\n')).toEqual([]);
  });

  it('has the documented defaults', () => {
    const config = resolveConfig(builtinPlugins, { env: {}, flags: { dataDir: tempDir() } });
    expect(config.plugins.webhooks).toEqual({
      timeout_ms: 10_000,
      max_attempts: 5,
      retry_schedule_seconds: [10, 60, 360, 2160],
      retry_jitter: 0.2,
      concurrency: 256,
      concurrency_per_session: 32,
      response_read_limit_bytes: 65_536,
      allow_private_networks: false,
      allowed_networks: [],
      dns_timeout_ms: 3000,
      retention_days: 30,
      secret_rotation_grace_seconds: 86_400,
      shutdown_wait_ms: 2000,
      lease_seconds: 60,
    });
  });
});

describe('parsers', () => {
  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 5 ', now)).toBe(5000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
    expect(parseRetryAfter(['7', '9'], now)).toBe(7000);
  });

  it('names network failures plainly', () => {
    expect(describeError(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe('connection refused');
    expect(describeError(Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' }))).toBe('timed out waiting for the receiver');
    expect(describeError(new TypeError('fetch failed', { cause: Object.assign(new Error('y'), { code: 'ENOTFOUND' }) }))).toBe('host name does not resolve');
    expect(describeError(new Error('something odd'))).toBe('something odd');
  });
});
