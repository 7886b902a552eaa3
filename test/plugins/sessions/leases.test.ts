/**
 * Session leases across instances: two apps on one PostgreSQL database (the same data dir, so the
 * same key decrypts a session's credentials), each with its own WebSocket URL on one local server
 * standing in for WhatsApp's (it accepts and stays silent, so a socket stays open): the server
 * counts the open sockets of each instance. A whatsapp session is driven by exactly one instance;
 * the other does not open a socket for it and hands what needs one to the owner (forwarding.ts;
 * the calls themselves, with a connected session, in forwarding.test.ts). An owner cut off
 * from the database closes its socket before its lease runs out, and the other resumes the
 * session once it has run out, not before; an owner that finds its lease taken closes at once.
 * Runs on PostgreSQL in every project: it is about what only a shared database does.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocketServer } from 'ws';
import type { WhatsAppNetwork } from '../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import { type TestApp, tempDir } from '../../helpers/app.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { call, startMessagingApp, type Tenant, tenant, until, whatsappSession } from './helpers.ts';

const LEASE_SECONDS = 3;

let a: TestApp;
let b: TestApp;
let port: number;
let shared: { dataDir: string; env: Record<string, string> };
let t: Tenant;
let server: WebSocketServer;
/** Open sockets per instance path (/a, /b); every socket opened, with when and what the other instance had open then. */
const open = { a: 0, b: 0 } as Record<string, number>;
const opened: { path: string; at: number; otherOpen: number }[] = [];

const toml = (port: number, path: string) => `[plugins.sessions]
lease_seconds = ${LEASE_SECONDS}
[plugins.sessions.whatsapp]
websocket_url = "ws://127.0.0.1:${port}/${path}"
connect_timeout_ms = 300000
watchdog_silence_seconds = 0
log_level = "silent"
`;

const network = (app: TestApp) => (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  server.on('connection', (socket, req) => {
    const path = req.url?.slice(1) ?? '';
    open[path] = (open[path] ?? 0) + 1;
    opened.push({ path, at: Date.now(), otherOpen: open[path === 'a' ? 'b' : 'a'] ?? 0 });
    socket.on('close', () => {
      open[path] = (open[path] ?? 1) - 1;
    });
  });
  await new Promise((resolve) => server.once('listening', resolve));
  port = (server.address() as AddressInfo).port;
  const env = { WHARF_DATABASE__URL: await freshDatabase() };
  const dataDir = tempDir();
  shared = { dataDir, env };
  a = await startMessagingApp(toml(port, 'a'), { dataDir, env });
  b = await startMessagingApp(toml(port, 'b'), { dataDir, env });
  t = await tenant(a);
});
afterAll(async () => {
  await b?.close();
  // A's database pool was closed by the test: its own close may fail to write.
  await a?.close().catch(() => {});
  for (const client of server?.clients ?? []) client.terminate();
  await new Promise((resolve) => server?.close(resolve));
});

const lease = (app: TestApp, sessionId: number) =>
  app.running.data.one<{ owner: string; lease_until: number }>('SELECT owner, lease_until FROM sessions_leases WHERE session_id = ?', [sessionId]);

describe('a whatsapp session on two instances sharing one PostgreSQL database', () => {
  it('is driven by one instance; the other takes it over after the lease ran out, never before, never both at once', async () => {
    const s = await whatsappSession(a, t.pat);
    // Connect on A; the server never answers, so the answer waits (A's database is gone by then: not checked).
    call(a, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {}).catch(() => {});
    await until(() => open.a === 1, 'A’s socket', 10_000);
    expect((await lease(b, s.id))?.owner).toBe(network(a).leases.owner);
    // Paired, and to be resumed: exactly what B's sweep looks for once nobody holds the lease.
    await b.running.data.run('UPDATE sessions_whatsapp_accounts SET registered = 1, resume = 1 WHERE session_id = ?', [s.id]);
    // Longer than the lease and than two of B's sweeps: A renews, B opens nothing.
    await new Promise((r) => setTimeout(r, LEASE_SECONDS * 1000 + 2500));
    expect(open).toEqual({ a: 1, b: 0 });
    expect(network(b).connectionOf(s.id)).toBeUndefined();
    expect((await lease(b, s.id))?.owner).toBe(network(a).leases.owner);

    // What needs the socket, on B, runs on A (forwarding.ts): the same answers as A gives, nothing opened on B.
    for (const path of [`/api/whatsapp-sessions/${s.id}/qrcode`, `/api/whatsapp-sessions/${s.id}/qr-code`]) {
      const onA = await call(a, t.pat, 'GET', path);
      const onB = await call(b, t.pat, 'GET', path);
      expect(onA.status).toBe(409);
      expect(onA.body.error).toContain('The session is connecting and has no QR code yet');
      expect([onB.status, onB.body]).toEqual([onA.status, onA.body]);
    }
    const read = await call(b, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`);
    expect(read.status).toBe(200);
    expect(read.body.data.status).toBe('connecting');
    // A send while the owner reports the session connected: A has no socket yet, so 409 as on A, and the message is not kept.
    await b.running.data.run("UPDATE sessions_sessions SET status = 'connected' WHERE id = ?", [s.id]);
    const sent = await call(b, s.apiKey, 'POST', '/api/send-message', { to: '+442071234567', text: 'hello' });
    expect(sent.status, sent.text).toBe(409);
    expect(sent.body).toMatchObject({ success: false });
    expect(await b.running.data.all('SELECT status FROM sessions_messages WHERE session_id = ?', [s.id])).toEqual([]);
    await b.running.data.run("UPDATE sessions_sessions SET status = 'connecting' WHERE id = ?", [s.id]);
    expect(open).toEqual({ a: 1, b: 0 });

    // A is cut off from the database: it cannot renew, so it closes its socket before the lease runs out.
    const held = (await lease(b, s.id))!;
    await a.running.data.close();
    await until(() => open.a === 0, 'A closing its socket', LEASE_SECONDS * 1000 + 5000);
    expect(Date.now()).toBeLessThan(held.lease_until + 1000);
    // B resumes the session once the lease has run out, not before.
    await until(() => open.b === 1, 'B resuming the session', LEASE_SECONDS * 1000 + 10_000);
    const byB = opened.filter((o) => o.path === 'b');
    expect(byB).toHaveLength(1);
    expect(byB[0]!.at).toBeGreaterThanOrEqual(held.lease_until);
    // Never one socket of each at once.
    expect(opened.every((o) => o.otherOpen === 0)).toBe(true);
    expect((await lease(b, s.id))?.owner).toBe(network(b).leases.owner);
  });

  it('an owner that finds its lease taken closes its socket at the next heartbeat', async () => {
    const id = (await b.running.data.value<number>('SELECT session_id FROM sessions_leases'))!;
    expect(open.b).toBe(1);
    // A third instance took the session (as one does when B's lease ran out unseen).
    await b.running.data.run("UPDATE sessions_leases SET owner = 'instance-c', lease_until = ? WHERE session_id = ?", [Date.now() + 60_000, id]);
    await network(b).renewLeases();
    await until(() => open.b === 0, 'B closing its socket', 5000);
    expect(network(b).connectionOf(id)?.phase).toBe('idle');
    // And B's sweep leaves it to instance C while C's lease lasts.
    await new Promise((r) => setTimeout(r, 2500));
    expect(open.b).toBe(0);
  });
  it('lease times are the database’s clock: an instance whose clock runs an hour ahead neither steals a live lease nor takes one for longer', async () => {
    const leases = network(b).leases;
    const id = 987_654;
    const realNow = Date.now();
    await b.running.data.run("INSERT INTO sessions_leases (session_id, owner, lease_until) VALUES (?, 'instance-c', ?)", [id, realNow + 60_000]);
    const ahead = vi.spyOn(Date, 'now').mockImplementation(() => realNow + 3_600_000);
    try {
      expect(await leases.take(id)).toBe(false);
      expect(await leases.holder(id)).toMatchObject({ owner: 'instance-c' });
      await b.running.data.run('DELETE FROM sessions_leases WHERE session_id = ?', [id]);
      expect(await leases.take(id)).toBe(true);
    } finally {
      ahead.mockRestore();
    }
    const taken = (await lease(b, id))!;
    expect(taken.lease_until).toBeGreaterThanOrEqual(realNow + LEASE_SECONDS * 1000);
    expect(taken.lease_until).toBeLessThanOrEqual(Date.now() + LEASE_SECONDS * 1000);
    await leases.release(id);
  });

  it('an owner that stops cleanly gives its leases back: another instance resumes the session, never both at once', async () => {
    const d = await startMessagingApp(toml(port, 'd'), shared);
    try {
      const s = await whatsappSession(b, t.pat);
      call(b, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {}).catch(() => {});
      await until(() => open.b === 1, 'B’s socket', 10_000);
      await b.running.data.run('UPDATE sessions_whatsapp_accounts SET registered = 1, resume = 1 WHERE session_id = ?', [s.id]);
      // D leaves it to B while B runs.
      await new Promise((r) => setTimeout(r, 2500));
      expect(open.d ?? 0).toBe(0);
      await b.close();
      await until(() => open.b === 0, 'B’s socket closed', 5000);
      await until(() => open.d === 1, 'D resuming the session', 10_000);
      expect(opened.every((o) => o.otherOpen === 0)).toBe(true);
      expect((await lease(d, s.id))?.owner).toBe(network(d).leases.owner);
    } finally {
      await d.close();
    }
  });
});

// The SQLite project runs it; the PostgreSQL project would start this app on PostgreSQL.
describe.skipIf(process.env.WHARF_TEST_DATABASE === 'postgres')('on SQLite (one process)', () => {
  it('a lease another process left (it crashed) does not keep the one instance from connecting', async () => {
    const c = await startMessagingApp(toml(port, 'c'));
    try {
      const tc = await tenant(c);
      const s = await whatsappSession(c, tc.pat);
      await c.running.data.run("INSERT INTO sessions_leases (session_id, owner, lease_until) VALUES (?, 'crashed-process', ?)", [s.id, Date.now() + 60_000]);
      call(c, tc.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {}).catch(() => {});
      await until(() => open.c === 1, 'the socket', 10_000);
      expect((await lease(c, s.id))?.owner).toBe(network(c).leases.owner);
    } finally {
      await c.close();
    }
    // Closing the server closes the socket.
    await until(() => open.c === 0, 'the socket closed', 5000);
  });
});
