/**
 * A whatsapp session across two `wharf serve` processes (test/helpers/cluster.ts) on one
 * PostgreSQL: one local WebSocket server stands in for WhatsApp's (it accepts and stays silent,
 * so a socket stays open while the session connects) and counts the open sockets. What needs the
 * session's socket and reaches the instance that does not drive it is run by the one that does
 * (plugins/sessions/forwarding.ts), across processes; `kill -9` of the owner: the other answers 503
 * while the dead one's lease lasts, then takes the session. Never two sockets at once.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { type Cluster, type Instance, startCluster } from './helpers/cluster.ts';
import { login } from './helpers/identity.ts';
import { overHttp } from './helpers/served.ts';

const LEASE_SECONDS = 6;

describe('a whatsapp session on two instances (processes) sharing one PostgreSQL database', () => {
  let cluster: Cluster;
  let server: WebSocketServer;
  let open = 0;
  let most = 0;
  beforeAll(async () => {
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    server.on('connection', (socket) => {
      most = Math.max(most, ++open);
      socket.on('close', () => open--);
    });
    await new Promise((resolve) => server.once('listening', resolve));
    const port = (server.address() as AddressInfo).port;
    cluster = await startCluster({
      instances: 2,
      toml: [
        '[plugins.sessions]',
        `lease_seconds = ${LEASE_SECONDS}`,
        '[plugins.sessions.whatsapp]',
        `websocket_url = "ws://127.0.0.1:${port}/"`,
        'connect_timeout_ms = 300000',
        'watchdog_silence_seconds = 0',
        'log_level = "silent"',
      ].join('\n'),
    });
  }, 180_000);
  afterAll(async () => {
    await cluster?.close();
    for (const client of server?.clients ?? []) client.terminate();
    await new Promise((resolve) => server?.close(resolve));
  }, 60_000);

  it('a request on the other instance is run by the owner; the owner killed: 503 while its lease lasts, then the other takes the session', async () => {
    const [a, b] = cluster.instances as [Instance, Instance];
    const user = await cluster.createUser('Sessions');
    const cookie = await login(overHttp(a.url), user.email, user.password);
    const pat = (await overHttp(a.url).request('POST', '/api/personal-access-tokens', { headers: { cookie, origin: a.url }, body: { name: 'cluster' } })).body
      .data.token as string;
    const as = (i: Instance, method: string, path: string, body?: unknown) =>
      overHttp(i.url).request(method, path, { headers: { authorization: `Bearer ${pat}` }, body });
    const created = await as(a, 'POST', '/api/whatsapp-sessions', { name: 'Cluster', phone_number: '+442071234999', account_protection: false });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id as number;

    // Connect on A: the server never answers, so the call waits (not awaited) and the session stays connecting on A.
    as(a, 'POST', `/api/whatsapp-sessions/${id}/connect`, {}).catch(() => {});
    await expect.poll(() => open, { timeout: 20_000 }).toBe(1);
    // The QR code asked of B is answered by A (it has none yet): the same answer, not B's 503.
    const onA = await as(a, 'GET', `/api/whatsapp-sessions/${id}/qrcode`);
    const onB = await as(b, 'GET', `/api/whatsapp-sessions/${id}/qrcode`);
    expect(onA.status, onA.text).toBe(409);
    expect(onA.body.error).toContain('connecting and has no QR code yet');
    expect([onB.status, onB.body]).toEqual([onA.status, onA.body]);
    // Connect on B joins A's connection: B opens no socket of its own.
    const joined = await Promise.race([as(b, 'POST', `/api/whatsapp-sessions/${id}/connect`, {}), new Promise((r) => setTimeout(() => r('waiting'), 1500))]);
    expect(joined).toBe('waiting');
    expect(open).toBe(1);

    await a.kill();
    // A's socket went with it; its lease has not run out: B cannot reach A, and says so with 503.
    await expect.poll(() => open, { timeout: 10_000 }).toBe(0);
    const down = await as(b, 'GET', `/api/whatsapp-sessions/${id}/qrcode`);
    expect(down.status, down.text).toBe(503);
    expect(down.headers.get('retry-after')).toBe(String(LEASE_SECONDS));
    // Once the lease ran out, B takes the session when asked to connect it: its socket, the only one.
    await expect
      .poll(async () => (await as(b, 'GET', `/api/whatsapp-sessions/${id}/qrcode`)).status, { timeout: LEASE_SECONDS * 1000 + 10_000, interval: 250 })
      .toBe(409);
    as(b, 'POST', `/api/whatsapp-sessions/${id}/connect`, {}).catch(() => {});
    await expect.poll(() => open, { timeout: 20_000 }).toBe(1);
    expect(most).toBe(1);
    const onBNow = await as(b, 'GET', `/api/whatsapp-sessions/${id}/qrcode`);
    expect(onBNow.body.error).toContain('connecting and has no QR code yet');
  }, 120_000);
});
