/**
 * The sandbox network end to end through the API: sends between sandbox sessions arrive as
 * inbound messages, receipts move sent -> delivered -> read, sandbox receive in each chat kind,
 * the send variants, edit / delete / react, failures, account protection, and the events
 * recorded with their exact payloads.
 */
import type { Db } from '../../../core/db.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import type { SessionEvent } from '../../../plugins/sessions/types.ts';
import type { TestApp } from '../../helpers/app.ts';
import { call, eventsOf, lastEventId, sandboxSession, type SessionInfo, startMessagingApp, type Tenant, tenant } from './helpers.ts';

let app: TestApp;
let t: Tenant;
let svc: Sessions;

beforeAll(async () => {
  app = await startMessagingApp('[plugins.sessions]\naccount_protection_interval_seconds = 5\n');
  t = await tenant(app);
  svc = app.running.services.sessions as Sessions;
});
afterAll(() => app?.close());

const digits = (phone: string) => phone.replace(/\D/g, '');
const names = (events: SessionEvent[]) => events.map((e) => e.event);

/** Two fresh sandbox sessions and the event ids to read after. */
async function pair(aBody: Record<string, unknown> = {}, bBody: Record<string, unknown> = {}) {
  const a = await sandboxSession(app, t.pat, { name: 'Alice', ...aBody });
  const b = await sandboxSession(app, t.pat, { name: 'Bob', ...bBody });
  return { a, b, aFrom: await lastEventId(app, a.id), bFrom: await lastEventId(app, b.id) };
}

describe('a send between two sandbox sessions', () => {
  it('arrives as an inbound message, LID-addressed, with receipts back to the sender', async () => {
    const { a, b, aFrom, bFrom } = await pair();
    const before = Date.now();
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'Hello Bob' });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ success: true, data: { msgId: expect.any(Number), jid: b.phone, status: 'delivered' } });
    const { msgId } = res.body.data;

    const inbound = await eventsOf(app, b.id, bFrom);
    expect(names(inbound)).toEqual(['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-personal']);
    const received = inbound.find((e) => e.event === 'messages.received')!;
    const lid = (await call(app, a.apiKey, 'GET', '/api/user')).body.data.lid;
    expect(received.payload).toStrictEqual({
      event: 'messages.received',
      sessionId: b.id,
      timestamp: expect.any(Number),
      data: {
        key: {
          id: expect.stringMatching(/^3EB0[0-9A-F]{32}$/),
          remoteJid: lid,
          remoteJidAlt: `${digits(a.phone)}@s.whatsapp.net`,
          fromMe: false,
          senderLid: lid,
          senderPn: `${digits(a.phone)}@s.whatsapp.net`,
          cleanedSenderPn: digits(a.phone),
        },
        message: { conversation: 'Hello Bob' },
        pushName: 'Alice',
        messageTimestamp: expect.any(Number),
      },
    });
    expect(lid).toMatch(/^\d{15}@lid$/);
    expect(received.payload.timestamp).toBeGreaterThanOrEqual(before);
    expect(received.payload.timestamp).toBeLessThanOrEqual(Date.now());
    // The filtered view carries the same data.
    expect(inbound.find((e) => e.event === 'messages-personal')!.payload.data).toStrictEqual(received.payload.data);

    const outbound = await eventsOf(app, a.id, aFrom);
    expect(names(outbound)).toEqual(['messages.upsert', 'message.sent', 'messages.update', 'message-receipt.update']);
    const key = { id: (received.payload.data as { key: { id: string } }).key.id, remoteJid: `${digits(b.phone)}@s.whatsapp.net`, fromMe: true };
    expect(outbound[1]!.payload.data).toStrictEqual({ key, message: { conversation: 'Hello Bob' }, status: 'sent', msgId });
    expect(outbound[2]!.payload.data).toStrictEqual([{ key, update: { status: 'delivered' }, msgId }]);
    expect(outbound[3]!.payload.data).toStrictEqual([
      { key, receipt: { userJid: `${digits(b.phone)}@s.whatsapp.net`, status: 'delivered', t: expect.any(Number) }, msgId },
    ]);

    // The recipient reads it with the key it received: the sender's receipt moves to read.
    const aAfterDelivery = await lastEventId(app, a.id);
    const read = await call(app, b.apiKey, 'POST', '/api/messages/read', { key: (received.payload.data as { key: object }).key });
    expect(read.status).toBe(200);
    expect(names(await eventsOf(app, a.id, aAfterDelivery))).toEqual(['messages.update', 'message-receipt.update']);
    expect((await eventsOf(app, a.id, aAfterDelivery))[0]!.payload.data).toStrictEqual([{ key, update: { status: 'read' }, msgId }]);
    const info = await call(app, a.apiKey, 'GET', `/api/messages/${msgId}/info`);
    expect(info.body).toStrictEqual({
      success: true,
      data: { msgId, key, message: { conversation: 'Hello Bob' }, messageTimestamp: expect.any(Number), status: 4, statusText: 'read', jid: b.phone },
    });
    // Reading again changes nothing.
    const again = await lastEventId(app, a.id);
    await call(app, b.apiKey, 'POST', '/api/messages/read', { key: (received.payload.data as { key: object }).key });
    expect(await eventsOf(app, a.id, again)).toEqual([]);
  });

  it('is read at once when the recipient has read_incoming_messages on', async () => {
    const { a, b, aFrom } = await pair({}, { read_incoming_messages: true });
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'auto-read' });
    expect(res.body.data.status).toBe('read');
    const statuses = (await eventsOf(app, a.id, aFrom))
      .filter((e) => e.event === 'message-receipt.update')
      .map((e) => (e.payload.data as { receipt: { status: string } }[])[0]!.receipt.status);
    expect(statuses).toEqual(['delivered', 'read']);
  });

  it('stays sent when the number is no sandbox session, and never reaches another organization', async () => {
    const other = await tenant(app);
    const foreign = await sandboxSession(app, other.pat, { name: 'Elsewhere' });
    const { a } = await pair();
    const fromForeign = await lastEventId(app, foreign.id);
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: foreign.phone, text: 'hello?' });
    expect(res.body.data.status).toBe('sent');
    expect(await eventsOf(app, foreign.id, fromForeign)).toEqual([]);
  });

  it('does not reach a recipient that blocked the sender', async () => {
    const { a, b, bFrom } = await pair();
    const bSession = (await svc.get(b.id))!;
    await svc.network(bSession)!.setBlocked(bSession, a.phone, true);
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'blocked' });
    expect(res.body.data.status).toBe('sent');
    expect(await eventsOf(app, b.id, bFrom)).toEqual([]);
  });
});

describe('send variants', () => {
  let a: SessionInfo;
  let b: SessionInfo;
  beforeAll(async () => {
    ({ a, b } = await pair());
  });

  async function sendAndReceive(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const from = await lastEventId(app, b.id);
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, ...body });
    expect(res.status, res.text).toBe(200);
    const received = (await eventsOf(app, b.id, from)).find((e) => e.event === 'messages.received');
    return (received!.payload.data as { message: Record<string, unknown> }).message;
  }

  it.each([
    [
      { imageUrl: 'https://cdn.example.com/a/cat.png', text: 'a cat' },
      { imageMessage: { url: 'https://cdn.example.com/a/cat.png', mimetype: 'image/png', caption: 'a cat' } },
    ],
    [{ videoUrl: 'https://cdn.example.com/v.mp4' }, { videoMessage: { url: 'https://cdn.example.com/v.mp4', mimetype: 'video/mp4' } }],
    [
      { documentUrl: 'https://cdn.example.com/files/report.pdf', fileName: 'Q3.pdf', text: 'the report' },
      { documentMessage: { url: 'https://cdn.example.com/files/report.pdf', mimetype: 'application/pdf', fileName: 'Q3.pdf', caption: 'the report' } },
    ],
    [
      { documentUrl: 'https://cdn.example.com/files/report.pdf' },
      { documentMessage: { url: 'https://cdn.example.com/files/report.pdf', mimetype: 'application/pdf', fileName: 'report.pdf' } },
    ],
    [
      { audioUrl: 'https://cdn.example.com/voice.ogg' },
      { audioMessage: { url: 'https://cdn.example.com/voice.ogg', mimetype: 'audio/ogg; codecs=opus', ptt: true } },
    ],
    [{ stickerUrl: 'https://cdn.example.com/s.webp' }, { stickerMessage: { url: 'https://cdn.example.com/s.webp', mimetype: 'image/webp' } }],
    [
      { contact: { name: 'Carol', phone: '+14155550111' } },
      { contactMessage: { displayName: 'Carol', vcard: 'BEGIN:VCARD\nVERSION:3.0\nFN:Carol\nTEL;type=CELL;waid=14155550111:+14155550111\nEND:VCARD' } },
    ],
    [
      { location: { latitude: '52.52', longitude: 13.405, name: 'Berlin', address: 'Mitte' } },
      { locationMessage: { degreesLatitude: 52.52, degreesLongitude: 13.405, name: 'Berlin', address: 'Mitte' } },
    ],
    [
      { poll: { question: 'Lunch?', options: ['Pizza', 'Salad'], multiSelect: true } },
      { pollCreationMessage: { name: 'Lunch?', options: [{ optionName: 'Pizza' }, { optionName: 'Salad' }], selectableOptionsCount: 0 } },
    ],
    [
      { imageUrl: 'https://cdn.example.com/once.jpg', viewOnce: true },
      { viewOnceMessageV2: { message: { imageMessage: { url: 'https://cdn.example.com/once.jpg', mimetype: 'image/jpeg', viewOnce: true } } } },
    ],
    [
      { text: 'hi @14155550111', mentions: ['+14155550111'] },
      { extendedTextMessage: { text: 'hi @14155550111', contextInfo: { mentionedJid: ['14155550111@s.whatsapp.net'] } } },
    ],
  ])('%j', async (body, node) => {
    expect(await sendAndReceive(body)).toStrictEqual(node);
  });

  it('replies to a message by its msgId', async () => {
    const first = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'question' });
    const info = await call(app, a.apiKey, 'GET', `/api/messages/${first.body.data.msgId}/info`);
    const node = await sendAndReceive({ text: 'answer', replyTo: first.body.data.msgId });
    expect(node).toStrictEqual({
      extendedTextMessage: {
        text: 'answer',
        contextInfo: { stanzaId: info.body.data.key.id, participant: info.body.data.key.remoteJid, quotedMessage: { conversation: 'question' } },
      },
    });
  });

  it('refuses a reply to a deleted message with 422, leaving nothing in the message log', async () => {
    const first = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'soon gone' });
    expect((await call(app, a.apiKey, 'DELETE', `/api/messages/${first.body.data.msgId}`)).status).toBe(200);
    const before = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs`)).body.data.total;
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'answer', replyTo: first.body.data.msgId });
    expect(res).toMatchObject({ status: 422, body: { errors: { replyTo: [`no message ${first.body.data.msgId} in this session`] } } });
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs`)).body.data.total).toBe(before);
  });

  it('sends to groups and channels by JID', async () => {
    for (const to of ['120363000000000001@g.us', '120363000000000002@newsletter']) {
      const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to, text: 'broadcast' });
      expect(res.body).toStrictEqual({ success: true, data: { msgId: expect.any(Number), jid: to, status: 'sent' } });
    }
  });

  it.each([
    [{ to: '+1555', text: 'x' }, { to: ['to: must be a phone number in E.164 format, a group JID (…@g.us) or a channel JID (…@newsletter)'] }],
    [{ to: '+14155550100' }, { text: ['text: is required when no media, contact, location or poll is given'] }],
    [{ to: '+14155550100', text: 5 }, { text: ['text must be a string'] }],
    [{ to: '+14155550100', text: 'x', colour: 'red' }, { colour: ['unknown field colour'] }],
    [{ to: '+14155550100', imageUrl: 'file:///etc/passwd' }, { imageUrl: ['imageUrl: must be an http or https URL'] }],
    [
      { to: '+14155550100', imageUrl: 'https://x.test/a.png', videoUrl: 'https://x.test/a.mp4' },
      { videoUrl: ['videoUrl: cannot be combined with imageUrl: one message carries one kind of content'] },
    ],
    [{ to: '+14155550100', stickerUrl: 'https://x.test/a.webp', text: 'no' }, { text: ['text: cannot be combined with stickerUrl (no caption)'] }],
    [{ to: '+14155550100', text: 'x', fileName: 'a.pdf' }, { fileName: ['fileName: only goes with documentUrl'] }],
    [{ to: '+14155550100', text: 'x', viewOnce: true }, { viewOnce: ['viewOnce: only goes with imageUrl, videoUrl or audioUrl'] }],
    [{ to: '+14155550100', location: { latitude: 91, longitude: 0 } }, { 'location.latitude': ['location.latitude: must be between -90 and 90'] }],
    [{ to: '+14155550100', poll: { question: 'q', options: ['only one'] } }, { 'poll.options': [expect.stringMatching(/^poll\.options: /)] }],
    [{ to: '+14155550100', text: 'x', mentions: ['nobody'] }, { 'mentions.0': ['mentions.0: must be a phone number or a phone JID'] }],
    [{ to: '+14155550100', text: 'x', replyTo: 999999 }, { replyTo: ['no message 999999 in this session'] }],
  ])('refuses %j with 422 naming the field', async (body, errors) => {
    const before = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs`)).body.data.total;
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', body);
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({ success: false, message: 'The given data was invalid.', errors });
    expect((await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/message-logs`)).body.data.total).toBe(before);
  });

  it('answers malformed JSON with 400 in the messaging envelope', async () => {
    const res = await app.request('POST', '/api/send-message', {
      raw: '{"to": ',
      headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toStrictEqual({ success: false, message: expect.stringMatching(/^Malformed JSON body/) });
  });
});

describe('POST /api/sandbox/receive', () => {
  it.each([
    ['personal', {}, ['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-personal']],
    ['group', { groupJid: '120363111111111111@g.us' }, ['contacts.upsert', 'messages.upsert', 'messages.received', 'messages-group']],
    ['newsletter', {}, ['messages.upsert', 'messages.received', 'messages-newsletter']],
  ] as const)('delivers a %s message', async (chat, extra, events) => {
    const s = await sandboxSession(app, t.pat, { name: 'Receiver' });
    const from = await lastEventId(app, s.id);
    const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: `in ${chat}`, pushName: 'Dana', chat, ...extra });
    expect(res.status).toBe(200);
    const key = res.body.data.key;
    const recorded = await eventsOf(app, s.id, from);
    expect(names(recorded)).toEqual(events);
    const received = recorded.find((e) => e.event === 'messages.received')!;
    expect(received.payload.data).toStrictEqual({ key, message: { conversation: `in ${chat}` }, pushName: 'Dana', messageTimestamp: expect.any(Number) });
    if (chat === 'personal') {
      expect(key).toMatchObject({ remoteJid: expect.stringMatching(/^\d{15}@lid$/), remoteJidAlt: '14155550100@s.whatsapp.net', fromMe: false });
    } else if (chat === 'group') {
      expect(key).toMatchObject({
        remoteJid: '120363111111111111@g.us',
        participant: expect.stringMatching(/@lid$/),
        participantAlt: '14155550100@s.whatsapp.net',
        fromMe: false,
      });
    } else {
      expect(key).toStrictEqual({ id: expect.any(String), remoteJid: expect.stringMatching(/^120363\d{12}@newsletter$/), fromMe: false });
    }
  });

  it('gives a number the same LID every time, and maps it back', async () => {
    const s = await sandboxSession(app, t.pat);
    const one = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+447700900123', text: 'one' });
    const two = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+44 7700 900123', text: 'two' });
    expect(one.body.data.key.remoteJid).toBe(two.body.data.key.remoteJid);
    const session = (await svc.get(s.id))!;
    expect(await svc.network(session)!.pnFromLid(session, one.body.data.key.remoteJid)).toBe('447700900123@s.whatsapp.net');
  });

  it('drops what the session ignores (groups, channels) but still answers the key', async () => {
    const s = await sandboxSession(app, t.pat, { ignore_groups: true, ignore_channels: true });
    const from = await lastEventId(app, s.id);
    for (const chat of ['group', 'newsletter']) {
      const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'x', chat });
      expect(res.status).toBe(200);
    }
    expect(names(await eventsOf(app, s.id, from)).filter((n) => n.startsWith('messages'))).toEqual([]);
  });

  it('lets the session react to and read what it received', async () => {
    const s = await sandboxSession(app, t.pat);
    const { key } = (await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'react to me' })).body.data;
    const from = await lastEventId(app, s.id);
    const react = await call(app, s.apiKey, 'POST', '/api/messages/react', { key, reaction: '❤️' });
    expect(react.body).toStrictEqual({ success: true, data: { key: expect.objectContaining({ fromMe: true }), reaction: '❤️', target: key } });
    expect((await eventsOf(app, s.id, from)).map((e) => [e.event, e.payload.data])).toEqual([
      ['messages.reaction', [{ key, reaction: { text: '❤️', key: react.body.data.key, senderTimestampMs: expect.any(String) } }]],
    ]);
    expect((await call(app, s.apiKey, 'POST', '/api/messages/read', { key })).status).toBe(200);
    const unknown = await call(app, s.apiKey, 'POST', '/api/messages/read', { key: { ...key, id: 'NOPE' } });
    expect(unknown).toMatchObject({ status: 404, body: { success: false, error: 'Message not found', message: 'Message not found' } });
  });

  it.each([
    [{ text: 'x' }, { from: ['from is required'] }],
    [{ from: 'abc', text: 'x' }, { from: ['from: must be a phone number in E.164 format, for example +14155550123'] }],
    [{ from: '+14155550100', text: 'x', chat: 'broadcast' }, { chat: [expect.stringMatching(/^chat: /)] }],
    [{ from: '+14155550100', text: 'x', groupJid: '120363111111111111@g.us' }, { groupJid: ['groupJid: only goes with chat "group"'] }],
    [{ from: '+14155550100', text: 'x', chat: 'group', groupJid: 'family' }, { groupJid: ['groupJid: must be a group JID such as 120363012345678901@g.us'] }],
    [{ from: '+14155550100', text: 'x', extra: 1 }, { extra: ['unknown field extra'] }],
  ])('refuses %j with 422', async (body, errors) => {
    const s = await sandboxSession(app, t.pat);
    const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', body);
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({ success: false, message: 'The given data was invalid.', errors });
  });
});

describe('edit, delete, react on sent messages', () => {
  it('edits and deletes for both sides, reacts by msgId', async () => {
    const { a, b } = await pair();
    const sent = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'typo' });
    const { msgId } = sent.body.data;
    const aFrom = await lastEventId(app, a.id);
    const bFrom = await lastEventId(app, b.id);

    const edit = await call(app, a.apiKey, 'PUT', `/api/messages/${msgId}`, { text: 'fixed' });
    expect(edit.body).toStrictEqual({ success: true, data: { msgId, jid: b.phone, status: 'delivered' } });
    const edited = { message: { editedMessage: { message: { conversation: 'fixed' } } } };
    expect((await eventsOf(app, a.id, aFrom)).map((e) => [e.event, (e.payload.data as { update: unknown }[])[0]!.update])).toEqual([
      ['messages.update', edited],
    ]);
    expect((await eventsOf(app, b.id, bFrom)).map((e) => [e.event, (e.payload.data as { update: unknown }[])[0]!.update])).toEqual([
      ['messages.update', edited],
    ]);
    expect((await call(app, a.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data.message).toStrictEqual({ conversation: 'fixed' });

    const react = await call(app, a.apiKey, 'POST', '/api/messages/react', { msgId, reaction: '👍' });
    expect(react.status).toBe(200);
    const bReaction = (await eventsOf(app, b.id, bFrom)).at(-1)!;
    expect(bReaction.event).toBe('messages.reaction');
    expect((bReaction.payload.data as { reaction: { text: string; key: { fromMe: boolean } } }[])[0]!.reaction).toMatchObject({
      text: '👍',
      key: { fromMe: false },
    });

    const del = await call(app, a.apiKey, 'DELETE', `/api/messages/${msgId}`);
    expect(del.body).toStrictEqual({ success: true, data: { msgId } });
    expect((await eventsOf(app, a.id, aFrom)).at(-1)!.event).toBe('messages.delete');
    expect((await eventsOf(app, b.id, bFrom)).at(-1)!.event).toBe('messages.delete');
    expect((await call(app, a.apiKey, 'GET', `/api/messages/${msgId}/info`)).status).toBe(404);
    expect((await call(app, a.apiKey, 'DELETE', `/api/messages/${msgId}`)).status).toBe(404);
  });

  it('refuses to edit a non-text message, and another session cannot see a message', async () => {
    const { a, b } = await pair();
    const sent = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, imageUrl: 'https://cdn.example.com/x.jpg' });
    const edit = await call(app, a.apiKey, 'PUT', `/api/messages/${sent.body.data.msgId}`, { text: 'no' });
    expect(edit).toMatchObject({ status: 422, body: { errors: { msgId: ['only text messages can be edited'] } } });
    for (const [method, path] of [
      ['GET', `/api/messages/${sent.body.data.msgId}/info`],
      ['GET', '/api/messages/abc/info'],
      ['DELETE', `/api/messages/${sent.body.data.msgId}`],
    ] as const) {
      const res = await call(app, b.apiKey, method, path);
      expect(res.status).toBe(404);
      expect(res.body).toStrictEqual({ success: false, error: 'Message not found', message: 'Message not found' });
    }
  });
});

describe('failures and limits', () => {
  it('+998 numbers simulate an outage: 503 with Retry-After, logged as failed', async () => {
    const s = await sandboxSession(app, t.pat);
    const res = await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+99855512345', text: 'x' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.body).toStrictEqual({
      success: false,
      error: `The sandbox network is briefly unavailable (+998 numbers simulate an outage); nothing was sent (request id ${res.headers.get('x-request-id')})`,
      message: `The sandbox network is briefly unavailable (+998 numbers simulate an outage); nothing was sent (request id ${res.headers.get('x-request-id')})`,
    });
    const logs = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/message-logs?status=failed`);
    expect(logs.body.data.data).toMatchObject([{ status: 'failed', to: '+99855512345' }]);
  });

  it('+999 numbers are unreachable: the message fails and can be resent', async () => {
    const s = await sandboxSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const res = await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+99912345678', text: 'x' });
    expect(res.body).toStrictEqual({ success: true, data: { msgId: expect.any(Number), jid: '+99912345678', status: 'failed' } });
    expect((await eventsOf(app, s.id, from)).map((e) => [e.event, e.payload.data])).toEqual([
      ['messages.update', [{ key: expect.objectContaining({ fromMe: true }), update: { status: 'error' }, msgId: res.body.data.msgId }]],
    ]);
    const info = await call(app, s.apiKey, 'GET', `/api/messages/${res.body.data.msgId}/info`);
    expect(info.body.data).toMatchObject({ status: 0, statusText: 'failed', error: expect.stringContaining('unreachable') });
    const resend = await call(app, s.apiKey, 'POST', `/api/messages/${res.body.data.msgId}/resend`);
    expect(resend.body.data.status).toBe('failed');
    const logs = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/message-logs`);
    expect(logs.body.data.data[0]).toMatchObject({ id: res.body.data.msgId, attempts: 2, content: { to: '+99912345678', text: 'x' } });
  });

  it('resends only failed messages whose content was logged', async () => {
    const quiet = await sandboxSession(app, t.pat, { log_messages: false });
    const peer = await sandboxSession(app, t.pat);
    const ok = await call(app, quiet.apiKey, 'POST', '/api/send-message', { to: peer.phone, text: 'fine' });
    expect(await call(app, quiet.apiKey, 'POST', `/api/messages/${ok.body.data.msgId}/resend`)).toMatchObject({
      status: 422,
      body: { errors: { msgId: [`only failed messages can be resent (message ${ok.body.data.msgId} is delivered)`] } },
    });
    const lost = await call(app, quiet.apiKey, 'POST', '/api/send-message', { to: '+99912345678', text: 'secret' });
    expect(await call(app, quiet.apiKey, 'POST', `/api/messages/${lost.body.data.msgId}/resend`)).toMatchObject({
      status: 422,
      body: { errors: { msgId: [`message ${lost.body.data.msgId} cannot be resent: its content was not logged (log_messages is off)`] } },
    });
    const info = await call(app, quiet.apiKey, 'GET', `/api/messages/${ok.body.data.msgId}/info`);
    expect(info.body.data).toMatchObject({ message: null, status: 3 });
  });

  it('account protection allows one send per interval: 429 {message, retry_after} with Retry-After', async () => {
    const { a, b } = await pair({ account_protection: true });
    expect((await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'one' })).status).toBe(200);
    const second = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'two' });
    expect(second.status).toBe(429);
    expect(second.body).toStrictEqual({ message: 'Account protection is on for this session: one message every 5 seconds', retry_after: 5 });
    expect(second.headers.get('retry-after')).toBe('5');
    // Other sessions are not affected.
    expect((await call(app, b.apiKey, 'POST', '/api/send-message', { to: a.phone, text: 'free' })).status).toBe(200);
  });
});

describe('events', () => {
  it('subscribers run inside the recording transaction, listeners after the commit', async () => {
    const s = await sandboxSession(app, t.pat);
    const seen: string[] = [];
    // Inside: the row is there for the recording transaction's `tx`. After: it is committed, seen from outside it.
    const visible = (db: Db, id: number) => db.value<number>('SELECT COUNT(*) FROM sessions_events WHERE id = ?', [id]);
    const offInside = svc.onEvent(async (event, tx) => {
      seen.push(`in:${event.event}:${await visible(tx, event.id)}`);
      // The event carries the session as the transaction read it.
      expect(event.session).toMatchObject({ id: s.id, orgId: t.orgId, type: 'sandbox', status: 'connected' });
    });
    const after: Promise<string>[] = [];
    const offAfter = svc.afterEvent((event) => after.push(visible(app.running.data, event.id).then((n) => `after:${event.event}:${n}`)));
    try {
      await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'x' });
    } finally {
      offInside();
      offAfter();
    }
    seen.push(...(await Promise.all(after)));
    expect(seen).toEqual([
      'in:contacts.upsert:1',
      'in:messages.upsert:1',
      'in:messages.received:1',
      'in:messages-personal:1',
      'after:contacts.upsert:1',
      'after:messages.upsert:1',
      'after:messages.received:1',
      'after:messages-personal:1',
    ]);
  });

  it('a failing subscriber rolls the whole operation back: no event, no half-recorded message', async () => {
    const s = await sandboxSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const off = svc.onEvent(() => {
      throw new Error('outbox full');
    });
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: 'x' });
    } finally {
      off();
    }
    expect(res.status).toBe(500);
    expect(await eventsOf(app, s.id, from)).toEqual([]);
    const session = (await svc.get(s.id))!;
    expect(await svc.network(session)!.contacts(session)).toEqual([]);
  });

  it('an event carries the session with what a deliverer needs; webhookSecret gives the secret decrypted', async () => {
    const s = await sandboxSession(app, t.pat, {
      webhook_url: 'https://hooks.example.com/in',
      webhook_enabled: true,
      webhook_events: ['messages-personal.received'],
    });
    const event = await svc.emit(s.id, 'contacts.update', [{ id: 'x' }]);
    expect(event.session).toMatchObject({
      id: s.id,
      orgId: t.orgId,
      webhookUrl: 'https://hooks.example.com/in',
      webhookEnabled: true,
      webhookEvents: ['messages-personal'],
      webhookSigning: 'secret',
    });
    expect(event.session).not.toHaveProperty('webhookSecret');
    expect(await svc.webhookSecret(s.id)).toBe(s.body.webhook_secret);
    expect(await svc.webhookSecret(999_999)).toBeUndefined();
  });
});

describe('the sandbox network behind the adapter interface', () => {
  it('groups: created with members, a send to the group reaches them, participants change', async () => {
    const { a, b, bFrom } = await pair();
    const c = await sandboxSession(app, t.pat, { name: 'Carol' });
    const net = svc.network((await svc.get(a.id))!)!;
    const group = await net.createGroup((await svc.get(a.id))!, 'Team', [b.phone]);
    expect(group).toMatchObject({
      subject: 'Team',
      size: 2,
      owner: `${digits(a.phone)}@s.whatsapp.net`,
      participants: [{ admin: 'superadmin' }, { admin: null }],
    });
    expect((await eventsOf(app, b.id, bFrom)).map((e) => e.event)).toEqual(['groups.upsert']);
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: group.id, text: 'hi team' });
    expect(res.body.data.status).toBe('delivered');
    const got = (await eventsOf(app, b.id, bFrom)).filter((e) => e.event === 'messages-group');
    expect(got).toHaveLength(1);
    expect((got[0]!.payload.data as { key: object }).key).toMatchObject({
      remoteJid: group.id,
      participantAlt: `${digits(a.phone)}@s.whatsapp.net`,
      fromMe: false,
    });

    const outsider = await call(app, c.apiKey, 'POST', '/api/send-message', { to: group.id, text: 'let me in' });
    expect(outsider).toMatchObject({ status: 404, body: { success: false, error: 'Group not found', message: 'Group not found' } });
    const bSession = (await svc.get(b.id))!;
    expect(await net.updateParticipants(bSession, group.id, 'add', [c.phone])).toEqual([
      { id: `${digits(c.phone)}@s.whatsapp.net`, status: 403, message: 'not-authorized' },
    ]);
    expect(await net.updateParticipants((await svc.get(a.id))!, group.id, 'add', [c.phone])).toEqual([
      { id: `${digits(c.phone)}@s.whatsapp.net`, status: 200, message: 'added' },
    ]);
    const code = await net.groupInviteCode((await svc.get(a.id))!, group.id);
    await expect(net.groupInviteCode(bSession, group.id)).rejects.toMatchObject({ status: 422 });
    expect((await net.groupInviteInfo(bSession, code)).id).toBe(group.id);
    await net.updateGroupSettings((await svc.get(a.id))!, group.id, { announce: true });
    const muted = await call(app, c.apiKey, 'POST', '/api/send-message', { to: group.id, text: 'may I?' });
    expect(muted).toMatchObject({ status: 422, body: { errors: { to: ['only admins can send to this group (announce is on)'] } } });
    await net.leaveGroup(bSession, group.id);
    await expect(net.groupMetadata(bSession, group.id)).rejects.toMatchObject({ status: 404 });
    expect((await net.groups((await svc.get(c.id))!)).map((g) => g.id)).toEqual([group.id]);
  });

  it('contacts: upsert, lookups', async () => {
    const s = await sandboxSession(app, t.pat);
    const session = (await svc.get(s.id))!;
    const net = svc.network(session)!;
    const contact = await net.upsertContact(session, { jid: '+14155550177', fullName: 'Erin' });
    expect(contact).toMatchObject({ id: '14155550177@s.whatsapp.net', name: 'Erin', lid: expect.stringMatching(/@lid$/), blocked: false });
    expect(await net.contact(session, '14155550177@s.whatsapp.net')).toStrictEqual(contact);
    expect(await net.lidFromPn(session, '+14155550177')).toBe(contact.lid);
    expect(await net.onWhatsApp(session, '+14155550177')).toStrictEqual({ exists: true, jid: '14155550177@s.whatsapp.net', lid: contact.lid });
    await expect(net.onWhatsApp(session, 'nope')).rejects.toMatchObject({ status: 422 });
  });

  it('media: an uploaded file sent by URL arrives encrypted as WhatsApp encrypts it, and decrypts', async () => {
    const { a, b, bFrom } = await pair();
    const aSession = (await svc.get(a.id))!;
    const net = svc.network(aSession)!;
    const bytes = Buffer.from('%PDF-1.4 sandbox bytes '.repeat(50));
    const { id } = await net.uploadMedia(aSession, { bytes, mimetype: 'application/pdf', fileName: 'contract.pdf' });
    expect(await net.uploadedMedia(aSession, id)).toStrictEqual({ bytes, mimetype: 'application/pdf', fileName: 'contract.pdf' });
    const res = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, documentUrl: `${app.url}/media/${id}` });
    expect(res.status).toBe(200);
    const received = (await eventsOf(app, b.id, bFrom)).find((e) => e.event === 'messages.received')!;
    const message = (received.payload.data as { message: { documentMessage: Record<string, unknown> } }).message;
    expect(message.documentMessage).toMatchObject({
      mimetype: 'application/pdf',
      fileName: 'contract.pdf',
      fileLength: bytes.length,
      mediaKey: expect.any(String),
      directPath: expect.stringMatching(/^\/sandbox-cdn\//),
    });
    const bSession = (await svc.get(b.id))!;
    expect(await net.decryptMedia(bSession, message)).toStrictEqual({ bytes, mimetype: 'application/pdf', fileName: 'contract.pdf' });
    const tampered = { documentMessage: { ...message.documentMessage, mediaKey: Buffer.alloc(32, 1).toString('base64') } };
    await expect(net.decryptMedia(bSession, tampered)).rejects.toMatchObject({ status: 422 });
    await expect(net.decryptMedia(bSession, { conversation: 'no media' })).rejects.toMatchObject({ status: 422 });
  });
});
