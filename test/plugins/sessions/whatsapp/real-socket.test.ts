/**
 * A real Baileys socket (nothing mocked) against a local WebSocket server standing in for
 * WhatsApp's, which closes every connection as soon as the client has said hello: the session
 * reports connecting with the close's code and reason, and reconnects with growing, jittered
 * waits; disconnecting stops it. And against no server at all (a name that does not resolve, a
 * port nobody listens on), as a machine without internet sees WhatsApp: connect answers at once
 * with why, the reason is kept with the session, and a session never paired gives up. The live
 * network cannot be reached from here; this is as close to it as the machine allows.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { WhatsAppNetwork } from '../../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../../plugins/sessions/service.ts';
import type { TestApp } from '../../../helpers/app.ts';
import { freePort } from '../../../helpers/cli.ts';
import { call, eventsOf, startMessagingApp, statusOf, type Tenant, tenant, until, whatsappSession } from '../helpers.ts';

let app: TestApp;
let t: Tenant;
let server: WebSocketServer;
/** When each connection arrived, and the first bytes the client sent on it. */
const connections: { at: number; hello: Buffer | undefined }[] = [];

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  server.on('connection', (socket) => {
    const entry: { at: number; hello: Buffer | undefined } = { at: Date.now(), hello: undefined };
    connections.push(entry);
    socket.once('message', (data) => {
      entry.hello = Buffer.from(data as Buffer);
      socket.close(1011, 'go away');
    });
    // A client that says nothing is closed too.
    setTimeout(() => socket.terminate(), 2000).unref();
  });
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as AddressInfo).port;
  app = await startMessagingApp(`[plugins.sessions.whatsapp]
websocket_url = "ws://127.0.0.1:${port}/ws/chat"
connect_timeout_ms = 1000
reconnect_initial_delay_ms = 300
reconnect_max_delay_ms = 1200
unpaired_max_attempts = 5
log_level = "silent"
`);
  t = await tenant(app);
});
afterAll(async () => {
  await app?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('a real Baileys socket against a server that closes the connection', () => {
  it('reports connecting with the code and reason, reconnects with backoff, and stops when disconnected', async () => {
    const s = await whatsappSession(app, t.pat);
    const res = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    // Nothing paired, nothing shown: the first attempt failed, connect answers that (without waiting out connect_timeout_ms).
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      status: 'connecting',
      message: expect.stringMatching(/^connection closed \(428\): Connection Terminated; next attempt in 0\.[1-3]\d* s \(attempt 2 of 5\)$/),
    });
    await until(async () => connections.length >= 4, 'four connection attempts', 15_000);
    expect(await statusOf(app, s.id)).toBe('connecting');
    // It is Baileys speaking: WhatsApp's "WA" header and dictionary version open its first frame.
    expect(connections[0]!.hello?.subarray(0, 2).toString()).toBe('WA');
    const adapter = (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;
    expect(adapter.loaded).toBe(true);

    const reasons = (await eventsOf(app, s.id)).filter((e) => e.event === 'session.status').map((e) => (e.payload.data as { reason?: string }).reason ?? '');
    const attempts = reasons.filter((r) => /\(attempt \d+ of 5\)$/.test(r));
    expect(attempts[0]).toBe(res.body.data.message);
    expect(attempts[1]).toMatch(/^connection closed \(428\): Connection Terminated; next attempt in [\d.]+ s \(attempt 3 of 5\)$/);
    // Waits between attempts: about 150-300 ms, then 300-600, then 600-1200 (plus the time a connection takes).
    const gaps = connections.slice(0, 4).map((c, i, all) => (i ? c.at - all[i - 1]!.at : 0));
    expect(gaps[1]).toBeGreaterThanOrEqual(140);
    expect(gaps[2]).toBeGreaterThanOrEqual(290);
    expect(gaps[3]).toBeGreaterThanOrEqual(590);
    expect(gaps[3]).toBeGreaterThan(gaps[1]!);

    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/disconnect`)).body.data).toEqual({
      status: 'disconnected',
      message: 'disconnected by request; the session was not paired yet: connect starts pairing again',
    });
    const after = connections.length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(connections.length).toBe(after);
    expect(await statusOf(app, s.id)).toBe('disconnected');
  });
});

/** Log lines the server wrote about a session (its own, not Baileys'), by level. */
function serverLines(test: TestApp, sessionId: number, level: string) {
  return test.logs.filter((l) => l.sessionId === sessionId && l.level === level && typeof l.msg === 'string' && l.msg.startsWith('WhatsApp session'));
}

describe.each([
  ['a name that does not resolve', async () => 'wss://wharf-test.invalid/ws/chat', /getaddrinfo (ENOTFOUND|EAI_AGAIN) wharf-test\.invalid/],
  ['a port nobody listens on', async () => `ws://127.0.0.1:${await freePort()}/ws/chat`, /connect ECONNREFUSED 127\.0\.0\.1:\d+/],
])('WhatsApp cannot be reached (%s)', (_what, url, cause) => {
  let unreachable: TestApp;
  let u: Tenant;
  beforeAll(async () => {
    // connect_timeout_ms stays at its 20 s default: connect must not wait it out. Waits of 0.5 s at
    // least between attempts leave time to read the session while it waits.
    unreachable = await startMessagingApp(`[plugins.sessions.whatsapp]
websocket_url = "${await url()}"
reconnect_initial_delay_ms = 1000
reconnect_max_delay_ms = 2000
log_level = "silent"
`);
    u = await tenant(unreachable);
  });
  afterAll(() => unreachable?.close());

  it('connect answers at once with the network error; the reason is kept with the session, logged, announced and in every 409; a session never paired gives up after 3 attempts', async () => {
    const s = await whatsappSession(unreachable, u.pat);
    const started = Date.now();
    const res = await call(unreachable, u.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    expect(Date.now() - started).toBeLessThan(5000);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('connecting');
    const first = res.body.data.message as string;
    expect(first).toMatch(new RegExp(`^WhatsApp cannot be reached \\(${cause.source}\\); next attempt in (0\\.[5-9]|1\\.0) s \\(attempt 2 of 3\\)$`));

    // Read while it waits for attempt 2: the session, the list, the 409s say the same.
    const detail = (await call(unreachable, u.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data;
    expect(detail).toMatchObject({ status: 'connecting', status_reason: first });
    const listed = (await call(unreachable, u.pat, 'GET', '/api/whatsapp-sessions')).body.data.find((x: { id: number }) => x.id === s.id);
    expect(listed).toMatchObject({ status: 'connecting', status_reason: first });
    const qr = await call(unreachable, u.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`);
    expect(qr.status).toBe(409);
    expect(qr.body.message).toBe(`The session is connecting and has no QR code yet: ${first}; ask again shortly`);
    const busy = await call(unreachable, s.apiKey, 'POST', '/api/send-message', { to: '+14155550100', text: 'x' });
    expect(busy.status).toBe(409);
    expect(busy.body.message).toBe(`Session ${s.id} is connecting: ${first}; poll GET /api/status until it is connected`);

    await until(async () => (await statusOf(unreachable, s.id)) === 'failed', 'failed', 10_000);
    const gaveUp = (await call(unreachable, u.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data;
    expect(gaveUp.status).toBe('failed');
    expect(gaveUp.status_reason).toMatch(
      new RegExp(
        `^WhatsApp cannot be reached \\(${cause.source}\\); gave up after 3 failed attempts: the session is not paired yet, so it does not retry on its own; connect again to retry$`,
      ),
    );
    // /api/status stays {status}, as the spec has it.
    expect((await call(unreachable, s.apiKey, 'GET', '/api/status')).body).toEqual({ status: 'failed' });
    const send = await call(unreachable, s.apiKey, 'POST', '/api/send-message', { to: '+14155550100', text: 'x' });
    expect(send.status).toBe(409);
    expect(send.body.message).toBe(`Session ${s.id} is not connected (status: failed: ${gaveUp.status_reason}); connect it and poll GET /api/status`);

    // The session log has every attempt with its reason, newest first; the events carry the same reasons.
    const logs = (await call(unreachable, u.pat, 'GET', `/api/whatsapp-sessions/${s.id}/session-logs?per_page=100`)).body.data.data as {
      event_type: string;
      status: string;
      reason: string;
    }[];
    expect(logs.map((l) => [l.event_type, l.status, l.reason.replace(/in [\d.]+ s/, 'in N s').replace(cause, 'CAUSE')])).toEqual([
      [
        'status_change',
        'failed',
        'WhatsApp cannot be reached (CAUSE); gave up after 3 failed attempts: the session is not paired yet, so it does not retry on its own; connect again to retry',
      ],
      ['status_update', 'connecting', 'WhatsApp cannot be reached (CAUSE); next attempt in N s (attempt 3 of 3)'],
      ['status_update', 'connecting', 'WhatsApp cannot be reached (CAUSE); next attempt in N s (attempt 2 of 3)'],
      ['status_change', 'connecting', 'connect requested'],
    ]);
    expect(logs[2]!.reason).toBe(first);
    const events = (await eventsOf(unreachable, s.id))
      .filter((e) => e.event === 'session.status')
      .map((e) => e.payload.data as { status: string; reason: string });
    expect(events.map((e) => e.reason)).toEqual(logs.map((l) => l.reason).reverse());

    // One server log line when it started failing, one when it gave up: not one per attempt.
    expect(serverLines(unreachable, s.id, 'warn').map((l) => l.msg)).toEqual([
      `WhatsApp session ${s.id} cannot connect: ${first} (every attempt is in its session log)`,
      `WhatsApp session ${s.id} gave up connecting: ${gaveUp.status_reason}`,
    ]);

    // A new connect counts its attempts from 1 again, and gives up again after 3.
    const again = await call(unreachable, u.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    expect(again.body.data).toEqual({ status: 'connecting', message: expect.stringMatching(/; next attempt in [\d.]+ s \(attempt 2 of 3\)$/) });
    await until(async () => (await statusOf(unreachable, s.id)) === 'failed', 'failed again', 10_000);
    expect(serverLines(unreachable, s.id, 'warn')).toHaveLength(4);
  });
});
