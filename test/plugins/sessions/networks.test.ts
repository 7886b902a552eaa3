/**
 * The network adapter seam: the routes follow what an adapter declares (pairing kinds, receive),
 * a type without an adapter answers 409, an adapter's host sees its own network's sessions only
 * and records what the adapter reports, and inside one transaction a session row is read once.
 * After the first test, the adapter registered for `whatsapp` is a stand-in written for the test
 * (it replaces the real one): it implements only what the test calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetworkAdapter, NetworkCapabilities, NetworkHost } from '../../../plugins/sessions/networks/types.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import type { EmittedEvent } from '../../../plugins/sessions/types.ts';
import type { TestApp } from '../../helpers/app.ts';
import { call, eventsOf, lastEventId, sandboxSession, type SessionInfo, startMessagingApp, type Tenant, tenant, whatsappSession } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let svc: Sessions;
let wa: SessionInfo;
let sandbox: SessionInfo;

beforeAll(async () => {
  app = await startMessagingApp();
  t = await tenant(app);
  svc = app.running.services.sessions as Sessions;
  wa = await whatsappSession(app, t.pat);
  sandbox = await sandboxSession(app, t.pat);
});
afterAll(() => app?.close());

/** Registers a stand-in whatsapp adapter with these capabilities; answers its host. */
function registerWhatsapp(capabilities: NetworkCapabilities): NetworkHost {
  let host!: NetworkHost;
  const adapter = {
    name: 'whatsapp',
    capabilities,
    async connect(session) {
      await host.transaction(async () => {
        await host.setStatus(session.id, 'need_scan', 'pairing');
        await host.qrUpdated(session.id, 'QR-1');
      });
      return { status: 'need_scan', qrCode: 'QR-1' };
    },
    async qrCode() {
      return { qrCode: 'QR-1', qrImage: 'data:image/gif;base64,R0lG' };
    },
    async close() {},
  } satisfies Partial<NetworkAdapter>;
  svc.registerNetwork('whatsapp', (h) => {
    host = h;
    return adapter as unknown as NetworkAdapter;
  });
  return host;
}

describe('a network adapter behind the sessions API', () => {
  it('the WhatsApp adapter declares QR and phone-code pairing and no receive: sandbox receive refuses its key, the QR route answers 409 until pairing starts', async () => {
    const network = svc.network((await svc.get(wa.id))!)!;
    expect(network.name).toBe('whatsapp');
    expect(network.capabilities).toEqual({ pairing: ['qr', 'phone_code'], receive: false });
    expect(await call(app, wa.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'hi' })).toMatchObject({
      status: 422,
      body: { errors: { session: [`session ${wa.id} is a whatsapp session; use the API key of a sandbox session (POST /api/sandbox-sessions creates one)`] } },
    });
    const why = 'The session is not pairing (status: disconnected); POST .../connect starts pairing';
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${wa.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { success: false, error: why, message: why },
    });
    // A session that is not connected cannot send: 409 before anything reaches the network.
    expect((await call(app, wa.apiKey, 'POST', '/api/send-message', { to: '+14155550100', text: 'hi' })).status).toBe(409);
  });

  it('one that pairs by QR: connect answers its QR code, the status and the code it reports are recorded, the QR route serves it', async () => {
    const host = registerWhatsapp({ pairing: ['qr', 'phone_code'], receive: false });
    const from = await lastEventId(app, wa.id);
    const connected = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${wa.id}/connect`, {});
    expect(connected).toMatchObject({ status: 200, body: { success: true, data: { status: 'need_scan', qrCode: 'QR-1' } } });
    expect((await eventsOf(app, wa.id, from)).map((e) => [e.event, e.payload.data])).toEqual([
      ['session.status', { status: 'need_scan', reason: 'pairing' }],
      ['qrcode.updated', { qr: 'QR-1' }],
    ]);
    expect((await call(app, wa.apiKey, 'GET', '/api/status')).body).toEqual({ status: 'need_scan' });
    const logs = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${wa.id}/session-logs`);
    expect(logs.body.data.data[0]).toMatchObject({ event_type: 'status_change', status: 'need_scan', reason: 'pairing' });
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${wa.id}/qr-code`)).toMatchObject({
      status: 200,
      body: { success: true, data: { qrCode: 'QR-1', qrImage: 'data:image/gif;base64,R0lG' } },
    });
    // It declares no receive: the sandbox's route still refuses its key.
    expect((await call(app, wa.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'hi' })).status).toBe(422);
    // Its host sees whatsapp sessions only.
    expect(await host.session(wa.id)).toMatchObject({ id: wa.id, phoneNumber: wa.phone });
    expect((await host.sessionByPhone(t.orgId, wa.phone))?.id).toBe(wa.id);
    expect(await host.session(sandbox.id)).toBeUndefined();
    expect(await host.sessionByPhone(t.orgId, sandbox.phone)).toBeUndefined();
  });

  it('the QR route answers 409 as the declared pairing says', async () => {
    registerWhatsapp({ pairing: ['phone_code'], receive: false });
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${wa.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { error: 'A whatsapp session pairs by phone code, not by QR code' },
    });
    registerWhatsapp({ pairing: [], receive: false });
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${wa.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { error: 'A whatsapp session is always connected and needs no QR code' },
    });
    expect(await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${sandbox.id}/qrcode`)).toMatchObject({
      status: 409,
      body: { error: 'A sandbox session is always connected and needs no QR code' },
    });
  });
});

describe('a transaction', () => {
  it('reads a session row once; a write through the store is seen at once, and by the events after it', async () => {
    const host = registerWhatsapp({ pairing: ['qr'], receive: false });
    const seen: EmittedEvent[] = [];
    const off = svc.onEvent((event) => {
      if (event.sessionId === wa.id) seen.push(event);
    });
    try {
      await svc.transaction(async () => {
        const first = (await svc.get(wa.id))!;
        // The same object: not read again.
        expect(await svc.get(wa.id)).toBe(first);
        expect(await host.session(wa.id)).toBe(first);
        await host.setStatus(wa.id, 'connecting', 'test');
        expect((await svc.get(wa.id))!.status).toBe('connecting');
        await host.setStatus(wa.id, 'connected', 'test');
        await svc.emit(wa.id, 'contacts.update', [{ id: 'x' }]);
      });
    } finally {
      off();
    }
    expect(seen.map((e) => [e.event, e.session.status])).toEqual([
      ['session.status', 'connecting'],
      ['session.status', 'connected'],
      ['contacts.update', 'connected'],
    ]);
    expect((await svc.get(wa.id))!.status).toBe('connected');
  });

  it('a throw inside a nested transaction rolls the whole transaction back, the row as it was', async () => {
    const before = (await svc.get(wa.id))!.status;
    await expect(
      svc.transaction(async () => {
        await svc.transaction(async () => {
          await svc.store.setStatus(wa.id, 'expired', null, new Date().toISOString());
          // The snapshot forgot the row it wrote: read again, as written.
          expect((await svc.get(wa.id))!.status).toBe('expired');
          throw new Error('roll back');
        });
      }),
    ).rejects.toThrow('roll back');
    expect((await svc.get(wa.id))!.status).toBe(before);
  });
});
