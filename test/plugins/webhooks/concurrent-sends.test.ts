/**
 * A burst of messaging through one session, with everything else that writes to it at the same
 * time: sends from it, sandbox receives into it, and sends between it and a second session in both
 * directions. Every request succeeds (on PostgreSQL, no 503 from conflicting transactions), every
 * message is recorded once, each session's events come out in the order a reader following them by
 * id sees them (none committed behind one already visible), and every event reaches the webhook.
 * Runs on SQLite ("all") and on PostgreSQL ("on postgres").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textOf } from '../../../plugins/sessions/networks/nodes.ts';
import type { TestApp } from '../../helpers/app.ts';
import { eventsOf, type Res } from '../sessions/helpers.ts';
import { call, hookedSession, Receiver, type SessionInfo, PATIENT_TOML, startWebhooksApp, type Tenant, tenant } from './helpers.ts';

const SENDS = 60;
const RECEIVES = 20;
const BACK = 20;

let app: TestApp;
let t: Tenant;
let receiver: Receiver;
let a: SessionInfo;
let b: SessionInfo;

beforeAll(async () => {
  receiver = await Receiver.start();
  app = await startWebhooksApp(PATIENT_TOML);
  t = await tenant(app);
  a = await hookedSession(app, t.pat, receiver.url('/a'), [], { account_protection: false, log_messages: true });
  b = await hookedSession(app, t.pat, receiver.url('/b'), [], { account_protection: false, log_messages: true });
});

afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

describe('concurrent messaging through one session', () => {
  it('answers every request, records every message once, keeps each session’s events in order, delivers every webhook', async () => {
    const baseline = { a: (await eventsOf(app, a.id)).length, b: (await eventsOf(app, b.id)).length };
    // A reader following A's events by id while the burst runs: what it skips is never seen.
    const followed: number[] = [];
    let running = true;
    const follower = (async () => {
      let after = 0;
      while (running) {
        for (const e of await eventsOf(app, a.id, after)) {
          followed.push(e.id);
          after = e.id;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      for (const e of await eventsOf(app, a.id, after)) followed.push(e.id);
    })();

    const requests: Promise<Res>[] = [];
    for (let i = 0; i < SENDS; i++) requests.push(call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: `a->b #${i}` }));
    for (let i = 0; i < RECEIVES; i++) {
      requests.push(call(app, a.apiKey, 'POST', '/api/sandbox/receive', { from: `+1415555${String(1000 + i)}`, text: `in #${i}` }));
    }
    for (let i = 0; i < BACK; i++) requests.push(call(app, b.apiKey, 'POST', '/api/send-message', { to: a.phone, text: `b->a #${i}` }));
    const answers = await Promise.all(requests);
    running = false;
    await follower;

    const refused = answers.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.text.slice(0, 200)}`);
    expect(refused).toEqual([]);
    const sent = answers.slice(0, SENDS).map((r) => r.body.data);
    expect(sent.every((d) => d.status === 'delivered')).toBe(true);
    expect(new Set(sent.map((d) => d.msgId)).size).toBe(SENDS);

    // The message log: each send once.
    const log = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs?per_page=100`);
    expect(log.status).toBe(200);
    expect((log.body.data.data as any[]).map((m) => m.id).sort((x, y) => x - y)).toEqual(sent.map((d) => d.msgId).sort((x, y) => x - y));

    // Every message in each session's events once: A sent SENDS and received RECEIVES + BACK.
    const eventsA = (await eventsOf(app, a.id)).slice(baseline.a);
    const eventsB = (await eventsOf(app, b.id)).slice(baseline.b);
    const texts = (events: typeof eventsA, name: string) => events.filter((e) => e.event === name).map((e) => textOf((e.payload as any).data.message));
    const sentTexts = texts(eventsA, 'message.sent');
    expect(sentTexts.sort()).toEqual(Array.from({ length: SENDS }, (_, i) => `a->b #${i}`).sort());
    const receivedA = texts(eventsA, 'messages.received');
    expect(receivedA.sort()).toEqual(
      [...Array.from({ length: RECEIVES }, (_, i) => `in #${i}`), ...Array.from({ length: BACK }, (_, i) => `b->a #${i}`)].sort(),
    );
    const receivedB = texts(eventsB, 'messages.received');
    expect(receivedB.sort()).toEqual(Array.from({ length: SENDS }, (_, i) => `a->b #${i}`).sort());

    // Ids unique and, for the reader that followed A by id, nothing committed behind what it had seen.
    const allA = (await eventsOf(app, a.id)).map((e) => e.id);
    expect(new Set(allA).size).toBe(allA.length);
    expect(followed).toEqual(allA);

    // Every event of both sessions reaches its webhook once.
    const total = eventsA.length + eventsB.length;
    const got = await receiver.waitFor(baseline.a + baseline.b + total, 60_000);
    const ids = got.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length);
    expect(got.filter((r) => r.path === '/a').length).toBe(baseline.a + eventsA.length);
    expect(got.filter((r) => r.path === '/b').length).toBe(baseline.b + eventsB.length);
  });
});
