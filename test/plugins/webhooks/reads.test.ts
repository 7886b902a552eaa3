/**
 * How often one inbound sandbox text reads its session's row (`sessions_sessions`), from the
 * request to the last delivery: every statement the app executes is counted by wrapping
 * better-sqlite3's Statement methods, so statements prepared at start-up count too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import {
  countStatements,
  dispatchesOf,
  eventually,
  type Executed,
  hookedSession,
  queueReads,
  receive,
  Receiver,
  startWebhooksApp,
  type Tenant,
  tenant,
} from './helpers.ts';

let app: TestApp;
let t: Tenant;
let receiver: Receiver;
/** Every statement executed: its SQL and the plugin code that ran it. */
let executed: Executed[] = [];
let restore: (() => void) | undefined;

beforeAll(async () => {
  app = await startWebhooksApp();
  t = await tenant(app);
  receiver = await Receiver.start();
  ({ executed, restore } = countStatements(app));
});
afterAll(async () => {
  restore?.();
  await app?.close();
  await receiver?.close();
});

/** Statements that read a session row, by caller. */
const sessionReads = (from: number) => executed.slice(from).filter((s) => /^\s*SELECT\b[\s\S]*\bFROM sessions_sessions\b/i.test(s.sql));

describe('one inbound sandbox text', () => {
  it('reads its session row three times at most: key, recording transaction, delivery round', async () => {
    const path = `/reads-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), []);
    // The session.status of its creation, delivered: the dispatcher has seen this session.
    await eventually(() => receiver.requests.some((r) => r.path === path), 5000, 'the first delivery');
    await eventually(async () => (await dispatchesOf(app, t.pat, s.id)).every((d) => d.status === 'delivered'), 5000, 'nothing pending');

    const start = executed.length;
    await receive(app, s, 'count my reads');
    // contacts.upsert, messages.upsert, messages.received, messages-personal.
    await eventually(() => receiver.requests.filter((r) => r.path === path).length >= 5, 5000, 'four deliveries');
    await eventually(
      async () => {
        const list = await dispatchesOf(app, t.pat, s.id);
        return list.length === 5 && list.every((d) => d.status === 'delivered');
      },
      5000,
      'four delivered records',
    );
    const reads = sessionReads(start);
    const byPlugin = (name: string) => reads.filter((r) => r.caller.startsWith(`${name}/`)).length;
    console.log(
      `session row reads for one inbound text: ${reads.length} (sessions ${byPlugin('sessions')}, webhooks ${byPlugin('webhooks')})\n${reads.map((r) => `  ${r.caller}`).join('\n')}`,
    );
    expect(reads.length).toBeLessThanOrEqual(3);
  });

  it('starts its deliveries at the commit, from the rows it wrote: the queue of the outbox is not read', async () => {
    const path = `/queue-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received']);
    const start = executed.length;
    await receive(app, s, 'no queue read');
    await eventually(() => receiver.requests.some((r) => r.path === path), 5000, 'the delivery');
    await eventually(async () => (await dispatchesOf(app, t.pat, s.id)).every((d) => d.status === 'delivered'), 5000, 'its record delivered');
    // The dispatcher's queue reads: due deliveries of a session, and its next due time.
    expect(queueReads(executed.slice(start)).map((e) => e.caller)).toEqual([]);
  });
});
