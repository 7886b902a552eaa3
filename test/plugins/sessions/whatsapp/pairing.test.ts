/**
 * The WhatsApp adapter's connection: pairing by QR code (refreshed, capped) and by phone code,
 * every status change as session.status, the 515 restart after pairing, reconnects with backoff
 * and jitter, stops on logged-out / forbidden / replaced (and why), the watchdog, one socket per
 * session, disconnect / restart / delete. Through the fake network (test/helpers/fake-whatsapp.ts),
 * whose sockets stand in for Baileys' and emit what Baileys 7 emits.
 */
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { backoffDelay, closeAction, closeCause, describeClose } from '../../../../plugins/sessions/networks/whatsapp/connection.ts';
import type { WhatsAppNetwork } from '../../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../../plugins/sessions/service.ts';
import type { TestApp } from '../../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../../helpers/fake-whatsapp.ts';
import {
  call,
  connectedWhatsApp,
  eventsOf,
  lastEventId,
  type SessionInfo,
  startMessagingApp,
  statusOf,
  type Tenant,
  tenant,
  until,
  WHATSAPP_TEST_TOML,
  whatsappSession,
} from '../helpers.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const network = (fake.network = new FakeWhatsApp());

let app: TestApp;
let t: Tenant;

beforeAll(async () => {
  app = await startMessagingApp(`${WHATSAPP_TEST_TOML}qr_max_codes = 3\nwatchdog_silence_seconds = 1\n`);
  t = await tenant(app);
});
afterAll(() => app?.close());

const adapter = () => (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;
const statusEvents = async (s: SessionInfo, from: number) =>
  (await eventsOf(app, s.id, from)).filter((e) => e.event === 'session.status').map((e) => e.payload.data as { status: string; reason?: string });
const sessionLogs = async (s: SessionInfo) =>
  (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/session-logs?per_page=100`)).body.data.data as { status: string; reason: string | null }[];
const socketsOf = (s: SessionInfo) => network.sockets.filter((x) => x.sessionId === s.id);

describe('pairing by QR code', () => {
  it('connect answers need_scan with the QR code and its image; scanning pairs, the 515 restart reconnects at once, the session is connected', async () => {
    const s = await whatsappSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const res = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      status: 'need_scan',
      qrCode: expect.stringMatching(/^2@/),
      qrImage: expect.stringMatching(/^data:image\/gif;base64,R0lGOD/),
    });
    // The QR route serves the same code; so does the Laravel spelling.
    const qr = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`);
    expect(qr.body).toEqual({ success: true, data: { qrCode: res.body.data.qrCode, qrImage: res.body.data.qrImage } });
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qr-code`)).body.data.qrCode).toBe(res.body.data.qrCode);
    expect((await call(app, s.apiKey, 'GET', '/api/status')).body).toEqual({ status: 'need_scan' });

    network.scan(s.id, s.phone, 'Ada');
    await until(async () => (await statusOf(app, s.id)) === 'connected', 'connected');
    expect(await statusEvents(s, from)).toEqual([
      { status: 'connecting', reason: 'connect requested' },
      { status: 'need_scan', reason: 'QR code 1 of at most 3: scan it with the phone' },
      { status: 'connecting', reason: 'restart required (515): reconnecting to finish pairing' },
      { status: 'connected', reason: 'paired' },
    ]);
    // Two sockets: the pairing one, closed by WhatsApp's 515, and the one that logged in.
    expect(socketsOf(s).map((x) => x.closed)).toEqual([true, false]);
    expect((await call(app, s.apiKey, 'GET', '/api/status')).body).toEqual({ status: 'connected' });
    expect((await call(app, s.apiKey, 'GET', '/api/user')).body.data).toEqual({
      id: `${s.phone.slice(1)}@s.whatsapp.net`,
      lid: `${network.account(s.phone).lid}@lid`,
      name: 'Ada',
      phone_number: s.phone,
    });
    // Connected: no QR code any more; connecting again changes nothing.
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { error: 'The session is connected: there is no QR code to scan' },
    });
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data).toEqual({ status: 'connected' });
    expect(socketsOf(s)).toHaveLength(2);
    // The session log has each change with its reason.
    expect((await sessionLogs(s)).slice(0, 4).map((r) => [r.status, r.reason])).toEqual([
      ['connected', 'paired'],
      ['connecting', 'restart required (515): reconnecting to finish pairing'],
      ['need_scan', 'QR code 1 of at most 3: scan it with the phone'],
      ['connecting', 'connect requested'],
    ]);
  });

  it('serves each new QR code as WhatsApp rotates them (qrcode.updated), and stops after qr_max_codes unscanned', async () => {
    const s = await whatsappSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const first = (await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data.qrCode;
    network.socketOf(s.id)!.rotateQr();
    const second = await until(async () => {
      const qr = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`)).body.data?.qrCode;
      return qr !== first && qr;
    }, 'the second QR code');
    expect(second).toBe(network.socketOf(s.id)!.qr);
    network.socketOf(s.id)!.rotateQr();
    await until(async () => (await eventsOf(app, s.id, from)).filter((e) => e.event === 'qrcode.updated').length === 3, 'three QR codes');
    // The fourth is one too many: pairing stops, the socket closes, the session is disconnected.
    network.socketOf(s.id)!.rotateQr();
    await until(async () => (await statusOf(app, s.id)) === 'disconnected', 'disconnected');
    expect((await eventsOf(app, s.id, from)).filter((e) => e.event === 'qrcode.updated').map((e) => e.payload.data)).toEqual([
      { qr: first },
      { qr: second },
      { qr: expect.stringMatching(/^2@/) },
    ]);
    expect((await statusEvents(s, from)).at(-1)).toEqual({ status: 'disconnected', reason: 'pairing timed out: 3 codes were not used; connect again to pair' });
    expect(network.socketOf(s.id)!.closed).toBe(true);
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`)).toMatchObject({ status: 409 });
    // Connecting again starts pairing afresh.
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data.status).toBe('need_scan');
    network.scan(s.id, s.phone);
    await until(async () => (await statusOf(app, s.id)) === 'connected', 'connected');
  });

  it('one session, one socket: concurrent connects join the same pairing', async () => {
    const s = await whatsappSession(app, t.pat);
    const answers = await Promise.all([1, 2, 3].map(() => call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})));
    expect(answers.map((a) => a.body.data.status)).toEqual(['need_scan', 'need_scan', 'need_scan']);
    expect(new Set(answers.map((a) => a.body.data.qrCode)).size).toBe(1);
    expect(socketsOf(s)).toHaveLength(1);
  });

  it('refuses a paired account whose number is not the session number: unlinked, status failed with the reason', async () => {
    const s = await whatsappSession(app, t.pat);
    await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {});
    network.scan(s.id, '+447700900999', 'Someone else');
    await until(async () => (await statusOf(app, s.id)) === 'failed', 'failed');
    const last = (await statusEvents(s, 0)).at(-1)!;
    expect(last.reason).toBe(`the paired account +447700900999 is not this session's number ${s.phone}; it was unlinked`);
    expect(network.callsOf(s.id, 'logout')).toHaveLength(1);
    // The pairing is forgotten: nothing to resume.
    expect(await adapter().store.account(s.id)).toBeUndefined();
  });
});

describe('pairing by phone code', () => {
  it('connect {phone_number} answers an 8-character pairing code; entering it on the phone pairs the session', async () => {
    const s = await whatsappSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const res = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, { phone_number: s.phone });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'need_scan', pairingCode: expect.stringMatching(/^[A-Z0-9]{8}$/) });
    expect(res.body.data.qrCode).toBeUndefined();
    expect(network.callsOf(s.id, 'requestPairingCode').map((c) => c.args)).toEqual([[s.phone.slice(1)]]);
    // WhatsApp rotating its QR codes does not replace the code the user is typing.
    network.socketOf(s.id)!.rotateQr();
    await new Promise((r) => setTimeout(r, 50));
    expect(network.callsOf(s.id, 'requestPairingCode')).toHaveLength(1);
    expect((await eventsOf(app, s.id, from)).find((e) => e.event === 'qrcode.updated')?.payload.data).toEqual({ pairingCode: res.body.data.pairingCode });
    // No QR code while pairing by code.
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { error: 'The session pairs by phone code: read pairingCode from POST .../connect' },
    });
    network.enterCode(res.body.data.pairingCode, s.phone);
    await until(async () => (await statusOf(app, s.id)) === 'connected', 'connected');
  });

  it('refuses a malformed phone number (422) and a sandbox session asked to pair by code', async () => {
    const s = await whatsappSession(app, t.pat);
    expect(await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, { phone_number: 'call me' })).toMatchObject({
      status: 422,
      body: { errors: { phone_number: [expect.stringMatching(/E\.164/)] } },
    });
    const sandbox = await call(app, t.pat, 'POST', '/api/sandbox-sessions', { name: 'Box' });
    expect(await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${sandbox.body.data.id}/connect`, { phone_number: '+14155550100' })).toMatchObject({
      status: 422,
      body: { errors: { phone_number: ['a sandbox session does not pair by phone code'] } },
    });
  });
});

describe('when the connection closes', () => {
  it('reconnects a paired session after a transient close with growing, jittered waits, announcing and logging each attempt, until it opens again', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    const from = await lastEventId(app, s.id);
    const logsBefore = (await sessionLogs(s)).length;
    const before = socketsOf(s).length;
    network.refuse = 428;
    const started = Date.now();
    void network.socketOf(s.id)!.end(new Boom('Connection Terminated', { statusCode: 428 }));
    await until(async () => socketsOf(s).length >= before + 4, 'four attempts', 10_000);
    network.refuse = undefined;
    await until(async () => (await statusOf(app, s.id)) === 'connected', 'connected again', 10_000);
    const attempts = (await statusEvents(s, from)).filter((e) => e.status === 'connecting' && /attempt/.test(e.reason ?? ''));
    const waits = attempts.map((e) => Number(/next attempt in ([\d.]+) s/.exec(e.reason!)![1]) * 1000);
    // A paired session has no limit (reconnect_max_attempts 0): no "of N", and it goes on past unpaired_max_attempts (3).
    expect(attempts[0]!.reason).toMatch(/^connection closed \(428\): Connection Terminated; next attempt in [\d.]+ s \(attempt 1\)$/);
    expect(attempts.map((e) => /\(attempt (\d+)\)$/.exec(e.reason!)![1]).slice(0, 4)).toEqual(['1', '2', '3', '4']);
    expect((await statusEvents(s, from)).some((e) => e.status === 'failed')).toBe(false);
    // Doubling from 50 ms up to 400 ms, each drawn between half and all of it.
    const ceilings = [50, 100, 200, 400, 400, 400];
    waits.forEach((w, i) => {
      expect(w).toBeGreaterThanOrEqual(ceilings[i]! / 2 - 50);
      expect(w).toBeLessThanOrEqual(ceilings[i]! + 50);
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(waits.slice(0, 3).reduce((a, b) => a + b, 0) - 150);
    expect((await statusEvents(s, from)).at(-1)).toEqual({ status: 'connected', reason: 'connected' });
    // Each attempt is in the session log with its reason, newest first; the session shows the latest.
    const logs = await sessionLogs(s);
    expect(logs.slice(0, logs.length - logsBefore).map((l) => l.reason)).toEqual((await statusEvents(s, from)).map((e) => e.reason).reverse());
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data).toMatchObject({ status: 'connected', status_reason: 'connected' });
    // The server log: one line when it started failing, one when it recovered, none per attempt.
    const lines = app.logs.filter((l) => l.sessionId === s.id && String(l.msg).startsWith('WhatsApp session'));
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['warn', `WhatsApp session ${s.id} cannot connect: ${attempts[0]!.reason} (every attempt is in its session log)`],
      ['info', `WhatsApp session ${s.id} is connected again`],
    ]);
  });

  it.each([
    [401, 'logged_out', 'logged out (401): Connection Failure: the linked device was removed from the phone; connect again to pair'],
    [403, 'failed', 'forbidden (403): Connection Failure: WhatsApp refused this account (banned or restricted)'],
  ] as const)('stops on %i with status %s and the reason, forgets the pairing, does not reconnect', async (code, status, reason) => {
    const s = await connectedWhatsApp(app, t.pat, network);
    expect((await adapter().store.keyCount(s.id)) + ((await adapter().store.account(s.id)) ? 1 : 0)).toBeGreaterThan(0);
    const sockets = socketsOf(s).length;
    void network.socketOf(s.id)!.end(new Boom('Connection Failure', { statusCode: code }));
    await until(async () => (await statusOf(app, s.id)) === status, status);
    expect((await statusEvents(s, 0)).at(-1)).toEqual({ status, reason });
    await new Promise((r) => setTimeout(r, 300));
    expect(socketsOf(s)).toHaveLength(sockets);
    expect(await adapter().store.account(s.id)).toBeUndefined();
    expect(await adapter().store.keyCount(s.id)).toBe(0);
    // Connecting again means pairing again.
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data.status).toBe('need_scan');
  });

  it('stops on 440 (another client took the session) as disconnected, keeping the pairing for a later connect', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    void network.socketOf(s.id)!.end(new Boom('Stream Errored (conflict)', { statusCode: 440 }));
    await until(async () => (await statusOf(app, s.id)) === 'disconnected', 'disconnected');
    expect((await statusEvents(s, 0)).at(-1)!.reason).toMatch(/^connection replaced \(440\).*another client connected/);
    expect((await adapter().store.account(s.id))?.registered).toBe(1);
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data).toEqual({ status: 'connected' });
  });

  it('the watchdog replaces a socket that stays open but receives nothing', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    const from = await lastEventId(app, s.id);
    const silent = network.socketOf(s.id)!;
    silent.silence();
    await until(async () => network.socketOf(s.id) !== silent && (await statusOf(app, s.id)) === 'connected', 'a new socket', 8000);
    expect(silent.closed).toBe(true);
    await expect
      .poll(async () => (await statusEvents(s, from))[0])
      .toEqual({
        status: 'connecting',
        reason: expect.stringMatching(/^watchdog: nothing received for \d+ s; reconnecting$/),
      });
  });
});

describe('disconnect, restart, delete', () => {
  it('disconnect closes the socket and keeps the pairing; connect resumes without a QR code; restart opens a new socket', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/disconnect`)).body.data).toEqual({
      status: 'disconnected',
      message: 'disconnected by request; the pairing is kept: connect resumes without scanning',
    });
    expect(network.socketOf(s.id)!.closed).toBe(true);
    expect(await statusOf(app, s.id)).toBe('disconnected');
    expect(await adapter().store.account(s.id)).toMatchObject({ registered: 1, resume: 0 });
    expect((await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+14155550100', text: 'x' })).status).toBe(409);
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data).toEqual({ status: 'connected' });
    const before = network.socketOf(s.id)!;
    const from = await lastEventId(app, s.id);
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/restart`)).body.data).toEqual({ status: 'connected' });
    expect(network.socketOf(s.id)).not.toBe(before);
    expect(before.closed).toBe(true);
    // The socket it dropped on purpose is no failed attempt.
    await new Promise((r) => setTimeout(r, 200));
    expect(await statusEvents(s, from)).toEqual([
      { status: 'connecting', reason: 'restart requested' },
      { status: 'connected', reason: 'connected' },
    ]);
  });

  it('disconnect of a session not paired yet says so: connect starts pairing again, with a new QR code', async () => {
    const s = await whatsappSession(app, t.pat);
    const first = (await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data;
    expect(first.status).toBe('need_scan');
    const message = 'disconnected by request; the session was not paired yet: connect starts pairing again';
    expect((await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/disconnect`)).body.data).toEqual({ status: 'disconnected', message });
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}`)).body.data).toMatchObject({ status: 'disconnected', status_reason: message });
    const again = (await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/connect`, {})).body.data;
    expect(again.status).toBe('need_scan');
    expect(again.qrCode).not.toBe(first.qrCode);
  });

  it('delete unlinks the device and deletes credentials, keys and everything else the network kept', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    const rows = (table: string) => app.running.data.value<number>(`SELECT COUNT(*) AS n FROM ${table} WHERE session_id = ?`, [s.id]);
    expect(await rows('sessions_whatsapp_accounts')).toBe(1);
    expect(await rows('sessions_whatsapp_lids')).toBeGreaterThan(0);
    expect((await call(app, t.pat, 'DELETE', `/api/whatsapp-sessions/${s.id}`)).status).toBe(200);
    expect(network.callsOf(s.id, 'logout')).toHaveLength(1);
    for (const table of [
      'sessions_whatsapp_accounts',
      'sessions_whatsapp_keys',
      'sessions_whatsapp_lids',
      'sessions_whatsapp_messages',
      'sessions_whatsapp_contacts',
    ]) {
      expect(await rows(table), table).toBe(0);
    }
  });
});

describe('rules', () => {
  it('backoff doubles from the initial wait up to the maximum, drawn between half and all of it', () => {
    expect([1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, 2000, 300_000, () => 1))).toEqual([2000, 4000, 8000, 16000, 32000, 300_000]);
    expect([1, 2, 3].map((n) => backoffDelay(n, 2000, 300_000, () => 0))).toEqual([1000, 2000, 4000]);
  });

  it('close codes: 515 restarts, logged out / forbidden / multi-device mismatch forget the pairing, 440 and 405 stop, the rest reconnect', () => {
    expect(closeAction(515, undefined)).toEqual({ kind: 'restart' });
    expect(closeAction(401, undefined)).toMatchObject({ kind: 'stop', status: 'logged_out', forget: true });
    expect(closeAction(419, undefined)).toMatchObject({ kind: 'stop', status: 'logged_out', forget: true });
    expect(closeAction(403, undefined)).toMatchObject({ kind: 'stop', status: 'failed', forget: true });
    expect(closeAction(411, undefined)).toMatchObject({ kind: 'stop', status: 'failed', forget: true });
    expect(closeAction(440, undefined)).toMatchObject({ kind: 'stop', status: 'disconnected', forget: false });
    expect(closeAction(405, 'Connection Failure')).toEqual({
      kind: 'stop',
      status: 'failed',
      forget: false,
      reason:
        'client version refused (405): Connection Failure: WhatsApp no longer accepts this WhatsApp Web version; set a newer [plugins.sessions.whatsapp] version and connect again',
    });
    for (const code of [408, 428, 500, 503, undefined]) expect(closeAction(code, 'x')).toEqual({ kind: 'reconnect' });
  });

  it('a WebSocket error is the network failing, not WhatsApp: "cannot be reached" with the cause, and a reconnect whatever the code', () => {
    // What Baileys 7 raises for one (mapWebSocketError): 408 for any E... code, the error kept as data.
    const dns = Object.assign(new Error('getaddrinfo ENOTFOUND web.whatsapp.com'), { code: 'ENOTFOUND' });
    const boom = new Boom(`WebSocket Error (${dns.message})`, { statusCode: 408, data: dns });
    expect(closeCause(boom)).toBe('getaddrinfo ENOTFOUND web.whatsapp.com');
    expect(describeClose(408, boom.message, closeCause(boom))).toBe('WhatsApp cannot be reached (getaddrinfo ENOTFOUND web.whatsapp.com)');
    // An HTTP answer to the upgrade carries its status as the code: still no verdict on the account.
    const upgrade = new Boom('WebSocket Error (Unexpected server response: 401)', { statusCode: 401, data: new Error('Unexpected server response: 401') });
    expect(closeAction(401, upgrade.message, closeCause(upgrade))).toEqual({ kind: 'reconnect' });
    // WhatsApp's own close (no error behind it) keeps its label.
    const timedOut = new Boom('Timed Out', { statusCode: 408 });
    expect(closeCause(timedOut)).toBeUndefined();
    expect(describeClose(408, timedOut.message, closeCause(timedOut))).toBe('timed out (408)');
    expect(closeCause(new Boom('Stream Errored', { statusCode: 500, data: { tag: 'stream:error' } }))).toBeUndefined();
  });
});
