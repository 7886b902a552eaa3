/**
 * Receives that arrive together share commits (SQLite: one COMMIT per event-loop turn), and that
 * changes nothing a client or a receiver sees: each receive is answered only once its message,
 * its events and its outbox rows are committed (read here on a second, independent connection);
 * a receive whose transaction fails leaves nothing behind, takes nothing of the others with it,
 * and is never delivered, even when its ids are given again to the next events. Runs on SQLite
 * ("all") and on PostgreSQL ("on postgres").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, DbHandle } from '../../../core/db.ts';
import { openPostgres } from '../../../core/db-postgres.ts';
import { openSqlite } from '../../../core/db-sqlite.ts';
import type { TestApp } from '../../helpers/app.ts';
import { call, eventually, hookedSession, Receiver, type SessionInfo, PATIENT_TOML, startWebhooksApp, type Tenant, tenant } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let receiver: Receiver;
let hooked: SessionInfo;
let quiet: SessionInfo;
/** A connection of its own: it sees only what is committed. */
let outside: DbHandle;

beforeAll(async () => {
  receiver = await Receiver.start();
  app = await startWebhooksApp(PATIENT_TOML);
  t = await tenant(app);
  hooked = await hookedSession(app, t.pat, receiver.url('/hooked'), ['messages.received']);
  // A webhook, but not for messages.
  quiet = await hookedSession(app, t.pat, receiver.url('/quiet'), ['session.status']);
  const { database } = app.running.config.core;
  outside = database.engine === 'postgres' ? await openPostgres(database.url!, { poolSize: 2, connectTimeoutMs: 5000 }) : openSqlite(database.path);
});

afterAll(async () => {
  await outside?.close();
  await app?.close();
  await receiver?.close();
});

/** What of a received text is committed: its message row, its messages.received event, its outbox row. */
async function committedRows(db: Db, sessionId: number, text: string) {
  const like = `%${text}%`;
  return {
    messages: await db.value<number>('SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message LIKE ?', [sessionId, like]),
    events: await db.value<number>("SELECT COUNT(*) FROM sessions_events WHERE session_id = ? AND event = 'messages.received' AND payload LIKE ?", [
      sessionId,
      like,
    ]),
    outbox: await db.value<number>('SELECT COUNT(*) FROM webhooks_dispatches WHERE session_id = ? AND body LIKE ?', [sessionId, like]),
  };
}

const from = (i: number) => `+1415556${String(1000 + i)}`;

describe('receives committed together', () => {
  it('answers each of many concurrent receives only after its rows are committed, and delivers each once, in order of commit', async () => {
    const N = 40;
    const seen: Record<string, unknown>[] = [];
    const answers = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const res = await call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(i), text: `together #${i}#` });
        // At the answer, on another connection: everything of this receive is committed.
        seen.push({ i, ...(await committedRows(outside, hooked.id, `together #${i}#`)) });
        return res;
      }),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(N).fill(200));
    expect(seen.sort((a, b) => (a.i as number) - (b.i as number))).toEqual(Array.from({ length: N }, (_, i) => ({ i, messages: 1, events: 1, outbox: 1 })));

    const together = () => receiver.requests.filter((r) => JSON.stringify(r.json).includes('together #'));
    await eventually(() => together().length >= N, 30_000, 'every delivery');
    const texts = together().map((r) => /together #(\d+)#/.exec(JSON.stringify(r.json))?.[1]);
    expect(new Set(texts).size).toBe(N);
    // Deliveries of one session start in the order of its events (their ids: the commit order),
    // at most 32 at once (concurrency_per_session): the first to arrive is one of the first 32 events.
    const eventOrder = (
      await outside.all<{ body: string }>("SELECT body FROM webhooks_dispatches WHERE session_id = ? AND body LIKE '%together #%' ORDER BY event_id", [
        hooked.id,
      ])
    ).map((r) => /together #(\d+)#/.exec(r.body)?.[1]);
    expect(eventOrder).toHaveLength(N);
    expect(eventOrder.slice(0, 32)).toContain(texts[0]);
  });

  it('a receive whose transaction fails leaves no row and is never delivered; the receives beside it commit and are delivered', async () => {
    const before = receiver.requests.length;
    // A subscriber that refuses one text: it runs inside the recording transaction, after the outbox row was written.
    const unsubscribe = app.running.services.sessions!.onEvent(async (event) => {
      if (event.event === 'messages.received' && JSON.stringify(event.payload).includes('refused #')) throw new Error('refused by the test');
    });
    try {
      const burst = await Promise.all([
        call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(100), text: 'beside #1#' }),
        call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(101), text: 'refused #1#' }),
        call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(102), text: 'beside #2#' }),
      ]);
      expect(burst.map((r) => r.status)).toEqual([200, 500, 200]);
      // The ids a failed transaction used are given again: here to the same events of a session
      // not subscribed to them (a new sender each: the same events), then to one that is.
      expect((await call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(105), text: 'refused #2#' })).status).toBe(500);
      expect((await call(app, quiet.apiKey, 'POST', '/api/sandbox/receive', { from: from(103), text: 'quiet #1#' })).status).toBe(200);
      expect((await call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: from(104), text: 'after #1#' })).status).toBe(200);
    } finally {
      unsubscribe();
    }
    expect(await committedRows(outside, hooked.id, 'refused #1#')).toEqual({ messages: 0, events: 0, outbox: 0 });
    expect(await committedRows(outside, hooked.id, 'refused #2#')).toEqual({ messages: 0, events: 0, outbox: 0 });
    expect(await committedRows(outside, hooked.id, 'beside #1#')).toEqual({ messages: 1, events: 1, outbox: 1 });
    expect(await committedRows(outside, hooked.id, 'beside #2#')).toEqual({ messages: 1, events: 1, outbox: 1 });
    expect(await committedRows(outside, quiet.id, 'quiet #1#')).toEqual({ messages: 1, events: 1, outbox: 0 });

    const texts = () =>
      receiver.requests
        .slice(before)
        .map((r) => /((?:beside|refused|quiet|after) #\d+#)/.exec(JSON.stringify(r.json))?.[1])
        .filter((text) => text !== undefined);
    await eventually(() => texts().length >= 3, 30_000, 'the deliveries');
    // Time for anything else that would go out (a delivery of a refused receive) to arrive.
    await new Promise((r) => setTimeout(r, 500));
    expect(texts().sort()).toEqual(['after #1#', 'beside #1#', 'beside #2#']);
  });
});
