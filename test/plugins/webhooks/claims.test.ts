/**
 * The outbox's claims and outcome writes on PostgreSQL, at the store (plugins/webhooks/store.ts),
 * with two stores on two pools of one database standing for two instances, and explicit clocks
 * (a claim's `now`), so that what is asserted does not hang on timing: a claim is one call of the
 * `webhooks_claim` function (migration 003), a batch of outcomes one statement. Runs on PostgreSQL
 * in every project: only a shared database has claims.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type PostgresDb } from '../../../core/db-postgres.ts';
import { migrate } from '../../../core/migrations.ts';
import { migrations } from '../../../plugins/webhooks/migrations.ts';
import { type Completion, claimLockKey, WAKE_CHANNEL, WebhooksStore } from '../../../plugins/webhooks/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { eventually } from './helpers.ts';

const LEASE_MS = 1000;
const T0 = 1_900_000_000_000;

let url: string;
let dbA: PostgresDb;
let dbB: PostgresDb;
let a: WebhooksStore;
let b: WebhooksStore;
/** A connection of its own: locks held from outside, notifications listened to. */
let outside: pg.Client;
let nextSession = 1;

beforeAll(async () => {
  url = await freshDatabase();
  dbA = await openPostgres(url, { poolSize: 3, connectTimeoutMs: 5000 });
  dbB = await openPostgres(url, { poolSize: 3, connectTimeoutMs: 5000 });
  await migrate(dbA, [{ plugin: 'webhooks', migrations }]);
  a = new WebhooksStore(dbA);
  b = new WebhooksStore(dbB);
  outside = new pg.Client({ connectionString: url });
  await outside.connect();
});
afterAll(async () => {
  await outside?.end();
  await dbA?.close();
  await dbB?.close();
});

/** `n` deliveries of a new session, due at T0. */
async function queued(n: number): Promise<{ sessionId: number; ids: number[] }> {
  const sessionId = nextSession++;
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    ids.push(
      await a.enqueue(
        {
          orgId: 'org',
          sessionId,
          eventId: i,
          webhookId: `msg_${sessionId}_${i}`,
          event: 'messages.received',
          url: 'http://receiver.test/',
          body: `{"n":${i}}`,
        },
        T0,
      ),
    );
  }
  return { sessionId, ids };
}

const claimOf = (store: WebhooksStore, owner: string, sessionId: number, now: number, limit = 4, perSession = 4) =>
  store.claim(sessionId, now, { limit, owner, leaseMs: LEASE_MS, perSession, held: [] });

function completion(dispatchId: number, sessionId: number, over: Partial<Completion> = {}): Completion {
  return {
    dispatchId,
    sessionId,
    number: 1,
    startedAt: T0 + 10,
    durationMs: 5,
    statusCode: 200,
    error: null,
    response: 'ok',
    status: 'delivered',
    nextAttemptAt: null,
    url: null,
    recordAttempt: true,
    ...over,
  };
}

const rowOf = (id: number) =>
  dbA.one<{
    status: string;
    attempt_count: number;
    last_status_code: number | null;
    last_error: string | null;
    next_attempt_at: number | null;
    finished_at: number | null;
    leased_by: string | null;
    lease_until: number | null;
  }>('SELECT status, attempt_count, last_status_code, last_error, next_attempt_at, finished_at, leased_by, lease_until FROM webhooks_dispatches WHERE id = ?', [
    id,
  ]);

describe('claims on PostgreSQL (one round trip each)', () => {
  it('hold the per-session limit over two instances whose claims wait for the same lock: the second counts the leases the first committed', async () => {
    const { sessionId, ids } = await queued(10);
    // The session's claim lock, held from outside: both claims wait for it, then run one after the other.
    await outside.query('SELECT pg_advisory_lock($1)', [claimLockKey(sessionId)]);
    const claims = [claimOf(a, 'a', sessionId, T0), claimOf(b, 'b', sessionId, T0)] as const;
    await eventually(
      async () => (await outside.query("SELECT COUNT(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0].n === 2,
      10_000,
      'both claims waiting for the lock',
    );
    await outside.query('SELECT pg_advisory_unlock($1)', [claimLockKey(sessionId)]);
    const [ra, rb] = await Promise.all(claims);
    const taken = [...ra.rows, ...rb.rows].map((r) => r.id).sort((x, y) => x - y);
    // Four in all (the limit), the oldest, each once; the one that ran second found the session full.
    expect(taken).toEqual(ids.slice(0, 4));
    const [first, second] = ra.rows.length ? ([ra, rb] as const) : ([rb, ra] as const);
    expect(first.rows).toHaveLength(4);
    expect(first.atLimit).toBe(true);
    expect(second).toMatchObject({ rows: [], atLimit: true, later: T0 + LEASE_MS });
    // Each claimed row carries what an attempt needs, oldest first.
    expect(first.rows[0]).toEqual({
      id: ids[0],
      session_id: sessionId,
      webhook_id: `msg_${sessionId}_0`,
      url: 'http://receiver.test/',
      body: '{"n":0}',
      attempt_count: 0,
    });
  });

  it('say when nothing more is due: fewer rows than room, the next takeable time (a lease end or a retry time), none left', async () => {
    const { sessionId, ids } = await queued(2);
    const first = await claimOf(a, 'a', sessionId, T0);
    expect(first.rows.map((r) => r.id)).toEqual(ids);
    expect(first).toMatchObject({ atLimit: false, later: T0 + LEASE_MS });
    // Claimed by a, still leased: nothing for b before the lease ends.
    expect(await claimOf(b, 'b', sessionId, T0 + LEASE_MS - 1)).toMatchObject({ rows: [], atLimit: false, later: T0 + LEASE_MS });
    await a.complete([completion(ids[0]!, sessionId), completion(ids[1]!, sessionId)], T0 + 20, 'a');
    expect(await claimOf(b, 'b', sessionId, T0 + 30)).toMatchObject({ rows: [], atLimit: false, later: null });
  });

  it('refuse to run under another isolation level than READ COMMITTED (the count would not see the last claim)', async () => {
    await outside.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      await expect(outside.query("SELECT * FROM webhooks_claim(1, 0, 1, 'x', '{}', 1, 1, 1)")).rejects.toThrow(/needs READ COMMITTED/);
    } finally {
      await outside.query('ROLLBACK');
    }
  });
});

describe('outcomes on PostgreSQL (one statement per batch)', () => {
  it('write every outcome of a batch with its attempt, release the leases, NOTIFY each session once, and skip an outcome whose lease was taken over', async () => {
    const one = await queued(3);
    const two = await queued(1);
    const ra = await claimOf(a, 'a', one.sessionId, T0);
    const rb = await claimOf(a, 'a', two.sessionId, T0);
    expect(ra.rows).toHaveLength(3);
    expect(rb.rows).toHaveLength(1);
    const [delivered, retried, dropped] = one.ids as [number, number, number];
    const [overtaken] = two.ids as [number];
    // a outlived its lease on `overtaken`: b took it over.
    expect((await claimOf(b, 'b', two.sessionId, T0 + LEASE_MS)).rows.map((r) => r.id)).toEqual([overtaken]);

    const heard: string[] = [];
    outside.on('notification', (m) => {
      if (m.channel === WAKE_CHANNEL) heard.push(m.payload ?? '');
    });
    await outside.query(`LISTEN ${WAKE_CHANNEL}`);
    const now = T0 + 50;
    const written = await a.complete(
      [
        completion(delivered, one.sessionId, { response: 'thanks, "quoted" {braces}, \\ and a comma' }),
        completion(retried, one.sessionId, {
          statusCode: 503,
          error: 'the receiver answered 503',
          response: null,
          status: 'pending',
          nextAttemptAt: T0 + 5000,
          url: 'http://moved.test/',
        }),
        completion(dropped, one.sessionId, {
          number: 0,
          statusCode: null,
          error: 'session deleted: not delivered',
          response: null,
          status: 'abandoned',
          recordAttempt: false,
        }),
        completion(overtaken, two.sessionId),
      ],
      now,
      'a',
    );
    expect([...written].sort((x, y) => x - y)).toEqual([delivered, retried, dropped]);
    expect(await rowOf(delivered)).toEqual({
      status: 'delivered',
      attempt_count: 1,
      last_status_code: 200,
      last_error: null,
      next_attempt_at: null,
      finished_at: now,
      leased_by: null,
      lease_until: null,
    });
    expect(await rowOf(retried)).toEqual({
      status: 'pending',
      attempt_count: 1,
      last_status_code: 503,
      last_error: 'the receiver answered 503',
      next_attempt_at: T0 + 5000,
      finished_at: null,
      leased_by: null,
      lease_until: null,
    });
    expect(await dbA.value('SELECT url FROM webhooks_dispatches WHERE id = ?', [retried])).toBe('http://moved.test/');
    expect(await rowOf(dropped)).toMatchObject({
      status: 'abandoned',
      attempt_count: 0,
      last_status_code: null,
      last_error: 'session deleted: not delivered',
      finished_at: now,
    });
    // b's delivery is b's: a's late outcome left it alone.
    expect(await rowOf(overtaken)).toMatchObject({ status: 'pending', attempt_count: 0, leased_by: 'b', lease_until: T0 + 2 * LEASE_MS });
    // Attempts: one per written outcome that made one (not the dropped one, not the overtaken one).
    const attempts = await dbA.all<{ dispatch_id: number; number: number; status_code: number | null; error: string | null; response: string | null }>(
      'SELECT dispatch_id, number, status_code, error, response FROM webhooks_attempts WHERE dispatch_id = ANY(?::bigint[]) ORDER BY dispatch_id',
      [[delivered, retried, dropped, overtaken]],
    );
    expect(attempts).toEqual([
      { dispatch_id: delivered, number: 1, status_code: 200, error: null, response: 'thanks, "quoted" {braces}, \\ and a comma' },
      { dispatch_id: retried, number: 1, status_code: 503, error: 'the receiver answered 503', response: null },
    ]);
    // One wake-up for the session whose slots freed, none for the one whose outcome was not written.
    await eventually(() => heard.length >= 1, 5000, 'the NOTIFY of the batch');
    await new Promise((r) => setTimeout(r, 100));
    expect(heard).toEqual([String(one.sessionId)]);
    await outside.query(`UNLISTEN ${WAKE_CHANNEL}`);
  });

  it('re-send a delivery whose instance died after its answer and before its outcome was written once, from the instance that takes it over', async () => {
    const { sessionId, ids } = await queued(1);
    const [id] = ids as [number];
    // a sends it and reads the answer; its outcome waits for the next batch when a dies.
    expect((await claimOf(a, 'a', sessionId, T0)).rows.map((r) => r.id)).toEqual([id]);
    // Until a's lease ends nobody else takes it; then b does, once.
    expect((await claimOf(b, 'b', sessionId, T0 + LEASE_MS - 1)).rows).toEqual([]);
    expect((await claimOf(b, 'b', sessionId, T0 + LEASE_MS)).rows.map((r) => r.id)).toEqual([id]);
    expect((await claimOf(b, 'b', sessionId, T0 + LEASE_MS + 1)).rows).toEqual([]);
    // Had a only been slow, its outcome would now be refused: b's attempt is the one recorded.
    expect([...(await a.complete([completion(id, sessionId)], T0 + LEASE_MS + 2, 'a'))]).toEqual([]);
    expect([...(await b.complete([completion(id, sessionId, { startedAt: T0 + LEASE_MS })], T0 + LEASE_MS + 3, 'b'))]).toEqual([id]);
    // Delivered: no instance takes it again, ever.
    expect((await claimOf(a, 'a', sessionId, T0 + 100 * LEASE_MS)).rows).toEqual([]);
    expect(await rowOf(id)).toMatchObject({ status: 'delivered', attempt_count: 1, leased_by: null });
    expect(await dbA.all('SELECT started_at FROM webhooks_attempts WHERE dispatch_id = ?', [id])).toEqual([{ started_at: T0 + LEASE_MS }]);
  });
});

describe('lease renewals on PostgreSQL', () => {
  it('renew what the instance holds, skipping (not waiting for) a row locked by a write in progress, renewed at the next heartbeat', async () => {
    const { sessionId, ids } = await queued(2);
    const [free, locked] = ids as [number, number];
    expect((await claimOf(a, 'a', sessionId, T0)).rows).toHaveLength(2);
    // Another transaction (a batch of outcomes, say) holds one of the rows.
    await outside.query('BEGIN');
    await outside.query('SELECT id FROM webhooks_dispatches WHERE id = $1 FOR UPDATE', [locked]);
    try {
      expect(await a.renew(ids, 'a', T0 + 5000)).toBe(1);
    } finally {
      await outside.query('COMMIT');
    }
    expect(await rowOf(free)).toMatchObject({ leased_by: 'a', lease_until: T0 + 5000 });
    expect(await rowOf(locked)).toMatchObject({ leased_by: 'a', lease_until: T0 + LEASE_MS });
    expect(await a.renew(ids, 'a', T0 + 6000)).toBe(2);
    expect(await rowOf(locked)).toMatchObject({ leased_by: 'a', lease_until: T0 + 6000 });
    // Another owner's lease is not renewed.
    expect(await b.renew(ids, 'b', T0 + 7000)).toBe(0);
  });
});

describe('wake-ups on PostgreSQL', () => {
  it("tell a listener which notifications this process's own transactions sent (the dispatcher skips those)", async () => {
    const heard: { payload: string; ours: boolean }[] = [];
    const stop = await dbA.listen(WAKE_CHANNEL, (payload, ours) => heard.push({ payload, ours }));
    try {
      const mine = await queued(1);
      const theirs = nextSession++;
      await b.enqueue(
        { orgId: 'org', sessionId: theirs, eventId: 0, webhookId: 'msg_b', event: 'messages.received', url: 'http://receiver.test/', body: '{}' },
        T0,
      );
      await eventually(() => heard.length >= 2, 5000, 'both notifications');
      expect(heard).toEqual([
        { payload: String(mine.sessionId), ours: true },
        { payload: String(theirs), ours: false },
      ]);
    } finally {
      await stop();
    }
  });
});
