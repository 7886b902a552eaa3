/**
 * How often one inbound sandbox text reads its session's row (`sessions_sessions`), from the
 * request to the last delivery: every statement the app executes is counted by wrapping
 * better-sqlite3's Statement methods, so statements prepared at start-up count too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { dispatchesOf, eventually, hookedSession, receive, Receiver, startWebhooksApp, type Tenant, tenant } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let receiver: Receiver;
/** Every statement executed: its SQL and the plugin code that ran it. */
const executed: { sql: string; caller: string }[] = [];
let restore: (() => void) | undefined;

beforeAll(async () => {
  app = await startWebhooksApp();
  t = await tenant(app);
  receiver = await Receiver.start();
  const proto = Object.getPrototypeOf(app.running.db.prepare('SELECT 1')) as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  for (const name of ['get', 'all', 'run', 'iterate']) {
    const original = proto[name]!;
    originals.set(name, original);
    proto[name] = function counted(this: { source: string }, ...args: unknown[]) {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 40;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      executed.push({ sql: this.source, caller: callerOf(stack) });
      return original.apply(this, args);
    };
  }
  restore = () => {
    for (const [name, original] of originals) proto[name] = original;
  };
});
afterAll(async () => {
  restore?.();
  await app?.close();
  await receiver?.close();
});

/**
 * Who asked for a statement: `webhooks/<file:line>` when webhooks code is on the stack (it called
 * into the sessions service), else the first frame under plugins/ outside a store.
 */
function callerOf(stack: string): string {
  const frames = stack.split('\n').filter((l) => l.includes('/plugins/') && !l.includes('/test/'));
  const frame = frames.find((l) => l.includes('/plugins/webhooks/')) ?? frames.find((l) => !/store\.ts/.test(l)) ?? frames[0] ?? '';
  return /\/plugins\/([\w/.-]+:\d+)/.exec(frame)?.[1] ?? 'core';
}

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
    const queueReads = executed.slice(start).filter((e) => /FROM webhooks_dispatches\s+WHERE session_id = \? AND status = 'pending'/.test(e.sql));
    expect(queueReads.map((e) => e.caller)).toEqual([]);
  });
});
