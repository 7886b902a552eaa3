/**
 * Calls between instances (plugins/sessions/forwarding.ts): two apps on one PostgreSQL database
 * (the same keys), a whatsapp session paired and connected through the fake network on A (the
 * lease owner). What needs the session's socket and reaches B runs on A's socket and answers
 * exactly as A does, errors included; A's internal endpoint refuses what is not a fresh call
 * signed with the instances' key; two instances that each think the other drives a session do not
 * bounce a call; when A dies, B answers 503 until the lease runs out, then drives the session.
 * Runs on PostgreSQL in every project: it is about what only a shared database does.
 */
import { Boom } from '@hapi/boom';
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { decode, encode, FORWARD_KEY, FORWARD_PATH, OwnerClient } from '../../../plugins/sessions/forwarding.ts';
import { encryptMedia } from '../../../plugins/sessions/networks/media-crypto.ts';
import { internalUrl } from '../../../plugins/sessions/index.ts';
import type { WhatsAppNetwork } from '../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import { type TestApp, tempDir } from '../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../helpers/fake-whatsapp.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { call, type Res, type SessionInfo, startMessagingApp, statusOf, type Tenant, tenant, until, WHATSAPP_TEST_TOML, whatsappSession } from './helpers.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const network = (fake.network = new FakeWhatsApp());

const LEASE_SECONDS = 6;
const TOML = `${WHATSAPP_TEST_TOML}[plugins.sessions]\nlease_seconds = ${LEASE_SECONDS}\n`;

let a: TestApp;
let b: TestApp;
let t: Tenant;
let s: SessionInfo;
const peer = '+447700900123';

const adapter = (app: TestApp) => (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;
/** The calls an instance's internal endpoint received. */
const served = (app: TestApp) => app.logs.filter((l) => l.path === FORWARD_PATH).length;
const lease = (app: TestApp, sessionId: number) =>
  app.running.data.one<{ owner: string; owner_url: string | null; lease_until: number }>(
    'SELECT owner, owner_url, lease_until FROM sessions_leases WHERE session_id = ?',
    [sessionId],
  );
/** `wharf_session_calls_forwarded_total` of an instance's GET /metrics for a method and outcome (0 when absent). */
async function forwardedCalls(app: TestApp, method: string, outcome: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', app.url))).text();
  const line = text.split('\n').find((l) => l.startsWith(`wharf_session_calls_forwarded_total{method="${method}",outcome="${outcome}"} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
/** The same answer, but for the message id each send gets. */
const withoutMsgId = (res: Res) => [res.status, { ...res.body, data: { ...res.body.data, msgId: 0 } }];

beforeAll(async () => {
  const env = { WHARF_DATABASE__URL: await freshDatabase() };
  const dataDir = tempDir();
  a = await startMessagingApp(TOML, { dataDir, env });
  b = await startMessagingApp(TOML, { dataDir, env });
  t = await tenant(a);
  network.account(peer, 'Peer');
});
afterAll(async () => {
  await b?.close();
  // A was killed by the last test: its own close may fail to write.
  await a?.close().catch(() => {});
});

describe('a request reaching the instance that does not drive the session', () => {
  it('pairing: connect and the QR code on B are A’s; the session is driven by A alone', async () => {
    s = await whatsappSession(a, t.pat, { name: 'Forwarded' });
    const connect = await call(a, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    expect(connect.body.data.status).toBe('need_scan');
    expect(await lease(b, s.id)).toMatchObject({ owner: adapter(a).leases.owner, owner_url: a.url.replace(/\/$/, '') });
    // Connect again on B joins A's pairing: the same QR code, no socket on B.
    const again = await call(b, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.qrCode).toBe(connect.body.data.qrCode);
    const onA = await call(a, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`);
    const onB = await call(b, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`);
    expect(onA.body).toEqual({ success: true, data: { qrCode: connect.body.data.qrCode, qrImage: connect.body.data.qrImage } });
    expect([onB.status, onB.body]).toEqual([onA.status, onA.body]);
    network.scan(s.id, s.phone, 'Forwarded');
    await until(async () => (await statusOf(b, s.id)) === 'connected', 'connected');
    expect(adapter(b).connectionOf(s.id)).toBeUndefined();
    expect(network.sockets.filter((x) => x.sessionId === s.id && !x.closed)).toHaveLength(1);
  });

  it('user, send, groups: run on A’s socket and answer exactly as on A', async () => {
    const servedBefore = served(a);
    for (const path of ['/api/user', '/api/status']) {
      const onA = await call(a, s.apiKey, 'GET', path);
      const onB = await call(b, s.apiKey, 'GET', path);
      expect(onA.status, onA.text).toBe(200);
      expect([onB.status, onB.body], path).toEqual([onA.status, onA.body]);
    }
    expect((await call(b, s.apiKey, 'GET', '/api/user')).body.data).toMatchObject({ name: 'Forwarded', phone_number: s.phone });

    const sendsBefore = network.calls.filter((c) => c.method === 'sendMessage' && c.sessionId === s.id).length;
    // The server's acks wait, so both answers are read before them (accepted: in_progress).
    network.holdAcks = true;
    const sentOnA = await call(a, s.apiKey, 'POST', '/api/send-message', { to: peer, text: 'from A' });
    const sentOnB = await call(b, s.apiKey, 'POST', '/api/send-message', { to: peer, text: 'from B' });
    network.releaseAcks();
    expect(sentOnA.status, sentOnA.text).toBe(200);
    expect(sentOnA.body.data.status).toBe('in_progress');
    expect(withoutMsgId(sentOnB)).toEqual(withoutMsgId(sentOnA));
    // Both went out on A's one socket (B has none), and B's is logged sent by A.
    const sends = network.calls.filter((c) => c.method === 'sendMessage' && c.sessionId === s.id).slice(sendsBefore);
    expect(sends.map((c) => (c.args[1] as { text: string }).text)).toEqual(['from A', 'from B']);
    expect(adapter(b).connectionOf(s.id)).toBeUndefined();
    // Acknowledged by the network on A's socket: sent (2) or further, on the row B logged.
    const info = await until(async () => {
      const res = await call(b, s.apiKey, 'GET', `/api/messages/${sentOnB.body.data.msgId}/info`);
      return res.body.data?.status >= 2 ? res : undefined;
    }, 'the message acknowledged');
    expect(info.status, info.text).toBe(200);

    // A group made on B, through A; the list answers the same on both.
    const created = await call(b, s.apiKey, 'POST', '/api/groups', { name: 'Made on B', participants: [peer] });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ subject: 'Made on B', size: 2 });
    const groupsA = await call(a, s.apiKey, 'GET', '/api/groups');
    const groupsB = await call(b, s.apiKey, 'GET', '/api/groups');
    expect(groupsA.body.data.map((g: { name: string }) => g.name)).toContain('Made on B');
    expect([groupsB.status, groupsB.body]).toEqual([groupsA.status, groupsA.body]);
    // Each of B's requests above that needed the socket was one call to A (the status is read from the database).
    expect(served(a) - servedBefore).toBe(5);
    expect(served(b)).toBe(0);
  });

  it('errors from A come back with the same status and body', async () => {
    const unknownGroup = '120363000000000000@g.us';
    const servedBefore = served(a);
    for (const [method, path, body] of [
      ['GET', `/api/groups/${unknownGroup}/metadata`, undefined],
      ['POST', `/api/groups/${unknownGroup}/leave`, {}],
      ['POST', '/api/send-presence-update', { jid: 'not a jid', type: 'composing' }],
    ] as const) {
      const onA = await call(a, s.apiKey, method, path, body);
      const onB = await call(b, s.apiKey, method, path, body);
      expect(onA.status, `${path}: ${onA.text}`).toBeGreaterThanOrEqual(400);
      expect(onA.status).toBeLessThan(500);
      expect([onB.status, onB.body], path).toEqual([onA.status, onA.body]);
    }
    // The group calls were refused by A's adapter, for B through A; the malformed jid by B's own validation, before any call.
    expect(served(a) - servedBefore).toBe(2);
  });
});

describe('decrypt-media reaching the instance that does not drive the session', () => {
  it('runs on A (the download and the decryption), and the bytes come back intact; a wrong key is the same 422 on both', async () => {
    const plain = Buffer.from('\x89PNG\r\n\x1a\n forwarded image bytes '.repeat(64));
    const enc = encryptMedia(plain, 'image');
    const directPath = `/v/t62.7118-24/${Date.now()}f.enc`;
    network.cdn.set(directPath, { bytes: enc.file, expired: false });
    const message = (mediaKey: string) => ({
      imageMessage: { url: `https://mmg.whatsapp.net${directPath}`, directPath, mimetype: 'image/png', mediaKey, fileLength: plain.length },
    });
    const servedBefore = served(a);
    const res = await call(b, s.apiKey, 'POST', '/api/decrypt-media', { data: { message: message(enc.mediaKey.toString('base64')) } });
    expect(res.status, res.text).toBe(200);
    expect(served(a) - servedBefore).toBe(1);
    expect(Buffer.from(await (await fetch(res.body.publicUrl)).arrayBuffer()).equals(plain)).toBe(true);

    const wrong = message(Buffer.alloc(32, 7).toString('base64'));
    const onA = await call(a, s.apiKey, 'POST', '/api/decrypt-media', { data: { message: wrong } });
    const onB = await call(b, s.apiKey, 'POST', '/api/decrypt-media', { data: { message: wrong } });
    expect(onA.status, onA.text).toBe(422);
    expect([onB.status, onB.body]).toEqual([onA.status, onA.body]);
    expect(served(a) - servedBefore).toBe(2);
    // Counted on B, the instance that forwarded them; A forwarded nothing.
    expect(await forwardedCalls(b, 'decryptMedia', 'ok')).toBe(1);
    expect(await forwardedCalls(b, 'decryptMedia', 'error')).toBe(1);
    expect(await forwardedCalls(a, 'decryptMedia', 'ok')).toBe(0);
  });
});

describe('the internal endpoint', () => {
  const key = () => a.running.keys.derive(FORWARD_KEY);
  function signed(body: string, options: { timestamp?: number; nonce?: string; key?: Buffer } = {}) {
    const timestamp = String(options.timestamp ?? Date.now());
    const nonce = options.nonce ?? randomBytes(16).toString('base64url');
    const signature = createHmac('sha256', options.key ?? key())
      .update(`POST\n${FORWARD_PATH}\n${timestamp}\n${nonce}\n`)
      .update(body)
      .digest('hex');
    return { 'content-type': 'application/json', 'x-wharf-timestamp': timestamp, 'x-wharf-nonce': nonce, 'x-wharf-signature': signature };
  }
  const post = (headers: Record<string, string>, raw: string) => a.request('POST', FORWARD_PATH, { headers, raw });
  const userCall = () =>
    JSON.stringify({
      owner: adapter(a).leases.owner,
      method: 'user',
      session: { id: s.id, orgId: t.orgId, name: 'Forwarded', phoneNumber: s.phone, status: 'connected', statusReason: null },
      args: [],
    });

  it('runs a fresh call signed with the instances’ key, and signs its answer', async () => {
    const res = await post(signed(userCall()), userCall());
    expect(res.status, res.text).toBe(200);
    expect(res.body.result).toMatchObject({ phone_number: s.phone, name: 'Forwarded' });
    expect(res.headers.get('x-wharf-signature')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses a missing, wrong, stale or replayed signature (401), an unknown method (400), never with a 500', async () => {
    const body = userCall();
    const refused = async (headers: Record<string, string>, raw = body) => {
      const res = await post(headers, raw);
      return [res.status, res.body];
    };
    const unauthorized = (why: string) => [401, { error: expect.stringContaining(why) }];
    expect(await refused({ 'content-type': 'application/json' })).toEqual(unauthorized('required'));
    expect(await refused(signed(body, { key: randomBytes(32) }))).toEqual(unauthorized('bad signature'));
    expect(await refused({ ...signed(body), 'x-wharf-signature': 'zz' })).toEqual(unauthorized('bad signature'));
    expect(await refused(signed(body), `${body} `)).toEqual(unauthorized('bad signature'));
    expect(await refused(signed(body, { timestamp: Date.now() - 120_000 }))).toEqual(unauthorized('timestamp'));
    const once = signed(body);
    expect((await post(once, body)).status).toBe(200);
    expect(await refused(once)).toEqual(unauthorized('replayed'));
    for (const method of ['close', 'serveForwarded', 'constructor', '__proto__', 'contacts', 42]) {
      const call = JSON.stringify({ ...JSON.parse(body), method });
      expect(await refused(signed(call), call), String(method)).toEqual([400, { error: expect.stringContaining('Unknown method') }]);
    }
    expect(await refused(signed('{"owner":'), '{"owner":')).toEqual([400, { error: expect.any(String) }]);
    expect((await a.request('GET', FORWARD_PATH)).status).toBe(405);
  });

  it('a call for an instance that does not hold the lease is refused with 503, not run', async () => {
    const call = JSON.stringify({ ...JSON.parse(userCall()), owner: 'another-instance' });
    const res = await post(signed(call), call);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ code: 'unavailable', retry_after: LEASE_SECONDS });
  });
});

describe('when the instances disagree, or the owner dies', () => {
  it('two instances that each think the other drives a session: one call, then 503, no bounce', async () => {
    const other = await whatsappSession(a, t.pat);
    // The lease names an instance that is not B, at B's address (B restarted, say): A hands the call to B once.
    await a.running.data.run('INSERT INTO sessions_leases (session_id, owner, owner_url, lease_until) VALUES (?, ?, ?, ?)', [
      other.id,
      'instance-gone',
      b.url.replace(/\/$/, ''),
      Date.now() + 60_000,
    ]);
    const [servedA, servedB] = [served(a), served(b)];
    const res = await call(a, t.pat, 'GET', `/api/whatsapp-sessions/${other.id}/qrcode`);
    expect(res.status, res.text).toBe(503);
    expect(res.headers.get('retry-after')).toBe(String(LEASE_SECONDS));
    expect([served(a) - servedA, served(b) - servedB]).toEqual([0, 1]);
    expect(network.sockets.filter((x) => x.sessionId === other.id)).toHaveLength(0);
    await a.running.data.run('DELETE FROM sessions_leases WHERE session_id = ?', [other.id]);
  });

  it('A dies: B answers 503 while A’s lease lasts, then takes the session over and serves it itself', async () => {
    const before = await call(b, s.apiKey, 'GET', '/api/user');
    expect(before.status).toBe(200);
    const held = (await lease(b, s.id))!;
    // Gone without a word: its HTTP server and its database connections, the socket it can no longer renew.
    a.running.server!.closeAllConnections();
    a.running.server!.close();
    await a.running.data.close();
    const down = await call(b, s.apiKey, 'GET', '/api/user');
    expect(down.status, down.text).toBe(503);
    expect(down.body).toMatchObject({ success: false });
    expect(down.headers.get('retry-after')).toBe(String(LEASE_SECONDS));
    expect(await forwardedCalls(b, 'user', 'unreachable')).toBe(1);
    expect(adapter(b).connectionOf(s.id)).toBeUndefined();
    // B resumes the session once the lease ran out (its supervisor), and serves it from its own socket.
    await until(() => adapter(b).connectionOf(s.id)?.socket, 'B driving the session', LEASE_SECONDS * 1000 + 15_000);
    expect(Date.now()).toBeGreaterThanOrEqual(held.lease_until);
    expect((await lease(b, s.id))?.owner).toBe(adapter(b).leases.owner);
    const after = await until(async () => {
      const res = await call(b, s.apiKey, 'GET', '/api/user');
      return res.status === 200 ? res : undefined;
    }, 'the user on B');
    expect(after.body).toEqual(before.body);
    const sent = await call(b, s.apiKey, 'POST', '/api/send-message', { to: peer, text: 'after the takeover' });
    expect(sent.status, sent.text).toBe(200);
    expect(network.calls.filter((c) => c.method === 'sendMessage' && c.sessionId === s.id).at(-1)?.args[1]).toMatchObject({ text: 'after the takeover' });
  });
});

describe('parts', () => {
  it('a call sent and never answered: a send or a group creation may have run on the owner (no retry advised); a read is to retry; nothing sent is to retry', async () => {
    // An owner that takes the request and never answers, and an address where nothing listens.
    const silent = http.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const client = new OwnerClient({ key: randomBytes(32), timeoutMs: 300, retryAfterSeconds: 6, log: a.running.log, metrics: new Registry() });
    const session = { id: 42, orgId: 'org', name: 'x', phoneNumber: null, status: 'connected' } as never;
    const attempt = async (url: string, method: 'send' | 'createGroup' | 'groups') => {
      try {
        await client.call({ owner: 'o', url }, { owner: 'o', method, session, args: [] });
      } catch (err) {
        return err as { status: number; message: string; retryAfter?: number };
      }
      throw new Error('the call did not fail');
    };
    try {
      const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      for (const method of ['send', 'createGroup'] as const) {
        const err = await attempt(silentUrl, method);
        expect(err.status, method).toBe(503);
        expect(err.message, method).toMatch(/no answer within 300 ms\). It may have been carried out there: check .* before you send it again\.$/);
        expect(err.retryAfter, method).toBeUndefined();
      }
      const read = await attempt(silentUrl, 'groups');
      expect(read).toMatchObject({ status: 503, retryAfter: 6 });
      expect(read.message).toMatch(/no answer within 300 ms\)\. Retry/);
      const refused = await attempt(`http://127.0.0.1:${closedPort}`, 'send');
      expect(refused).toMatchObject({ status: 503, retryAfter: 6 });
      expect(refused.message).toMatch(/unreachable: ECONNREFUSED\)\. Retry/);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('a call’s JSON carries bytes (decrypt-media’s answer) intact, and nothing else is taken for bytes', () => {
    const value = { bytes: Buffer.from([0, 1, 2, 255]), nested: [{ key: new Uint8Array([7, 8]) }], text: 'x', tagged: { '$wharf:buffer': 'AA==', other: 1 } };
    const back = decode(encode(value)) as typeof value;
    expect(Buffer.isBuffer(back.bytes) && back.bytes.equals(value.bytes)).toBe(true);
    expect([...(back.nested[0]!.key as Uint8Array)]).toEqual([7, 8]);
    expect(back.text).toBe('x');
    expect(back.tagged).toEqual({ '$wharf:buffer': 'AA==', other: 1 });
    expect(decode(encode({ result: undefined }))).toEqual({});
  });

  it('the internal URL: configured, else the listen address, else this machine’s first non-loopback IPv4 address', () => {
    expect(internalUrl('http://wharf-1:8080/', { host: '0.0.0.0', port: 9 })).toBe('http://wharf-1:8080');
    expect(internalUrl(undefined, { host: '10.0.0.5', port: 8080 })).toBe('http://10.0.0.5:8080');
    expect(internalUrl(undefined, { host: '::1', port: 8080 })).toBe('http://[::1]:8080');
    const any = internalUrl(undefined, { host: '0.0.0.0', port: 8080 });
    expect(any === null || /^http:\/\/\d+\.\d+\.\d+\.\d+:8080$/.test(any)).toBe(true);
    expect(any).not.toMatch(/127\.0\.0\.1/);
  });
});
