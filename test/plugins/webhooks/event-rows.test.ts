/**
 * Events and their outbox rows written in batches (the sessions recorder with `onEventRow`): the
 * events a transaction emits are written before its next statement and before it ends, on
 * PostgreSQL by one statement with their outbox rows and the NOTIFY; ids in the order the events
 * were emitted, each outbox row pointing at its event; nothing written when the transaction fails,
 * each event once when it runs again. Runs on SQLite ("all") and on PostgreSQL ("on postgres").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConstraintError, type DbHandle } from '../../../core/db.ts';
import type { PostgresDb } from '../../../core/db-postgres.ts';
import type { TestApp } from '../../helpers/app.ts';
import type { SessionsStore } from '../../../plugins/sessions/store.ts';
import type { EventRowTable, SessionsService } from '../../../plugins/sessions/types.ts';
import { WAKE_CHANNEL } from '../../../plugins/webhooks/store.ts';
import {
  call,
  committedView,
  eventually,
  hookedSession,
  PATIENT_TOML,
  pgStatements,
  Receiver,
  type SessionInfo,
  startWebhooksApp,
  type Tenant,
  tenant,
} from './helpers.ts';

let app: TestApp;
let t: Tenant;
let receiver: Receiver;
let hooked: SessionInfo;
let svc: SessionsService;
/** A connection of its own: it sees only what is committed. */
let outside: DbHandle;
let postgres = false;

beforeAll(async () => {
  receiver = await Receiver.start();
  app = await startWebhooksApp(PATIENT_TOML);
  t = await tenant(app);
  hooked = await hookedSession(app, t.pat, receiver.url('/rows'), ['messages.received', 'contacts.update']);
  svc = app.running.services.sessions!;
  postgres = app.running.config.core.database.engine === 'postgres';
  outside = await committedView(app);
});

afterAll(async () => {
  await outside?.close();
  await app?.close();
  await receiver?.close();
});

/** The committed events of a session after `afterId`, with the outbox rows pointing at each. */
async function committed(sessionId: number, afterId: number) {
  const events = await outside.all<{ id: number; event: string; payload: string }>(
    'SELECT id, event, payload FROM sessions_events WHERE session_id = ? AND id > ? ORDER BY id',
    [sessionId, afterId],
  );
  const outbox = await outside.all<{ id: number; event_id: number; event: string; body: string; status: string }>(
    'SELECT id, event_id, event, body, status FROM webhooks_dispatches WHERE session_id = ? AND event_id > ? ORDER BY id',
    [sessionId, afterId],
  );
  return { events, outbox };
}

const lastEventId = async (sessionId: number) =>
  (await outside.value<number>('SELECT COALESCE(MAX(id), 0) FROM sessions_events WHERE session_id = ?', [sessionId])) ?? 0;

describe('events written in batches with their outbox rows', () => {
  it('one transaction emitting N events: ids in emit order, each subscribed one with its outbox row, one statement on PostgreSQL, NOTIFY to another connection', async () => {
    const from = await lastEventId(hooked.id);
    const notified: string[] = [];
    const unlisten = postgres ? await (outside as PostgresDb).listen(WAKE_CHANNEL, (payload) => notified.push(payload)) : async () => {};
    const announced: { id: number; event: string }[] = [];
    const off = svc.afterEvent((event) => announced.push({ id: event.id, event: event.event }));
    const counting = postgres ? pgStatements() : undefined;
    let emitted: { id: number }[] = [];
    try {
      // messages.received and contacts.update are subscribed; messages.upsert and session.status are not.
      const names = ['messages.upsert', 'messages.received', 'session.status', 'contacts.update', 'messages.received'] as const;
      emitted = await svc.transaction(async () => {
        const events = [];
        for (const [i, name] of names.entries()) events.push(await svc.emit(hooked.id, name, { n: i }));
        return events;
      }, [hooked.id]);
    } finally {
      counting?.restore();
      off();
    }
    const { events, outbox } = await committed(hooked.id, from);
    expect(events.map((e) => [e.event, JSON.parse(e.payload).data.n])).toEqual([
      ['messages.upsert', 0],
      ['messages.received', 1],
      ['session.status', 2],
      ['contacts.update', 3],
      ['messages.received', 4],
    ]);
    // The ids the emitters and the listeners got are the committed rows', in order.
    expect(emitted.map((e) => e.id)).toEqual(events.map((e) => e.id));
    expect(announced).toEqual(events.map((e) => ({ id: e.id, event: e.event })));
    // One outbox row per subscribed event, pointing at it, its body the recorded payload.
    expect(outbox.map((d) => [d.event_id, d.event, d.status])).toEqual([
      [events[1]!.id, 'messages.received', 'pending'],
      [events[3]!.id, 'contacts.update', 'pending'],
      [events[4]!.id, 'messages.received', 'pending'],
    ]);
    expect(outbox.map((d) => d.body)).toEqual([events[1]!.payload, events[3]!.payload, events[4]!.payload]);
    if (postgres) {
      // The five events and the three outbox rows: one statement (the recorder's), none of its own for the outbox.
      const writes = counting!.texts.filter((sql) => /INSERT INTO (sessions_events|webhooks_dispatches)/.test(sql));
      expect(writes).toHaveLength(1);
      expect(writes[0]).toMatch(/INSERT INTO sessions_events[\s\S]*INSERT INTO webhooks_dispatches[\s\S]*pg_notify/);
      // Another connection (another instance's dispatcher) is woken at the commit.
      await eventually(() => notified.includes(String(hooked.id)), 5000, 'the NOTIFY');
    }
    await unlisten();
    // And they are delivered (started in order; several of a session may be in flight at once).
    await eventually(() => receiver.requests.filter((r) => r.path === '/rows' && /"n":[134]/.test(JSON.stringify(r.json))).length >= 3, 20_000, 'deliveries');
    const delivered = receiver.requests.filter((r) => r.path === '/rows' && /"n":[134]/.test(JSON.stringify(r.json))).map((r) => (r.json as any).data.n);
    expect(delivered.sort()).toEqual([1, 3, 4]);
  });

  it('a receive writes its message, events, outbox row and audit row, all committed; on PostgreSQL events, outbox and audit by one statement', async () => {
    const from = await lastEventId(hooked.id);
    const audits = async () =>
      (await outside.value<number>("SELECT COUNT(*) FROM sessions_audit_logs WHERE session_id = ? AND action = 'sandbox.receive'", [hooked.id])) ?? 0;
    const auditsBefore = await audits();
    const counting = postgres ? pgStatements() : undefined;
    try {
      const res = await call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155557100', text: 'one statement' });
      expect(res.status).toBe(200);
    } finally {
      counting?.restore();
    }
    const { events, outbox } = await committed(hooked.id, from);
    expect(events.map((e) => e.event)).toEqual(['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-personal']);
    expect(outbox.map((d) => [d.event_id, d.event])).toEqual([[events[2]!.id, 'messages.received']]);
    expect(await audits()).toBe(auditsBefore + 1);
    if (postgres) {
      const writes = counting!.texts.filter((sql) => /INSERT INTO (sessions_events|webhooks_dispatches|sessions_audit_logs)/.test(sql));
      expect(writes).toHaveLength(1);
      expect(writes[0]).toMatch(/INSERT INTO sessions_events[\s\S]*INSERT INTO webhooks_dispatches[\s\S]*INSERT INTO sessions_audit_logs/);
    }
  });

  it('the outbox carries only the indexes its queries use (none by event: each was an entry more on every outbox write and outcome)', async () => {
    const names = postgres
      ? await outside.all<{ name: string }>("SELECT indexname AS name FROM pg_indexes WHERE tablename = 'webhooks_dispatches' ORDER BY 1")
      : await outside.all<{ name: string }>(
          "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'webhooks_dispatches' AND name NOT LIKE 'sqlite_autoindex%' ORDER BY 1",
        );
    expect(names.map((r) => r.name)).toEqual([
      'webhooks_dispatches_by_org',
      'webhooks_dispatches_by_session',
      'webhooks_dispatches_due',
      'webhooks_dispatches_finished',
      ...(postgres ? ['webhooks_dispatches_pkey'] : []),
    ]);
  });

  it('events are written before the transaction reads: a read after emit sees them with their ids', async () => {
    const from = await lastEventId(hooked.id);
    const seen = await svc.transaction(async () => {
      const first = await svc.emit(hooked.id, 'session.status', { read: 'me' });
      const second = await svc.emit(hooked.id, 'messages.upsert', { read: 'me too' });
      const read = await svc.events(hooked.id, { afterId: from });
      return { first: first.id, second: second.id, read: read.map((e) => [e.id, e.event]) };
    }, [hooked.id]);
    expect(seen.first).toBeGreaterThan(0);
    expect(seen.read).toEqual([
      [seen.first, 'session.status'],
      [seen.second, 'messages.upsert'],
    ]);
  });

  it('a transaction that fails after emitting writes nothing and announces nothing; a failed write fails it even when the statement that sent it was caught', async () => {
    const from = await lastEventId(hooked.id);
    const announced: number[] = [];
    const off = svc.afterEvent((event) => announced.push(event.id));
    try {
      await expect(
        svc.transaction(async () => {
          await svc.emit(hooked.id, 'messages.received', { doomed: 1 });
          throw new Error('refused after the emit');
        }, [hooked.id]),
      ).rejects.toThrow('refused after the emit');
      // A subscriber refusing the events: the statement that made them be written fails; the caller catches it and goes on.
      const offRefuse = svc.onEvent((event) => {
        if ((event.payload.data as { doomed?: number } | null)?.doomed === 2) throw new Error('refused by a subscriber');
      });
      try {
        await expect(
          svc.transaction(async () => {
            await svc.emit(hooked.id, 'messages.received', { doomed: 2 });
            await svc.events(hooked.id).catch(() => []);
            return 'went on';
          }, [hooked.id]),
        ).rejects.toThrow('refused by a subscriber');
      } finally {
        offRefuse();
      }
    } finally {
      off();
    }
    expect(announced).toEqual([]);
    expect(await committed(hooked.id, from)).toEqual({ events: [], outbox: [] });
  });

  it.runIf(process.env.WHARF_TEST_DATABASE === 'postgres')(
    'a transaction run again after a serialization failure writes each event and outbox row once, announced once',
    async () => {
      const from = await lastEventId(hooked.id);
      const announced: number[] = [];
      const off = svc.afterEvent((event) => announced.push(event.id));
      let attempts = 0;
      try {
        // Beside it in the same group, a receive: its rows are written once too.
        const [, received] = await Promise.all([
          svc.transaction(async () => {
            attempts++;
            await svc.emit(hooked.id, 'messages.received', { rerun: 1 });
            await svc.emit(hooked.id, 'contacts.update', { rerun: 2 });
            // Written (a read follows), then the attempt is doomed: PostgreSQL's serialization failure.
            await svc.events(hooked.id, { afterId: from });
            if (attempts === 1) throw Object.assign(new Error('could not serialize access'), { code: '40001' });
          }, [hooked.id]),
          call(app, hooked.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155557001', text: 'beside the rerun' }),
        ]);
        expect(received.status).toBe(200);
      } finally {
        off();
      }
      expect(attempts).toBe(2);
      const { events, outbox } = await committed(hooked.id, from);
      const reruns = events.filter((e) => e.payload.includes('"rerun"'));
      expect(reruns.map((e) => [e.event, JSON.parse(e.payload).data.rerun])).toEqual([
        ['messages.received', 1],
        ['contacts.update', 2],
      ]);
      expect(events.filter((e) => e.payload.includes('beside the rerun')).map((e) => e.event)).toEqual([
        'messages.upsert',
        'messages.received',
        'messages-personal',
      ]);
      // Each outbox row once, each pointing at a committed event; every committed event announced once.
      const ids = new Set(events.map((e) => e.id));
      expect(outbox.every((d) => ids.has(d.event_id))).toBe(true);
      expect(outbox.map((d) => d.event_id)).toEqual([...new Set(outbox.map((d) => d.event_id))]);
      expect(outbox.filter((d) => d.body.includes('"rerun"')).map((d) => d.event)).toEqual(['messages.received', 'contacts.update']);
      expect([...announced].sort((a, b) => a - b)).toEqual(events.map((e) => e.id));
    },
  );

  it.runIf(process.env.WHARF_TEST_DATABASE === 'postgres')(
    'transactions of one group share the session row they read, see what an earlier one wrote, and not what a rolled-back one did',
    async () => {
      const store = (svc as unknown as { store: SessionsStore }).store;
      const id = hooked.id;
      const now = () => new Date().toISOString();
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      // The group running now: those asked for meanwhile wait together, as the next group.
      const first = svc.transaction(async () => {
        await store.session(id);
        started();
        await gate;
      }, [id]);
      await running;
      const counting = pgStatements();
      const seen: string[] = [];
      const group = Promise.allSettled([
        svc.transaction(async () => {
          await store.updateSession(id, { name: 'written by the first' }, now());
          seen.push(`1:${(await store.session(id))!.name}`);
        }, [id]),
        svc.transaction(async () => {
          seen.push(`2:${(await store.session(id))!.name}`);
          await store.updateSession(id, { name: 'rolled back' }, now());
          seen.push(`2:${(await store.session(id))!.name}`);
          throw new Error('rolls back its savepoint');
        }, [id]),
        svc.transaction(async () => {
          seen.push(`3:${(await store.session(id))!.name}`);
        }, [id]),
      ]);
      release();
      await first;
      const settled = await group;
      counting.restore();
      expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(seen).toEqual(['1:written by the first', '2:written by the first', '2:rolled back', '3:written by the first']);
      // Read after each write and after the rollback; the second's first read is the first's. (On the
      // group's connection: the dispatcher reads session rows too.)
      const connection = counting.clients[counting.texts.findIndex((sql) => sql.startsWith('UPDATE sessions_sessions SET name'))];
      const reads = counting.texts.filter(
        (sql, i) => counting.clients[i] === connection && /^SELECT id, org_id[\s\S]*FROM sessions_sessions WHERE id = /.test(sql),
      );
      expect(reads).toHaveLength(3);
      expect((await svc.get(id))!.name).toBe('written by the first');
    },
  );
});

/**
 * A table of this test's own whose rows are written with events (as the outbox's are), one per
 * event whose data has a `tag`: a tag used twice breaks its unique constraint, and a tag
 * starting with `throw` makes the row's `written` (what runs once the batch's answer is read) throw.
 */
const TAGS: EventRowTable = { name: 'test_event_tags', columns: [['tag', 'text']], eventId: 'event_id' };

describe("a transaction's events batch that fails", () => {
  let offTags: () => void;
  /** What happened, in order: members running, and rows given their ids (`written`). */
  const order: string[] = [];
  beforeAll(async () => {
    const id = postgres ? 'id BIGSERIAL PRIMARY KEY' : 'id INTEGER PRIMARY KEY AUTOINCREMENT';
    await app.running.data.exec(`CREATE TABLE test_event_tags (${id}, tag TEXT NOT NULL UNIQUE, event_id BIGINT)`);
    offTags = svc.onEventRow(TAGS, (event) => {
      const tag = (event.payload.data as { tag?: string } | null)?.tag;
      if (!tag) return undefined;
      return {
        values: [tag],
        written: (id) => {
          order.push(`written ${tag} ${id}`);
          if (tag.startsWith('throw')) throw new Error(`refused once written: ${tag}`);
        },
      };
    });
  });
  afterAll(() => offTags?.());

  /**
   * Runs `tags.length` transactions of the hooked session that wait together (one group on
   * PostgreSQL: a transaction of the session holds its lock meanwhile), each emitting one event
   * tagged with its tag; answers how each settled and how often each ran.
   */
  async function together(tags: readonly string[]) {
    const store = (svc as unknown as { store: SessionsStore }).store;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holder = svc.transaction(async () => {
      await store.session(hooked.id);
      started();
      await gate;
    }, [hooked.id]);
    await running;
    const runs = tags.map(() => 0);
    const members = tags.map((tag, i) =>
      svc.transaction(async () => {
        runs[i]!++;
        order.push(`${tag} runs`);
        return svc.emit(hooked.id, 'session.status', { tag });
      }, [hooked.id]),
    );
    const settled = Promise.allSettled(members);
    release();
    await holder;
    return { settled: await settled, runs };
  }

  const tagged = async (prefix: string) => {
    const rows = await outside.all<{ id: number; tag: string; event_id: number }>(
      'SELECT id, tag, event_id FROM test_event_tags WHERE tag LIKE ? ORDER BY id',
      [`${prefix}%`],
    );
    const events = await outside.all<{ id: number; payload: string }>(
      'SELECT id, payload FROM sessions_events WHERE session_id = ? AND payload LIKE ? ORDER BY id',
      [hooked.id, `%"tag":"${prefix}%`],
    );
    return { rows, events: events.map((e) => ({ id: e.id, tag: JSON.parse(e.payload).data.tag as string })) };
  };

  it('fails its own transaction alone with its own error (a row refused by a constraint); the next one commits once; ids given in order; nothing of it announced', async () => {
    const p = `batch-${Date.now()}-`;
    await app.running.data.run('INSERT INTO test_event_tags (tag) VALUES (?)', [`${p}taken`]);
    const announced: string[] = [];
    const off = svc.afterEvent((event) => {
      const tag = (event.payload.data as { tag?: string } | null)?.tag;
      if (tag?.startsWith(p)) announced.push(`${tag} ${event.id}`);
    });
    order.length = 0;
    let result: Awaited<ReturnType<typeof together>>;
    try {
      result = await together([`${p}first`, `${p}taken`, `${p}third`, `${p}fourth`]);
    } finally {
      off();
    }
    const { settled, runs } = result;
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    // On PostgreSQL the one after it ran twice: its first run's statements, behind the failed batch, were refused.
    expect(runs).toEqual(postgres ? [1, 1, 2, 1] : [1, 1, 1, 1]);
    const reason = (settled[1] as PromiseRejectedResult).reason;
    // Its own error (not PostgreSQL's "current transaction is aborted" of the statements after it).
    expect(reason).toBeInstanceOf(ConstraintError);
    expect(reason).toMatchObject({ kind: 'unique' });
    const { rows, events } = await tagged(p);
    expect(events.map((e) => e.tag)).toEqual([`${p}first`, `${p}third`, `${p}fourth`]);
    expect(rows.map((r) => [r.tag, r.event_id])).toEqual([[`${p}taken`, null], ...events.map((e) => [e.tag, e.id])]);
    // Each committed event once, announced once, after the commit; the emitters got the committed ids.
    expect(announced).toEqual(events.map((e) => `${e.tag} ${e.id}`));
    const emitted = settled.filter((r) => r.status === 'fulfilled').map((r) => (r.value as { id: number }).id);
    expect(emitted).toEqual(events.map((e) => e.id));
    // The rows were given their ids in order, those committed in the end last.
    const written = order.filter((line) => line.startsWith('written'));
    expect(written.slice(-3)).toEqual(rows.slice(1).map((r) => `written ${r.tag} ${r.id}`));
    expect(written.every((line) => !line.includes('taken'))).toBe(true);
    if (postgres) {
      // Each member's batch is read while the next one runs: the second ran before the first's row got its id.
      expect(order.indexOf(`${p}taken runs`)).toBeLessThan(order.indexOf(`written ${p}first ${rows[1]!.id}`));
    } else {
      expect(order.indexOf(`written ${p}first ${rows[1]!.id}`)).toBeLessThan(order.indexOf(`${p}taken runs`));
    }
  });

  it('fails its own transaction alone with its own error when what runs on its answer throws; the others commit once each', async () => {
    const p = `written-${Date.now()}-`;
    const announced: string[] = [];
    const off = svc.afterEvent((event) => {
      const tag = (event.payload.data as { tag?: string } | null)?.tag;
      if (tag?.startsWith(p)) announced.push(tag);
    });
    let result: Awaited<ReturnType<typeof together>>;
    try {
      result = await together([`${p}first`, `throw-${p}`, `${p}third`]);
    } finally {
      off();
    }
    const { settled, runs } = result;
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // On PostgreSQL its savepoint was released when its batch's answer was read (the next one was
    // running): the group's attempt was rolled back and the others ran again.
    expect(runs).toEqual(postgres ? [2, 1, 2] : [1, 1, 1]);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({ message: `refused once written: throw-${p}` });
    const { rows, events } = await tagged(p);
    expect(events.map((e) => e.tag)).toEqual([`${p}first`, `${p}third`]);
    expect(rows.map((r) => [r.tag, r.event_id])).toEqual(events.map((e) => [e.tag, e.id]));
    expect(await outside.value<number>('SELECT COUNT(*) FROM test_event_tags WHERE tag = ?', [`throw-${p}`])).toBe(0);
    expect(announced).toEqual([`${p}first`, `${p}third`]);
  });

  it("is waited for by its transaction when a subscriber runs on its events (it writes with the transaction): the subscribers' writes commit with them", async () => {
    const p = `subscribed-${Date.now()}-`;
    const off = svc.onEvent(async (event, tx) => {
      const tag = (event.payload.data as { tag?: string } | null)?.tag;
      if (tag?.startsWith(p)) await tx.run('INSERT INTO test_event_tags (tag, event_id) VALUES (?, ?)', [`${tag}-by-subscriber`, event.id]);
    });
    let result: Awaited<ReturnType<typeof together>>;
    try {
      result = await together([`${p}first`, `${p}second`]);
    } finally {
      off();
    }
    expect(result.settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    const { rows, events } = await tagged(p);
    expect(rows.map((r) => [r.tag, r.event_id])).toEqual([
      [`${p}first`, events[0]!.id],
      [`${p}first-by-subscriber`, events[0]!.id],
      [`${p}second`, events[1]!.id],
      [`${p}second-by-subscriber`, events[1]!.id],
    ]);
  });
});
