/**
 * A real Baileys socket (nothing mocked) against a local WebSocket server standing in for
 * WhatsApp's, which closes every connection as soon as the client has said hello: the session
 * reports connecting with the close's code and reason, and reconnects with growing, jittered
 * waits; disconnecting stops it. The live network cannot be reached from here; this is as close
 * to it as the machine allows.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { WhatsAppNetwork } from '../../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../../plugins/sessions/service.ts';
import type { TestApp } from '../../../helpers/app.ts';
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
    // Nothing paired, nothing shown: connect answers what it has after connect_timeout_ms.
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('connecting');
    await until(() => connections.length >= 4, 'four connection attempts', 15_000);
    expect(statusOf(app, s.id)).toBe('connecting');
    // It is Baileys speaking: WhatsApp's "WA" header and dictionary version open its first frame.
    expect(connections[0]!.hello?.subarray(0, 2).toString()).toBe('WA');
    const adapter = (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;
    expect(adapter.loaded).toBe(true);

    const reasons = eventsOf(app, s.id)
      .filter((e) => e.event === 'session.status')
      .map((e) => (e.payload.data as { reason?: string }).reason ?? '');
    const attempts = reasons.filter((r) => /\(attempt \d+\)$/.test(r));
    expect(attempts[0]).toMatch(/^connection closed \(428\): Connection Terminated; reconnecting in 0\.[1-3]\d* s \(attempt 1\)$/);
    expect(attempts[1]).toMatch(/\(attempt 2\)$/);
    // Waits between attempts: about 150-300 ms, then 300-600, then 600-1200 (plus the time a connection takes).
    const gaps = connections.slice(0, 4).map((c, i, all) => (i ? c.at - all[i - 1]!.at : 0));
    expect(gaps[1]).toBeGreaterThanOrEqual(140);
    expect(gaps[2]).toBeGreaterThanOrEqual(290);
    expect(gaps[3]).toBeGreaterThanOrEqual(590);
    expect(gaps[3]).toBeGreaterThan(gaps[1]!);

    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/disconnect`)).body.data.status).toBe('disconnected');
    const after = connections.length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(connections.length).toBe(after);
    expect(statusOf(app, s.id)).toBe('disconnected');
  });
});
