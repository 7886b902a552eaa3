/**
 * Session management: create, read (with secrets), update, delete, the alias path, webhook
 * settings, proxy checks, webhook signing, the whatsapp type without an adapter, logs, and bad
 * input that must get a clear answer and never a 500 or a half-created session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_NAMES } from '../../../plugins/sessions/events.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import type { TestApp } from '../../helpers/app.ts';
import { call, eventsOf, sandboxSession, startMessagingApp, type Tenant, tenant, whatsappSession } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let other: Tenant;

beforeAll(async () => {
  app = await startMessagingApp();
  t = await tenant(app);
  other = await tenant(app);
});
afterAll(() => app?.close());

const count = async (pat = t.pat) => (await call(app, pat, 'GET', '/api/whatsapp-sessions')).body.data.length as number;

describe('CRUD', () => {
  it('creates, reads (with api_key and webhook_secret), updates and deletes; the alias path serves the same session', async () => {
    const created = await call(app, t.pat, 'POST', '/api/whatsapp-sessions', {
      name: 'Support',
      phone_number: '+49 30 1234 5678',
      account_protection: true,
      log_messages: true,
      webhook_url: 'https://hooks.example.com/wa',
      webhook_enabled: true,
      webhook_events: ['messages.received', 'messages-group.received', 'session.status'],
    });
    expect(created.status).toBe(201);
    const s = created.body.data;
    expect(s).toStrictEqual({
      id: expect.any(Number),
      name: 'Support',
      phone_number: '+493012345678',
      status: 'disconnected',
      status_reason: null,
      type: 'whatsapp',
      account_protection: true,
      log_messages: true,
      webhook_url: 'https://hooks.example.com/wa',
      webhook_enabled: true,
      webhook_events: ['messages.received', 'messages-group', 'session.status'],
      read_incoming_messages: false,
      auto_reject_calls: false,
      ignore_groups: false,
      ignore_channels: false,
      ignore_broadcasts: false,
      always_online: false,
      api_key: expect.stringMatching(/^wsk_/),
      webhook_secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      proxy_url: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    for (const prefix of ['/api/whatsapp-sessions', '/api/messaging-sessions']) {
      expect((await call(app, t.pat, 'GET', `${prefix}/${s.id}`)).body.data).toStrictEqual(s);
    }
    const list = await call(app, t.pat, 'GET', '/api/messaging-sessions');
    const listed = list.body.data.find((x: { id: number }) => x.id === s.id);
    expect(listed.api_key).toBe(s.api_key);
    expect(listed).not.toHaveProperty('webhook_secret');

    const updated = await call(app, t.pat, 'PUT', `/api/messaging-sessions/${s.id}`, {
      name: 'Support EU',
      webhook_events: [],
      ignore_groups: true,
      read_incoming_messages: true,
      always_online: true,
    });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({
      name: 'Support EU',
      webhook_events: [],
      ignore_groups: true,
      read_incoming_messages: true,
      always_online: true,
      webhook_url: 'https://hooks.example.com/wa',
    });
    const none = await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { webhook_events: null, webhook_url: null });
    expect(none.body.data).toMatchObject({ webhook_events: null, webhook_url: null });

    expect((await call(app, t.pat, 'DELETE', `/api/whatsapp-sessions/${s.id}`)).body).toStrictEqual({ success: true, data: null });
    for (const prefix of ['/api/whatsapp-sessions', '/api/messaging-sessions']) {
      expect(await call(app, t.pat, 'GET', `${prefix}/${s.id}`)).toMatchObject({
        status: 404,
        body: { success: false, error: 'Session not found', message: 'Session not found' },
      });
    }
  });

  it('absent webhook_events means none; WasenderAPI aliases are stored in the canonical spelling', async () => {
    const plain = await whatsappSession(app, t.pat);
    expect(plain.body.webhook_events).toBeNull();
    const all = await sandboxSession(app, t.pat, { webhook_events: [] });
    expect(all.body.webhook_events).toEqual([]);
    const aliased = await sandboxSession(app, t.pat, { webhook_events: ['messages-personal.received', 'messages-personal', 'messages-newsletter.received'] });
    expect(aliased.body.webhook_events).toEqual(['messages-personal', 'messages-newsletter']);
  });

  it('lists the 22 event names and the aliases, publicly', async () => {
    const res = await app.request('GET', '/api/webhook-events');
    expect(res.body).toStrictEqual({
      success: true,
      data: [...EVENT_NAMES],
      aliases: {
        'messages-personal.received': 'messages-personal',
        'messages-group.received': 'messages-group',
        'messages-newsletter.received': 'messages-newsletter',
      },
    });
    expect(res.body.data).toHaveLength(22);
  });

  it('sandbox sessions get a generated number unless given one, and are connected from birth', async () => {
    const generated = await sandboxSession(app, t.pat, { name: 'Gen' });
    expect(generated.body).toMatchObject({ type: 'sandbox', status: 'connected', phone_number: `+1555${String(generated.id).padStart(7, '0')}` });
    const chosen = await sandboxSession(app, t.pat, { phone_number: '+447700900555' });
    expect(chosen.phone).toBe('+447700900555');
    const viaCollection = await call(app, t.pat, 'POST', '/api/whatsapp-sessions', { name: 'typed', type: 'sandbox' });
    expect(viaCollection.body.data).toMatchObject({ type: 'sandbox', status: 'connected' });
    const logs = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${generated.id}/session-logs`);
    expect(logs.body.data).toMatchObject({
      current_page: 1,
      total: 1,
      data: [{ whatsapp_session_id: generated.id, event_type: 'status_change', status: 'connected' }],
    });
    expect((await eventsOf(app, generated.id)).map((e) => e.payload)).toEqual([
      { event: 'session.status', sessionId: generated.id, timestamp: expect.any(Number), data: { status: 'connected', reason: 'sandbox session created' } },
    ]);
  });

  it('restart writes the session log and passes through connecting', async () => {
    const s = await sandboxSession(app, t.pat);
    const res = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/restart`);
    expect(res.body).toStrictEqual({ success: true, data: { status: 'connected', message: 'Sandbox session restarted' } });
    const logs = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/session-logs?per_page=2`)).body.data;
    expect(logs).toMatchObject({ total: 4, per_page: 2, last_page: 2, from: 1, to: 2 });
    expect(logs.data.map((r: { event_type: string; status: string }) => `${r.event_type}:${r.status}`)).toEqual([
      'session_restarted:connected',
      'status_change:connected',
    ]);
  });
});

describe('a whatsapp session not connected', () => {
  it('answers 409 wherever a connection is needed, and says how to connect', async () => {
    const s = await whatsappSession(app, t.pat);
    const notPairing = 'The session is not pairing (status: disconnected); POST .../connect starts pairing';
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { success: false, error: notPairing, message: notPairing },
    });
    const notConnected = `Session ${s.id} is not connected (status: disconnected); connect it and poll GET /api/status`;
    expect(await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/restart`)).toMatchObject({
      status: 409,
      body: { success: false, error: notConnected },
    });
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/disconnect`)).body).toStrictEqual({
      success: true,
      data: { status: 'disconnected', message: 'The session is not connected' },
    });
    expect((await call(app, s.apiKey, 'GET', '/api/status')).body).toStrictEqual({ status: 'disconnected' });
    for (const [method, path, body] of [
      ['GET', '/api/user', undefined],
      ['POST', '/api/send-message', { to: '+14155550100', text: 'x' }],
      ['POST', '/api/messages/read', { key: { id: 'X', remoteJid: '1@lid' } }],
    ] as const) {
      const res = await call(app, s.apiKey, method, path, body);
      expect(res.status).toBe(409);
      expect(res.body).toStrictEqual({ success: false, error: notConnected, message: notConnected });
    }
  });

  it('refuses sandbox receive with 422 naming the session', async () => {
    const s = await whatsappSession(app, t.pat);
    const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'x' });
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      success: false,
      message: 'Sandbox receive works only on sandbox sessions.',
      errors: { session: [`session ${s.id} is a whatsapp session; use the API key of a sandbox session (POST /api/sandbox-sessions creates one)`] },
    });
  });
});

describe('bad input gets a clear answer, never a 500, never a half-created session', () => {
  it.each([
    [{ phone_number: '+14155550100' }, { name: ['name is required'] }],
    [{ name: 'x' }, { phone_number: ['phone_number is required'] }],
    [{ name: 5, phone_number: '+14155550100' }, { name: ['name must be a string'] }],
    [{ name: 'x', phone_number: '12' }, { phone_number: ['phone_number: must be a phone number in E.164 format, for example +14155550123'] }],
    [{ name: 'x', phone_number: '+14155550100', account_protection: 'yes' }, { account_protection: ['account_protection must be a boolean'] }],
    [{ name: 'x', phone_number: '+14155550100', webhook_url: 'ftp://x' }, { webhook_url: ['webhook_url: must be an http or https URL'] }],
    [
      { name: 'x', phone_number: '+14155550100', webhook_events: ['messages.recieved'] },
      { 'webhook_events.0': ['webhook_events.0: unknown event "messages.recieved" (GET /api/webhook-events lists them)'] },
    ],
    [{ name: 'x', phone_number: '+14155550100', webhook_events: 'all' }, { webhook_events: ['webhook_events must be an array'] }],
    [{ name: 'x', phone_number: '+14155550100', api_key: 'mine' }, { api_key: ['unknown field api_key'] }],
    [{ name: 'x', phone_number: '+14155550100', webhook_signing: 'hmac' }, { webhook_signing: ['unknown field webhook_signing'] }],
    [{ name: 'x', phone_number: '+14155550100', type: 'telegram' }, { type: [expect.stringMatching(/^type: /)] }],
    [
      { name: 'x', phone_number: '+14155550100', proxy_url: 'ftp://proxy.example.com' },
      { proxy_url: ['proxy_url scheme must be http, https or socks5 (got ftp)'] },
    ],
    [
      { name: 'x', phone_number: '+14155550100', proxy_url: 'http://10.0.0.1:3128' },
      {
        proxy_url: [
          'proxy_url must use a public domain name, not an IP address (allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)',
        ],
      },
    ],
    [
      { name: 'x', phone_number: '+14155550100', proxy_url: 'socks5://[::1]:1080' },
      {
        proxy_url: [
          'proxy_url must use a public domain name, not an IP address (allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)',
        ],
      },
    ],
    [
      { name: 'x', phone_number: '+14155550100', proxy_url: 'http://localhost:3128' },
      {
        proxy_url: [
          expect.stringMatching(
            /^proxy_url host localhost resolves to (127\.0\.0\.1|::1), a private, loopback or link-local address \(allow it with \[plugins\.sessions\] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true\)$/,
          ),
        ],
      },
    ],
    [{ name: 'x', phone_number: '+14155550100', proxy_url: 'http://proxy.invalid:3128' }, { proxy_url: ['proxy_url host proxy.invalid does not resolve'] }],
    [
      { name: 'x', phone_number: '+14155550100', proxy_url: 'http://user:pw@proxy.example.com:3128/path' },
      { proxy_url: ['proxy_url must not have a path, query or fragment'] },
    ],
  ])('create %j -> 422', async (body, errors) => {
    const before = await count();
    const res = await call(app, t.pat, 'POST', '/api/whatsapp-sessions', body);
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({ success: false, message: 'The given data was invalid.', errors });
    expect(await count()).toBe(before);
  });

  it('refuses a phone number already used in the organization, but another organization may use it', async () => {
    const s = await whatsappSession(app, t.pat, { phone_number: '+14155550199' });
    const before = await count();
    const dup = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'dup', phone_number: '+1 415 555 0199' });
    expect(dup).toMatchObject({ status: 422, body: { errors: { phone_number: [`phone_number is already used by session ${s.id} of this organization`] } } });
    expect(await count()).toBe(before);
    expect((await call(app, other.pat, 'POST', '/api/sandbox-sessions', { name: 'elsewhere', phone_number: '+14155550199' })).status).toBe(201);
  });

  it('update: empty body, unknown fields, wrong types, foreign and missing sessions', async () => {
    const s = await sandboxSession(app, t.pat);
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, {})).toMatchObject({
      status: 422,
      body: { errors: { body: ['send at least one field to update'] } },
    });
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { type: 'whatsapp' })).toMatchObject({
      status: 422,
      body: { errors: { type: ['unknown field type'] } },
    });
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { log_messages: 1 })).toMatchObject({
      status: 422,
      body: { errors: { log_messages: ['log_messages must be a boolean'] } },
    });
    for (const id of [s.id, 999999, 'abc', '1e3', '-1', '0']) {
      const pat = id === s.id ? other.pat : t.pat;
      const res = await call(app, pat, 'PUT', `/api/whatsapp-sessions/${id}`, { name: 'x' });
      expect(res.status).toBe(404);
      expect(res.body).toStrictEqual({ success: false, error: 'Session not found', message: 'Session not found' });
    }
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data.name).toBe('Sandbox');
  });

  it('malformed JSON, wrong methods and unknown paths answer in the messaging envelope', async () => {
    const bad = await app.request('POST', '/api/whatsapp-sessions', {
      raw: '{"name":',
      headers: { authorization: `Bearer ${t.pat}`, 'content-type': 'application/json' },
    });
    expect(bad).toMatchObject({ status: 400, body: { success: false, message: expect.stringMatching(/^Malformed JSON body/) } });
    const patch = await call(app, t.pat, 'PATCH', '/api/whatsapp-sessions/1');
    expect(patch).toMatchObject({ status: 405, body: { success: false, message: expect.stringMatching(/^Method PATCH is not allowed here/) } });
    const nowhere = await call(app, t.pat, 'GET', '/api/messages/1/nowhere');
    expect(nowhere).toMatchObject({ status: 404, body: { success: false, error: 'Not found', message: 'Not found' } });
  });

  it('a webhook URL check registered by another plugin refuses with 422', async () => {
    const svc = app.running.services.sessions as Sessions;
    svc.addWebhookUrlCheck((url) => (url.includes('blocked.example') ? 'webhook_url resolves to a private address' : null));
    const before = await count();
    const res = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'x', webhook_url: 'https://blocked.example/hook' });
    expect(res).toMatchObject({ status: 422, body: { errors: { webhook_url: ['webhook_url resolves to a private address'] } } });
    expect(await count()).toBe(before);
  });
});

describe('proxy', () => {
  it('sets and clears a proxy; it is shown only on the single-session read', async () => {
    const s = await sandboxSession(app, t.pat);
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/proxy`, { proxy_url: 'http://10.1.1.1:8080' })).toMatchObject({
      status: 422,
      body: {
        errors: {
          proxy_url: [
            'proxy_url must use a public domain name, not an IP address (allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)',
          ],
        },
      },
    });
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/proxy`, { proxy: 'x' })).toMatchObject({
      status: 422,
      body: { errors: { proxy_url: ['proxy_url is required'], proxy: ['unknown field proxy'] } },
    });
    const cleared = await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/proxy`, { proxy_url: null });
    expect(cleared.body.data.proxy_url).toBeNull();
    const row = (await app.running.data.one<{ proxy_url_enc: string | null }>('SELECT proxy_url_enc FROM sessions_sessions WHERE id = ?', [s.id]))!;
    expect(row.proxy_url_enc).toBeNull();
  });

  it('private networks are accepted when the config allows them, and stored encrypted', async () => {
    const lan = await startMessagingApp('[plugins.sessions]\nallow_private_networks = true\n');
    try {
      const owner = await tenant(lan);
      const s = await sandboxSession(lan, owner.pat);
      for (const proxy of ['http://user:secret@localhost:3128', 'socks5://192.168.1.10:1080', 'https://[fd00::1]:443']) {
        const res = await call(lan, owner.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/proxy`, { proxy_url: proxy });
        expect(res.status, res.text).toBe(200);
        expect(res.body.data.proxy_url).toBe(proxy);
      }
      expect((await call(lan, owner.pat, 'GET', '/api/whatsapp-sessions')).body.data[0]).not.toHaveProperty('proxy_url');
      const row = (await lan.running.data.one<{ proxy_url_enc: string }>('SELECT proxy_url_enc FROM sessions_sessions WHERE id = ?', [s.id]))!;
      expect(row.proxy_url_enc).toMatch(/^v1\./);
      expect(await call(lan, owner.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/proxy`, { proxy_url: 'gopher://localhost' })).toMatchObject({ status: 422 });
    } finally {
      await lan.close();
    }
  });
});

describe('webhook signing', () => {
  it('defaults to the secret, switches to hmac, and is not a field of the session', async () => {
    const s = await sandboxSession(app, t.pat);
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/webhook-signing`)).body).toStrictEqual({ success: true, data: { mode: 'secret' } });
    expect((await app.request('PUT', `/api/whatsapp-sessions/${s.id}/webhook-signing`, { body: { mode: 'hmac' }, headers: t.headers })).status).toBe(200);
    expect((await call(app, t.pat, 'GET', `/api/messaging-sessions/${s.id}/webhook-signing`)).body.data.mode).toBe('hmac');
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data).not.toHaveProperty('webhook_signing');
    expect(await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/webhook-signing`, { mode: 'md5' })).toMatchObject({
      status: 422,
      body: { errors: { mode: [expect.stringMatching(/^mode: /)] } },
    });
  });
});

describe('audit logs', () => {
  it('record who (which token or user) did what, and when', async () => {
    const s = await sandboxSession(app, t.pat);
    await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { name: 'Renamed', webhook_url: 'https://hooks.example.com/x' });
    await app.request('POST', `/api/whatsapp-sessions/${s.id}/regenerate-api-key`, { body: {}, headers: t.headers });
    await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/webhook-signing`, { mode: 'hmac' });
    await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, { qr_as_image: true });
    const patId = (await call(app, t.pat, 'GET', '/api/personal-access-tokens')).body.data.find((x: { name: string }) => x.name === 'tests').id;
    const logs = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/audit-logs`);
    expect(logs.body.data.total).toBe(5);
    const pat = { kind: 'pat', id: String(patId), user_id: t.userId };
    expect(logs.body.data.data.map((r: Record<string, unknown>) => [r.action, r.actor, r.details])).toEqual([
      ['session.connect', pat, { status: 'connected' }],
      ['session.webhook_signing_updated', pat, { mode: 'hmac' }],
      ['session.api_key_regenerated', { kind: 'session', id: t.userId, user_id: t.userId }, null],
      ['session.updated', pat, { fields: ['name', 'webhook_url'] }],
      ['session.created', pat, { type: 'sandbox', fields: ['name'] }],
    ]);
    expect(logs.body.data.data[0]).toMatchObject({ whatsapp_session_id: s.id, ip: expect.any(String), created_at: expect.any(String) });
    expect(JSON.stringify(logs.body)).not.toContain('wsk_');
    expect((await call(app, other.pat, 'GET', `/api/whatsapp-sessions/${s.id}/audit-logs`)).status).toBe(404);
  });

  it('message logs page and filter', async () => {
    const a = await sandboxSession(app, t.pat);
    const b = await sandboxSession(app, t.pat);
    for (const text of ['1', '2', '3']) await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text });
    await call(app, a.apiKey, 'POST', '/api/send-message', { to: '+99912345678', text: 'lost' });
    const page = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs?per_page=2&page=2`)).body.data;
    expect(page).toMatchObject({ current_page: 2, per_page: 2, total: 4, last_page: 2, from: 3, to: 4 });
    expect(page.data.map((r: { content: { text: string } }) => r.content.text)).toEqual(['2', '1']);
    const failed = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs?status=failed`)).body.data;
    expect(failed.data.map((r: { status: string }) => r.status)).toEqual(['failed']);
    for (const q of ['page=0', 'per_page=500', 'status=lost', 'sort=asc']) {
      const res = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs?${q}`);
      expect(res.status, q).toBe(422);
      expect(res.body.message).toBe('The given data was invalid.');
    }
  });
});
