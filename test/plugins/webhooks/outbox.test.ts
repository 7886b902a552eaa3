/**
 * The pipeline from a recorded event to a delivery: the subscription filter (enabled, absent
 * means none, [] means all, aliases), one dispatch record per matching event written in the
 * event's own transaction, the payload exactly as recorded, and the filtered views delivered
 * beside messages.received.
 */
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FakeWhatsApp, mockedBaileys } from '../../helpers/fake-whatsapp.ts';
import { testNetworks } from '../sessions/test-networks.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import type { TestApp } from '../../helpers/app.ts';
import { call, dispatchesOf, eventually, hookedSession, receive, Receiver, startWebhooksApp, type Tenant, tenant } from './helpers.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const networks = testNetworks((fake.network = new FakeWhatsApp()));

let app: TestApp;
let t: Tenant;
let receiver: Receiver;

beforeAll(async () => {
  app = await startWebhooksApp();
  t = await tenant(app);
  receiver = await Receiver.start();
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

/** A count, inside the transaction in progress if any (the sessions plugin's scoped data layer joins it). */
const count = async (sql: string, ...args: unknown[]) => (await (app.running.services.sessions as Sessions).store.db.value<number>(sql, args)) ?? 0;

describe.each(networks)('the subscription filter, on $name sessions', (net) => {
  it('delivers every event for [] and the inbound message exactly as recorded, with its filtered view', async () => {
    const path = `/all-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), [], {}, net);
    const before = Date.now();
    const key = await receive(app, s, 'Hello webhook', { pushName: 'Ada' }, net);
    // session.status from the sandbox connecting, then the inbound message's events.
    // The sandbox adds a first-seen sender as a contact; WhatsApp reports the sender's push name as an update.
    const contacts = net.name === 'sandbox' ? 'contacts.upsert' : 'contacts.update';
    const expected = ['session.status', contacts, 'messages.upsert', 'messages.received', 'messages-personal'];
    // A session's deliveries run concurrently (up to its limit), so they may arrive in any order: wait for all of them.
    const got = await eventually(
      () => {
        const mine = receiver.requests.filter((r) => r.path === path);
        return expected.every((name) => mine.some((r) => r.json.event === name)) ? mine : null;
      },
      5000,
      'every event of the message',
    );
    const names = got.map((r) => r.json.event);
    expect(names.filter((n) => n === 'messages.received')).toHaveLength(1);
    const received = got.find((r) => r.json.event === 'messages.received')!;
    expect(received.method).toBe('POST');
    expect(received.headers['content-type']).toBe('application/json');
    expect(received.json).toStrictEqual({
      event: 'messages.received',
      sessionId: s.id,
      timestamp: expect.any(Number),
      data: {
        key,
        message: { conversation: 'Hello webhook' },
        pushName: 'Ada',
        messageTimestamp: expect.any(Number),
      },
    });
    // The key: id, remoteJid (a LID here), remoteJidAlt (the phone-based address, known here), fromMe.
    expect(key).toMatchObject({
      id: expect.any(String),
      remoteJid: expect.stringMatching(/@lid$/),
      remoteJidAlt: expect.stringMatching(/@s\.whatsapp\.net$/),
      fromMe: false,
    });
    // Unix milliseconds.
    expect(received.json.timestamp).toBeGreaterThanOrEqual(before);
    expect(received.json.timestamp).toBeLessThanOrEqual(Date.now());
    // The body is the recorded payload, byte for byte.
    const svc = app.running.services.sessions as Sessions;
    const recorded = (await svc.events(s.id)).find((e) => e.event === 'messages.received')!;
    expect(received.body.toString('utf8')).toBe(JSON.stringify(recorded.payload));
    // The view carries the same data, as a separate delivery with its own webhook-id.
    const view = got.find((r) => r.json.event === 'messages-personal')!;
    expect(view.json.data).toStrictEqual(received.json.data);
    expect(view.headers['webhook-id']).not.toBe(received.headers['webhook-id']);
  });

  it('delivers only the named events, accepts WasenderAPI aliases, and leaves no record for the others', async () => {
    const path = `/named-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received', 'messages-group.received'], {}, net);
    expect(s.body.webhook_events).toEqual(['messages.received', 'messages-group']);
    await receive(app, s, 'personal one', {}, net);
    await receive(app, s, 'group one', { chat: 'group' }, net);
    await receive(app, s, 'newsletter one', { chat: 'newsletter' }, net);
    const got = await receiver.waitFor(1).then(() =>
      eventually(
        () => {
          const mine = receiver.requests.filter((r) => r.path === path);
          return mine.length >= 4 ? mine : null;
        },
        5000,
        'four deliveries',
      ),
    );
    // Subscribing to a view and to messages.received delivers the group message twice.
    expect(got.map((r) => `${r.json.event}:${r.json.data.message.conversation}`).sort()).toEqual(
      ['messages-group:group one', 'messages.received:group one', 'messages.received:newsletter one', 'messages.received:personal one'].sort(),
    );
    const records = await dispatchesOf(app, t.pat, s.id);
    expect(records.map((d) => d.event).sort()).toEqual(['messages-group', 'messages.received', 'messages.received', 'messages.received']);
    // Nothing else was queued: no record for session.status, messages.upsert, the other views.
    expect(await count('SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE session_id = ?', s.id)).toBe(4);
  });

  it('records nothing when webhook_events is absent, when the webhook is disabled, or when there is no URL', async () => {
    const none = await net.session(app, t.pat, { name: 'No events', webhook_url: receiver.url(`/none-${net.name}`), webhook_enabled: true });
    expect(none.body.webhook_events).toBeNull();
    const disabled = await hookedSession(app, t.pat, receiver.url(`/disabled-${net.name}`), [], { webhook_enabled: false }, net);
    const noUrl = await net.session(app, t.pat, { name: 'No URL', webhook_enabled: true, webhook_events: [] });
    for (const s of [none, disabled, noUrl]) await receive(app, s, 'ignored', {}, net);
    // An enabled one after them: once its delivery arrived, the others had their chance.
    const path = `/control-${Date.now()}`;
    const control = await hookedSession(app, t.pat, receiver.url(path), ['messages.received'], {}, net);
    await receive(app, control, 'control', {}, net);
    await eventually(() => receiver.requests.some((r) => r.path === path), 5000, 'the control delivery');
    for (const s of [none, disabled, noUrl]) {
      expect(await count('SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE session_id = ?', s.id)).toBe(0);
      expect((await dispatchesOf(app, t.pat, s.id)).length).toBe(0);
    }
    expect(receiver.requests.filter((r) => r.path === `/none-${net.name}` || r.path === `/disabled-${net.name}`)).toEqual([]);
    // Turning the subscription on later delivers what happens from then on.
    expect(
      (await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${disabled.id}`, { webhook_enabled: true, webhook_events: ['messages-personal.received'] }))
        .status,
    ).toBe(200);
    await receive(app, disabled, 'now on', {}, net);
    const late = await eventually(() => receiver.requests.find((r) => r.path === `/disabled-${net.name}`), 5000, 'the delivery after enabling');
    expect(late.json.event).toBe('messages-personal');
    expect(late.json.data.message).toEqual({ conversation: 'now on' });
  });
});

describe('the outbox', () => {
  it('is written in the transaction that records the event: a rollback leaves neither', async () => {
    const s = await hookedSession(app, t.pat, receiver.url('/rollback'), []);
    const svc = app.running.services.sessions as Sessions;
    const eventsBefore = (await svc.events(s.id)).length;
    const dispatchesBefore = await count('SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE session_id = ?', s.id);
    await expect(
      svc.transaction(async () => {
        await svc.emit(s.id, 'contacts.update', [{ id: 'x' }]);
        expect(await count('SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE session_id = ?', s.id)).toBe(dispatchesBefore + 1);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await svc.events(s.id)).length).toBe(eventsBefore);
    expect(await count('SELECT COUNT(*) AS n FROM webhooks_dispatches WHERE session_id = ?', s.id)).toBe(dispatchesBefore);
    // A committed one is recorded and delivered.
    await svc.emit(s.id, 'contacts.update', [{ id: 'y' }]);
    const got = await eventually(
      () => receiver.requests.find((r) => r.path === '/rollback' && r.json.event === 'contacts.update'),
      5000,
      'the committed event',
    );
    expect(got.json.data).toEqual([{ id: 'y' }]);
    expect(receiver.requests.filter((r) => r.path === '/rollback' && r.json.event === 'contacts.update')).toHaveLength(1);
  });

  it('keeps one record per event with a stable webhook-id and marks it delivered', async () => {
    const path = `/records-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received']);
    await receive(app, s, 'one');
    await receive(app, s, 'two');
    const records = await eventually(
      async () => {
        const list = await dispatchesOf(app, t.pat, s.id);
        return list.length === 2 && list.every((d) => d.status === 'delivered') ? list : null;
      },
      5000,
      'two delivered records',
    );
    const got = receiver.requests.filter((r) => r.path === path);
    expect(got).toHaveLength(2);
    for (const d of records) {
      expect(d).toMatchObject({
        session_id: s.id,
        event: 'messages.received',
        url: receiver.url(path),
        attempt_count: 1,
        last_status_code: 200,
        last_error: null,
        next_attempt_at: null,
        in_flight: false,
      });
      expect(d.webhook_id).toMatch(/^msg_[0-9a-f]{32}$/);
      expect(got.filter((r) => r.headers['webhook-id'] === d.webhook_id)).toHaveLength(1);
    }
    expect(new Set(records.map((d) => d.event_id)).size).toBe(2);
  });
});

describe.each(networks)('a subscription that goes away with deliveries pending, on $name sessions', (net) => {
  it('disabling the webhook or deleting the session abandons them unsent, naming why', async () => {
    // Slow failures: five attempts take well over a second, so the change lands between two.
    const failing = await Receiver.start((_req, res) => {
      setTimeout(() => res.writeHead(503).end(), 150);
    });
    try {
      const disabled = await hookedSession(app, t.pat, failing.url('/off'), ['messages.received'], {}, net);
      const deleted = await hookedSession(app, t.pat, failing.url('/gone'), ['messages.received'], {}, net);
      await receive(app, disabled, 'to be disabled', {}, net);
      await receive(app, deleted, 'to be deleted', {}, net);
      await eventually(() => failing.requests.length >= 2, 5000, 'first attempts');
      expect((await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${disabled.id}`, { webhook_enabled: false })).status).toBe(200);
      expect((await call(app, t.pat, 'DELETE', `/api/whatsapp-sessions/${deleted.id}`)).status).toBe(200);
      const [off] = await eventually(
        async () => {
          const list = await dispatchesOf(app, t.pat, disabled.id);
          return list[0]?.status === 'abandoned' ? list : null;
        },
        5000,
        'the disabled one abandoned',
      );
      expect(off.last_error).toBe('webhook disabled: not delivered');
      expect(off.attempt_count).toBeLessThan(5);
      // The deleted session's records stay readable in its organization.
      const gone = await eventually(
        async () => {
          const list = await dispatchesOf(app, t.pat, deleted.id);
          return list.length && list.every((d) => d.status === 'abandoned') ? list : null;
        },
        5000,
        'the deleted one abandoned',
      );
      expect(gone.map((d) => d.last_error)).toContain('session deleted: not delivered');
      const sent = failing.requests.length;
      await new Promise((r) => setTimeout(r, 400));
      expect(failing.requests.length).toBe(sent);
    } finally {
      await failing.close();
    }
  });
});
