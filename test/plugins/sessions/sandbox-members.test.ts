/**
 * What one sandbox receive costs on a session's chain of transactions, and that the shortcuts
 * keep what the receive wrote and announced: the phone <-> LID pairs kept in memory once
 * committed (never a pair of a transaction that rolled back; a pair another instance committed is
 * read once), and the message copy written with its sender's contact read (one statement on
 * PostgreSQL; first sight, same and new push names; a rolled-back receive leaves neither), and
 * a receive whose events batch fails (read while the next receive of the group runs, on
 * PostgreSQL) fails alone. Runs on SQLite ("all") and on PostgreSQL ("on postgres").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbHandle } from '../../../core/db.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import type { TestApp } from '../../helpers/app.ts';
import { pgSentBehind } from '../../helpers/postgres.ts';
import { committedView, countStatements, pgStatements } from '../webhooks/helpers.ts';
import { call, eventsOf, lastEventId, sandboxSession, type SessionInfo, startMessagingApp, type Tenant, tenant } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let svc: Sessions;
let s: SessionInfo;
/** A connection of its own (another instance, say): it sees only what is committed. */
let outside: DbHandle;
let postgres = false;

beforeAll(async () => {
  app = await startMessagingApp();
  t = await tenant(app);
  svc = app.running.services.sessions as Sessions;
  s = await sandboxSession(app, t.pat, { name: 'Members' });
  postgres = app.running.config.core.database.engine === 'postgres';
  outside = await committedView(app);
});
afterAll(async () => {
  await outside?.close();
  await app?.close();
});

/** Every statement the app sends (SQLite: each one executed; PostgreSQL: each query of a pg client), until `restore`. */
function statements(): { texts: () => string[]; restore(): void } {
  if (postgres) {
    const { texts, restore } = pgStatements();
    return { texts: () => texts, restore };
  }
  const { executed, restore } = countStatements(app);
  return { texts: () => executed.map((e) => e.sql), restore };
}

let numbers = 0;
/** A phone number no test has used yet. */
const freshPhone = () => `+1628${String(Date.now() % 1e6).padStart(6, '0')}${String(numbers++ % 10)}`;
const digits = (phone: string) => phone.replace(/\D/g, '');
const lidRows = (phone: string) => outside.all<{ lid: string }>('SELECT lid FROM sessions_sandbox_lids WHERE pn = ?', [digits(phone)]);
const lidReads = (texts: readonly string[]) => texts.filter((sql) => /FROM sessions_sandbox_lids/.test(sql));

async function receiveFrom(phone: string, text: string, pushName?: string) {
  const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: phone, text, ...(pushName ? { pushName } : {}) });
  expect(res.status).toBe(200);
  return res.body.data.key as { id: string; remoteJid: string };
}

describe('the phone <-> LID pairs kept in memory', () => {
  it('a pair read inside a transaction that rolled back is not kept: the number is minted again, and stored, afterwards', async () => {
    const phone = freshPhone();
    const session = (await svc.get(s.id))!;
    const network = svc.network(session)!;
    let minted: string | null = null;
    await expect(
      svc.transaction(async () => {
        minted = await network.lidFromPn!(session, phone);
        // Read back inside the transaction: its own row, not committed.
        expect(await network.lidFromPn!(session, phone)).toBe(minted);
        expect(await network.pnFromLid!(session, minted!)).toBe(`${digits(phone)}@s.whatsapp.net`);
        throw new Error('rolled back');
      }, [s.id]),
    ).rejects.toThrow('rolled back');
    expect(minted).toMatch(/^\d+@lid$/);
    expect(await lidRows(phone)).toEqual([]);
    // Neither direction answers from memory: the LID is unknown, the number is minted (and stored) again.
    expect(await network.pnFromLid!(session, minted!)).toBeNull();
    expect(await network.lidFromPn!(session, phone)).toBe(minted);
    expect(await lidRows(phone)).toEqual([{ lid: minted!.replace('@lid', '') }]);
  });

  it('a committed pair is read once, then answered from memory: receives from a known number read no LID rows', async () => {
    const phone = freshPhone();
    // Written by another instance: this one has never seen the number.
    const lid = `1${String(Date.now()).slice(-10).padStart(14, '7')}`;
    await outside.run('INSERT INTO sessions_sandbox_lids (pn, lid) VALUES (?, ?)', [digits(phone), lid]);
    const counting = statements();
    let first: string[];
    let later: string[];
    try {
      expect((await receiveFrom(phone, 'first')).remoteJid).toBe(`${lid}@lid`);
      first = lidReads(counting.texts());
      const before = counting.texts().length;
      for (let i = 0; i < 3; i++) expect((await receiveFrom(phone, `again ${i}`)).remoteJid).toBe(`${lid}@lid`);
      later = lidReads(counting.texts().slice(before));
    } finally {
      counting.restore();
    }
    // The first receive reads it inside its transaction (for the key, and for the new contact's entry): kept from its commit on.
    expect(first.length).toBeGreaterThan(0);
    expect(later).toEqual([]);
  });
});

describe("a receive's message copy and its sender's contact", () => {
  it('are written and read together (one statement on PostgreSQL): contacts.upsert at first sight, nothing for the same push name, contacts.update for a new one', async () => {
    const phone = freshPhone();
    const from = await lastEventId(app, s.id);
    const counting = statements();
    let texts: string[];
    try {
      await receiveFrom(phone, 'one', 'Ann');
      await receiveFrom(phone, 'two', 'Ann');
      await receiveFrom(phone, 'three', 'Annie');
    } finally {
      texts = counting.texts();
      counting.restore();
    }
    const events = (await eventsOf(app, s.id, from)).map((e) => e.event);
    expect(events).toEqual([
      'contacts.upsert',
      ...['messages.upsert', 'messages.received', 'messages-personal'],
      ...['messages.upsert', 'messages.received', 'messages-personal'],
      'contacts.update',
      ...['messages.upsert', 'messages.received', 'messages-personal'],
    ]);
    const contact = await outside.one<{ notify: string }>('SELECT notify FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?', [
      s.id,
      `${digits(phone)}@s.whatsapp.net`,
    ]);
    expect(contact?.notify).toBe('Annie');
    const copies = await outside.value<number>("SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND remote_key LIKE '%' || ? || '%'", [
      s.id,
      digits(phone),
    ]);
    expect(copies).toBe(3);
    const inserts = texts.filter((sql) => /INSERT INTO sessions_sandbox_messages/.test(sql));
    const contactReads = texts.filter((sql) => /SELECT jid, name, notify, blocked FROM sessions_sandbox_contacts/.test(sql));
    expect(inserts).toHaveLength(3);
    // On PostgreSQL each contact read is the insert's own statement; on SQLite (no round trips) one of its own.
    expect(contactReads).toHaveLength(3);
    expect(contactReads.filter((sql) => inserts.includes(sql))).toHaveLength(postgres ? 3 : 0);
  });

  it('a receive rolled back after its copy was written leaves no copy, no contact and no event', async () => {
    const phone = freshPhone();
    const from = await lastEventId(app, s.id);
    const off = svc.onEvent((event) => {
      if (JSON.stringify(event.payload).includes('refuse me')) throw new Error('refused by a subscriber');
    });
    try {
      const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: phone, text: 'refuse me', pushName: 'Bea' });
      expect(res.status).toBe(500);
    } finally {
      off();
    }
    expect(await outside.value<number>("SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message LIKE '%refuse me%'", [s.id])).toBe(0);
    expect(
      await outside.value<number>('SELECT COUNT(*) FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?', [s.id, `${digits(phone)}@s.whatsapp.net`]),
    ).toBe(0);
    expect(await eventsOf(app, s.id, from)).toEqual([]);
    // The next receive from the number is its first sight.
    await receiveFrom(phone, 'accepted', 'Bea');
    expect((await eventsOf(app, s.id, from)).map((e) => e.event)).toEqual(['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-personal']);
  });

  it('concurrent receives (one group on PostgreSQL) from a few numbers: one contacts.upsert per number, each receive its events together and once', async () => {
    const phones = [freshPhone(), freshPhone(), freshPhone()];
    const from = await lastEventId(app, s.id);
    const texts = Array.from({ length: 24 }, (_, i) => `burst ${i}`);
    const results = await Promise.all(
      texts.map((text, i) => call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: phones[i % phones.length], text, pushName: 'Same' })),
    );
    expect(results.map((r) => r.status)).toEqual(texts.map(() => 200));
    const events = await eventsOf(app, s.id, from);
    expect(events.filter((e) => e.event === 'contacts.upsert')).toHaveLength(phones.length);
    expect(events.filter((e) => e.event === 'contacts.update')).toEqual([]);
    const messageEvents = events.filter((e) => e.event !== 'contacts.upsert');
    const textOf = (e: (typeof events)[number]) => (e.payload.data as { message: { conversation: string } }).message.conversation;
    // In threes, each three one receive's (upsert, received, personal), every text once.
    const triples = [];
    for (let i = 0; i < messageEvents.length; i += 3) triples.push(messageEvents.slice(i, i + 3));
    for (const triple of triples) {
      expect(triple.map((e) => e.event)).toEqual(['messages.upsert', 'messages.received', 'messages-personal']);
      expect(new Set(triple.map(textOf)).size).toBe(1);
    }
    expect(triples.map((triple) => textOf(triple[0]!)).sort()).toEqual([...texts].sort());
    const copies = await outside.value<number>("SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message LIKE '%burst %'", [s.id]);
    expect(copies).toBe(texts.length);
  });

  it('concurrent receives (one group on PostgreSQL), one of whose events batch is refused by the database: that one fails alone and leaves nothing, the others commit once each', async () => {
    // A row written with each messages.received event (as the webhooks outbox's are): NULL, refused by NOT NULL, for the text "refuse my batch".
    const id = postgres ? 'id BIGSERIAL PRIMARY KEY' : 'id INTEGER PRIMARY KEY AUTOINCREMENT';
    await app.running.data.exec(`CREATE TABLE test_receive_rows (${id}, text TEXT NOT NULL, event_id BIGINT)`);
    const table = { name: 'test_receive_rows', columns: [['text', 'text']], eventId: 'event_id' } as const;
    const off = svc.onEventRow(table, (event) => {
      if (event.event !== 'messages.received' || event.sessionId !== s.id) return undefined;
      const text = (event.payload.data as { message: { conversation: string } }).message.conversation;
      return { values: [text === 'refuse my batch' ? null : text], written: () => {} };
    });
    const from = await lastEventId(app, s.id);
    const announced: string[] = [];
    const unlisten = svc.afterEvent((event) => {
      if (event.sessionId === s.id && event.event === 'messages.received')
        announced.push((event.payload.data as { message: { conversation: string } }).message.conversation);
    });
    const texts = Array.from({ length: 12 }, (_, i) => (i === 5 ? 'refuse my batch' : `batch ${i}`));
    let statuses: number[];
    try {
      const results = await Promise.all(texts.map((text) => call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: freshPhone(), text })));
      statuses = results.map((r) => r.status);
    } finally {
      off();
      unlisten();
    }
    expect(statuses).toEqual(texts.map((text) => (text === 'refuse my batch' ? 500 : 200)));
    const kept = texts.filter((text) => text !== 'refuse my batch');
    const received = (await eventsOf(app, s.id, from)).filter((e) => e.event === 'messages.received');
    const textOf = (e: (typeof received)[number]) => (e.payload.data as { message: { conversation: string } }).message.conversation;
    expect(received.map(textOf).sort()).toEqual([...kept].sort());
    const rows = await outside.all<{ text: string; event_id: number }>('SELECT text, event_id FROM test_receive_rows ORDER BY id');
    expect(rows.map((r) => [r.text, r.event_id])).toEqual(received.map((e) => [textOf(e), e.id]));
    expect(
      await outside.value<number>("SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message LIKE '%refuse my batch%'", [s.id]),
    ).toBe(0);
    expect(await outside.value<number>("SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message LIKE '%batch %'", [s.id])).toBe(
      kept.length,
    );
    expect([...announced].sort()).toEqual([...kept].sort());
  });
});

describe('a sender whose contact this instance has read', () => {
  const eventsBatch = (texts: readonly string[]) => texts.filter((sql) => /INSERT INTO sessions_events/.test(sql));
  const copyInserts = (texts: readonly string[]) => texts.filter((sql) => /INSERT INTO sessions_sandbox_messages/.test(sql));
  const copiesOf = (text: string) =>
    outside.value<number>('SELECT COUNT(*) FROM sessions_sandbox_messages WHERE session_id = ? AND message = ?', [
      s.id,
      JSON.stringify({ conversation: text }),
    ]);

  it('on PostgreSQL sends its events batch without waiting for its copy and contact read once it has read that contact as the text leaves it; not before', async () => {
    const phones = Array.from({ length: 6 }, freshPhone);
    /** Six receives at once, one from each number (groups on PostgreSQL: the first member of each reads the session, the others share it). */
    const burst = async (label: string) => {
      const results = await Promise.all(
        phones.map((phone, i) => call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: phone, text: `${label} ${i}`, pushName: 'Cat' })),
      );
      expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    };
    const behind: string[][] = [];
    for (const label of ['first sight', 'read', 'known']) {
      const watched = postgres ? pgSentBehind() : undefined;
      try {
        await burst(label);
      } finally {
        watched?.restore();
      }
      behind.push(eventsBatch(watched?.texts ?? []));
    }
    if (postgres) {
      // Each batch of the first two bursts waited for its receive's read; some of the third's did not.
      expect(behind[0]).toEqual([]);
      expect(behind[1]).toEqual([]);
      expect(behind[2]!.length).toBeGreaterThan(0);
    }
    const from = await lastEventId(app, s.id);
    await receiveFrom(phones[0]!, 'known once more', 'Cat');
    expect((await eventsOf(app, s.id, from)).map((e) => e.event)).toEqual(['messages.upsert', 'messages.received', 'messages-personal']);
    for (const label of ['first sight', 'read', 'known']) for (let i = 0; i < 6; i++) expect(await copiesOf(`${label} ${i}`)).toBe(1);
    expect(await copiesOf('known once more')).toBe(1);
  });

  it('whose contact another instance changed or deleted since: the receive runs again, waiting for the read, and records what it finds (once), beside others of its group', async () => {
    const phone = freshPhone();
    const other = freshPhone();
    const jid = `${digits(phone)}@s.whatsapp.net`;
    for (const [number, name] of [
      [phone, 'Dan'],
      [other, 'Eve'],
    ] as const) {
      await receiveFrom(number, `meet ${name}`, name);
      await receiveFrom(number, `read ${name}`, name);
    }
    // Another instance renames the contact: this one's read says "Dan".
    await outside.run('UPDATE sessions_sandbox_contacts SET notify = ? WHERE session_id = ? AND jid = ?', ['Daniel', s.id, jid]);
    let from = await lastEventId(app, s.id);
    const counting = statements();
    let texts: string[];
    try {
      const results = await Promise.all([
        call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: other, text: 'beside 1', pushName: 'Eve' }),
        call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: phone, text: 'after the rename', pushName: 'Dan' }),
        call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: other, text: 'beside 2', pushName: 'Eve' }),
      ]);
      expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    } finally {
      texts = counting.texts();
      counting.restore();
    }
    const events = await eventsOf(app, s.id, from);
    expect(events.filter((e) => e.event.startsWith('contacts.')).map((e) => [e.event, (e.payload.data as { notify: string }[])[0]!.notify])).toEqual([
      ['contacts.update', 'Dan'],
    ]);
    expect(events.filter((e) => e.event === 'messages.received')).toHaveLength(3);
    for (const text of ['beside 1', 'after the rename', 'beside 2']) expect(await copiesOf(text)).toBe(1);
    expect(await outside.value<string>('SELECT notify FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?', [s.id, jid])).toBe('Dan');
    // On PostgreSQL the renamed sender's copy went twice (the first attempt's rolled back, with those
    // run after it in its group), on SQLite once each.
    expect(copyInserts(texts).length).toBeGreaterThanOrEqual(postgres ? 4 : 3);
    if (!postgres) expect(copyInserts(texts)).toHaveLength(3);

    // Deleted by another instance: the receive finds no contact and adds it again.
    await outside.run('DELETE FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?', [s.id, jid]);
    from = await lastEventId(app, s.id);
    await receiveFrom(phone, 'after the deletion', 'Dan');
    expect((await eventsOf(app, s.id, from)).map((e) => e.event)).toEqual(['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-personal']);
    expect(await copiesOf('after the deletion')).toBe(1);
  });
});
