/**
 * Inbound: recorded event batches (test/plugins/sessions/whatsapp/batches.ts, in the shapes
 * Baileys 7 emits) replayed into a connected whatsapp session, and the events the gateway records
 * for them: messages.received with the key's remoteJid / remoteJidAlt / fromMe and WasenderAPI's
 * senderPn / cleanedSenderPn / senderLid / addressingMode, the chat's filtered view, the session's
 * filters, edits, revokes, reactions, receipts, poll votes, groups, contacts, calls, LID mappings,
 * and media nodes whose bytes survive JSON (decrypt-media gets the same bytes back).
 */
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encryptMedia } from '../../../../plugins/sessions/networks/media-crypto.ts';
import type { WhatsAppNetwork } from '../../../../plugins/sessions/networks/whatsapp/index.ts';
import type { Sessions } from '../../../../plugins/sessions/service.ts';
import type { TestApp } from '../../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../../helpers/fake-whatsapp.ts';
import {
  call,
  connectedWhatsApp,
  eventsOf,
  lastEventId,
  type SessionInfo,
  startMessagingApp,
  statusOf,
  type Tenant,
  tenant,
  until,
  WHATSAPP_TEST_TOML,
} from '../helpers.ts';
import * as batch from './batches.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const network = (fake.network = new FakeWhatsApp());

let app: TestApp;
let t: Tenant;
let s: SessionInfo;
const ada: batch.Party = { digits: '491511234567', lid: '187723456789012', name: 'Ada' };
const bob: batch.Party = { digits: '447700900123', lid: '265432109876543', name: 'Bob' };

beforeAll(async () => {
  app = await startMessagingApp(WHATSAPP_TEST_TOML);
  t = await tenant(app);
  s = await connectedWhatsApp(app, t.pat, network, { name: 'Replay' });
});
afterAll(() => app?.close());

const adapter = () => (app.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;
const socket = () => network.socketOf(s.id)!;

/** Replays a batch and answers the events it recorded, as [name, data]. */
async function replay(events: Parameters<ReturnType<typeof socket>['replay']>[0], session = s): Promise<[string, any][]> {
  const from = await lastEventId(app, session.id);
  network.socketOf(session.id)!.replay(events);
  // The adapter handles a batch in its connection's queue: wait for it.
  await adapter().idle(session.id);
  return (await eventsOf(app, session.id, from)).map((e) => [e.event, e.payload.data]);
}

describe('messages.upsert', () => {
  it('a LID-addressed text: messages.upsert, messages.received and messages-personal, the key with its phone-number side', async () => {
    const upsert = batch.lidText(ada, 'Hello from Ada');
    const events = await replay({ 'messages.upsert': upsert, 'contacts.update': [{ id: `${ada.lid}@lid`, notify: 'Ada' }] });
    const data = {
      key: {
        id: upsert.messages[0]!.key.id,
        remoteJid: `${ada.lid}@lid`,
        remoteJidAlt: `${ada.digits}@s.whatsapp.net`,
        fromMe: false,
        addressingMode: 'lid',
        senderPn: `${ada.digits}@s.whatsapp.net`,
        cleanedSenderPn: ada.digits,
        senderLid: `${ada.lid}@lid`,
      },
      message: {
        conversation: 'Hello from Ada',
        messageContextInfo: {
          deviceListMetadata: { senderKeyHash: 'AQIDBAUGBwgJCg==', senderTimestamp: expect.stringMatching(/^\d+$/), recipientKeyHash: 'CQgHBgUEAwIBAA==' },
          deviceListMetadataVersion: 2,
        },
      },
      pushName: 'Ada',
      messageTimestamp: upsert.messages[0]!.messageTimestamp,
    };
    expect(events).toEqual([
      ['contacts.update', [{ id: `${ada.digits}@s.whatsapp.net`, lid: `${ada.lid}@lid`, notify: 'Ada' }]],
      ['messages.upsert', data],
      ['messages.received', data],
      ['messages-personal', data],
    ]);
    // The pair is kept: the LID lookups answer without asking WhatsApp.
    const calls = network.callsOf(s.id).length;
    expect((await call(app, s.apiKey, 'GET', `/api/pn-from-lid/${ada.lid}@lid`)).body.data).toMatchObject({ phone: `+${ada.digits}` });
    expect((await call(app, s.apiKey, 'GET', `/api/lid-from-pn/+${ada.digits}`)).body.data).toMatchObject({ lid: `${ada.lid}@lid` });
    expect(network.callsOf(s.id).length).toBe(calls);
    // And the sender is a contact, with the name it gave itself.
    expect((await call(app, s.apiKey, 'GET', `/api/contacts/+${ada.digits}`)).body.data).toMatchObject({ id: `${ada.digits}@s.whatsapp.net`, notify: 'Ada' });
  });

  it('a phone-addressed text: remoteJidAlt filled from the mapping kept before, addressingMode pn; 64-bit timestamps as numbers', async () => {
    const upsert = batch.pnText(ada, 'old style');
    const events = await replay({ 'messages.upsert': upsert });
    const received = events.find(([e]) => e === 'messages.received')![1];
    expect(received.key).toEqual({
      id: upsert.messages[0]!.key.id,
      remoteJid: `${ada.digits}@s.whatsapp.net`,
      remoteJidAlt: `${ada.lid}@lid`,
      fromMe: false,
      addressingMode: 'pn',
      senderPn: `${ada.digits}@s.whatsapp.net`,
      cleanedSenderPn: ada.digits,
      senderLid: `${ada.lid}@lid`,
    });
    expect(received.message).toEqual({ extendedTextMessage: { text: 'old style', contextInfo: { expiration: 0 } } });
    expect(typeof received.messageTimestamp).toBe('number');
  });

  it('a group message goes to messages-group with the participant and its phone number; a newsletter post to messages-newsletter', async () => {
    const group = '120363025246125486@g.us';
    const inGroup = await replay({ 'messages.upsert': batch.groupText(bob, group, 'hi group') });
    expect(inGroup.map(([e]) => e)).toEqual(['messages.upsert', 'messages.received', 'messages-group']);
    expect(inGroup[1]![1].key).toMatchObject({
      remoteJid: group,
      participant: `${bob.lid}@lid`,
      participantAlt: `${bob.digits}@s.whatsapp.net`,
      senderPn: `${bob.digits}@s.whatsapp.net`,
      cleanedSenderPn: bob.digits,
      senderLid: `${bob.lid}@lid`,
      addressingMode: 'lid',
    });
    expect(inGroup[1]![1].key.remoteJidAlt).toBeUndefined();
    const post = await replay({ 'messages.upsert': batch.newsletterPost('120363321000000001@newsletter', 'news') });
    expect(post.map(([e]) => e)).toEqual(['messages.upsert', 'messages.received', 'messages-newsletter']);
    expect(post[1]![1].key).toEqual({ id: expect.any(String), remoteJid: '120363321000000001@newsletter', fromMe: false });
    // A status post: messages.received, no view.
    expect((await replay({ 'messages.upsert': batch.statusPost(ada, 'my status') })).map(([e]) => e)).toEqual(['messages.upsert', 'messages.received']);
  });

  it("honours the session's filters and read_incoming_messages", async () => {
    const filtered = await connectedWhatsApp(app, t.pat, network, {
      ignore_groups: true,
      ignore_broadcasts: true,
      ignore_channels: true,
      read_incoming_messages: true,
    });
    expect(await replay({ 'messages.upsert': batch.groupText(bob, '120363025246125486@g.us', 'skipped') }, filtered)).toEqual([]);
    expect(await replay({ 'messages.upsert': batch.newsletterPost('120363321000000001@newsletter', 'skipped') }, filtered)).toEqual([]);
    expect(await replay({ 'messages.upsert': batch.statusPost(ada, 'skipped') }, filtered)).toEqual([]);
    const text = batch.lidText(ada, 'read me');
    expect((await replay({ 'messages.upsert': text }, filtered)).map(([e]) => e)).toEqual(['messages.upsert', 'messages.received', 'messages-personal']);
    // Marked read on WhatsApp with the key as it arrived.
    await until(async () => network.callsOf(filtered.id, 'readMessages').length === 1, 'readMessages');
    expect(network.callsOf(filtered.id, 'readMessages')[0]!.args[0]).toEqual([text.messages[0]!.key]);
  });

  it('a message sent from the phone is messages.upsert only; protocol messages are not messages', async () => {
    const events = await replay({ 'messages.upsert': batch.sentFromPhone(ada, 'from my phone') });
    expect(events).toEqual([
      ['messages.upsert', expect.objectContaining({ key: expect.objectContaining({ fromMe: true }), message: { conversation: 'from my phone' } })],
    ]);
    const protocol = await replay({
      'messages.upsert': {
        type: 'notify',
        messages: [{ key: { remoteJid: `${ada.lid}@lid`, fromMe: false, id: batch.messageId() }, message: { protocolMessage: { type: 0, key: { id: 'X' } } } }],
      },
    });
    expect(protocol).toEqual([]);
  });
});

describe('updates', () => {
  it('edits are messages.update, revokes messages.delete, reactions messages.reaction, each key mapped', async () => {
    const id = batch.messageId();
    await replay({ 'messages.upsert': batch.lidText(ada, 'typo', id) });
    expect(await replay({ 'messages.update': batch.edit(ada, id, 'fixed') })).toEqual([
      [
        'messages.update',
        [
          {
            key: expect.objectContaining({ id, remoteJid: `${ada.lid}@lid`, remoteJidAlt: `${ada.digits}@s.whatsapp.net` }),
            update: { message: { editedMessage: { message: { conversation: 'fixed' } } } },
          },
        ],
      ],
    ]);
    // The stored message is the edited one (what a reply quotes).
    expect(await adapter().findMessage({ id: s.id } as never, id)).toMatchObject({ message: { conversation: 'fixed' } });
    expect(await replay({ 'messages.update': batch.revoke(ada, id) })).toEqual([
      ['messages.delete', { keys: [expect.objectContaining({ id, fromMe: false })] }],
    ]);
    const reacted = await replay({ 'messages.reaction': batch.reaction(ada, { remoteJid: `${ada.lid}@lid`, id, fromMe: false }, '🎉') });
    expect(reacted).toEqual([
      [
        'messages.reaction',
        [
          {
            key: expect.objectContaining({ id }),
            reaction: { text: '🎉', key: expect.objectContaining({ remoteJid: `${ada.lid}@lid` }), senderTimestampMs: expect.stringMatching(/^\d+$/) },
          },
        ],
      ],
    ]);
  });

  it('group changes, history contacts, LID mappings and calls (rejected with auto_reject_calls)', async () => {
    const group = '120363025246125486@g.us';
    const carol: batch.Party = { digits: '14155550199', lid: '301234567890123', name: 'Carol' };
    const changes = await replay(batch.groupChanges(group, ada, carol));
    expect(changes).toHaveLength(2);
    expect(changes).toEqual(
      expect.arrayContaining([
        ['groups.update', [{ id: group, subject: 'Renamed on the phone', author: `${ada.lid}@lid` }]],
        ['group-participants.update', { id: group, author: `${ada.lid}@lid`, action: 'add', participants: [`${carol.digits}@s.whatsapp.net`] }],
      ]),
    );
    const dave: batch.Party = { digits: '14155550177', lid: '309876543210987', name: 'Dave' };
    expect(await replay({ 'messaging-history.set': batch.history([dave]) })).toEqual([]);
    expect((await call(app, s.apiKey, 'GET', `/api/lid-from-pn/+${dave.digits}`)).body.data.lid).toBe(`${dave.lid}@lid`);
    expect((await call(app, s.apiKey, 'GET', '/api/contacts')).body.data).toContainEqual(
      expect.objectContaining({ id: `${dave.digits}@s.whatsapp.net`, lid: `${dave.lid}@lid`, notify: 'Dave' }),
    );
    await replay({ 'lid-mapping.update': { lid: '311111111111111@lid', pn: '14155550166@s.whatsapp.net' } });
    expect((await call(app, s.apiKey, 'GET', '/api/pn-from-lid/311111111111111')).body.data.phone).toBe('+14155550166');

    const rejecting = await connectedWhatsApp(app, t.pat, network, { auto_reject_calls: true });
    const offer = batch.callOffer(ada);
    const events = await replay({ call: offer }, rejecting);
    expect(events).toEqual([
      ['call.received', [expect.objectContaining({ id: offer[0]!.id, from: `${ada.lid}@lid`, status: 'offer', date: expect.any(String) })]],
    ]);
    await until(async () => network.callsOf(rejecting.id, 'rejectCall').length === 1, 'rejectCall');
    expect(network.callsOf(rejecting.id, 'rejectCall')[0]!.args).toEqual([offer[0]!.id, `${ada.lid}@lid`]);
  });
});

describe('chats', () => {
  it('chats.upsert, chats.update and chats.delete pass on JSON-safe, without the messages history sync attaches', async () => {
    const chat = `${ada.lid}@lid`;
    // Separate batches: within one, Baileys' buffer folds a chat's updates into its upsert.
    expect(
      await replay({
        'chats.upsert': [{ id: chat, conversationTimestamp: 1_700_000_000, unreadCount: 1, messages: [{ message: { key: { id: 'H1' } } }] } as never],
      }),
    ).toEqual([['chats.upsert', [{ id: chat, conversationTimestamp: 1_700_000_000, unreadCount: 1 }]]]);
    expect(await replay({ 'chats.update': [{ id: chat, unreadCount: 0, muteEndTime: 1_700_000_001 } as never] })).toEqual([
      ['chats.update', [{ id: chat, unreadCount: 0, muteEndTime: 1_700_000_001 }]],
    ]);
    expect(await replay({ 'chats.delete': ['120363025246125999@g.us'] })).toEqual([['chats.delete', ['120363025246125999@g.us']]]);
  });
});

describe('acks and receipts of sends', () => {
  it('a send stays in_progress (accepted) until the server acks it; receipts move it to delivered and read, as messages.update with its msgId', async () => {
    network.account(`+${bob.digits}`, bob.name);
    const sent = await call(app, s.apiKey, 'POST', '/api/send-message', { to: `+${bob.digits}`, text: 'are you there?' });
    expect(sent.status).toBe(200);
    const { msgId } = sent.body.data;
    // Bob has no socket online: the server acks, nobody delivers.
    await until(async () => (await call(app, s.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data.status === 2, 'sent');
    const info = (await call(app, s.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data;
    expect(info).toMatchObject({ msgId, statusText: 'sent', message: { extendedTextMessage: { text: 'are you there?' } }, key: { fromMe: true } });
    const id = info.key.id;
    const from = await lastEventId(app, s.id);
    socket().replay({ 'messages.update': batch.receipt(bob, id, 3) });
    socket().replay({ 'messages.update': batch.receipt(bob, id, 4) });
    await adapter().idle(s.id);
    expect((await call(app, s.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data).toMatchObject({ status: 4, statusText: 'read' });
    const events = (await eventsOf(app, s.id, from)).map((e) => [e.event, e.payload.data]);
    expect(events.filter(([e]) => e === 'messages.update')).toEqual([
      ['messages.update', [{ key: expect.objectContaining({ id }), update: { status: 'delivered' }, msgId }]],
      ['messages.update', [{ key: expect.objectContaining({ id }), update: { status: 'read' }, msgId }]],
    ]);
    expect(events.filter(([e]) => e === 'message-receipt.update')).toHaveLength(2);
    // A receipt for a message sent from the phone is passed on as it is.
    expect(await replay({ 'messages.update': batch.receipt(bob, batch.messageId(), 3) })).toEqual([
      ['messages.update', [{ key: expect.objectContaining({ fromMe: true }), update: { status: 'delivered' } }]],
    ]);
  });

  it('group read receipts move the message log too; poll votes arrive tallied as poll.results', async () => {
    const poll = await call(app, s.apiKey, 'POST', '/api/send-message', { to: `+${bob.digits}`, poll: { question: 'Lunch?', options: ['Pizza', 'Sushi'] } });
    const { msgId } = poll.body.data;
    const key = await until(async () => {
      const info = (await call(app, s.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data;
      return info.status === 2 && info.key;
    }, 'the poll sent');
    expect(
      await replay({
        'messages.update': batch.pollVotes(key, [
          { voter: ada, options: ['Sushi'] },
          { voter: bob, options: ['Sushi', 'Pizza'] },
        ]),
      }),
    ).toEqual([
      [
        'poll.results',
        {
          key: expect.objectContaining({ id: key.id }),
          pollResult: [
            { name: 'Pizza', voters: [`${bob.lid}@lid`] },
            { name: 'Sushi', voters: [`${ada.lid}@lid`, `${bob.lid}@lid`] },
          ],
        },
      ],
    ]);
    socket().replay({ 'message-receipt.update': batch.groupRead(ada, key.remoteJid, key.id) });
    await adapter().idle(s.id);
    expect((await call(app, s.apiKey, 'GET', `/api/messages/${msgId}/info`)).body.data.statusText).toBe('read');
  });

  it('message info reconciles a send whose answer came before the ack: in_progress (1) until the server acks, then sent (2)', async () => {
    network.holdAcks = true;
    const sent = await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+14155550122', text: 'slow network' });
    expect(sent.body.data).toMatchObject({ status: 'in_progress' });
    const info = (await call(app, s.apiKey, 'GET', `/api/messages/${sent.body.data.msgId}/info`)).body.data;
    expect(info).toMatchObject({ status: 1, statusText: 'in_progress' });
    // The send went out as Baileys built it, under the id the message log knows.
    const [jid, content, options] = network.callsOf(s.id, 'sendMessage').at(-1)!.args as [string, unknown, { messageId: string }];
    expect([jid, content, options.messageId]).toEqual(['14155550122@s.whatsapp.net', { text: 'slow network' }, info.key.id]);
    network.releaseAcks();
    await until(async () => (await call(app, s.apiKey, 'GET', `/api/messages/${sent.body.data.msgId}/info`)).body.data.status === 2, 'acked');
  });

  it('an error ack fails the message (resendable); while the session reconnects a send answers 409 and nothing is logged', async () => {
    network.unreachable.add('14155550111');
    const refused = await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+14155550111', text: 'lost' });
    expect(refused.status).toBe(200);
    await until(async () => (await call(app, s.apiKey, 'GET', `/api/messages/${refused.body.data.msgId}/info`)).body.data.statusText === 'failed', 'failed');
    expect((await call(app, s.apiKey, 'GET', `/api/messages/${refused.body.data.msgId}/info`)).body.data.error).toBe('WhatsApp refused the message');
    network.unreachable.delete('14155550111');
    const resent = await call(app, s.apiKey, 'POST', `/api/messages/${refused.body.data.msgId}/resend`);
    // In progress, or already sent when the (fake) server's ack was recorded before the answer read the status.
    expect(resent.body.data).toMatchObject({ msgId: refused.body.data.msgId, status: expect.stringMatching(/^(in_progress|sent)$/) });
    await until(async () => (await call(app, s.apiKey, 'GET', `/api/messages/${refused.body.data.msgId}/info`)).body.data.statusText === 'sent', 'resent');

    const logged = () => app.running.data.value<number>('SELECT COUNT(*) AS n FROM sessions_messages WHERE session_id = ?', [s.id]);
    const before = await logged();
    network.refuse = 428;
    void socket().end(new Boom('Connection Terminated', { statusCode: 428 }));
    await until(async () => (await statusOf(app, s.id)) === 'connecting', 'reconnecting');
    expect((await call(app, s.apiKey, 'POST', '/api/send-message', { to: '+14155550111', text: 'not now' })).status).toBe(409);
    expect(await logged()).toBe(before);
    network.refuse = undefined;
    await until(async () => (await statusOf(app, s.id)) === 'connected', 'connected again');
  });
});

describe('media', () => {
  it('a received image node keeps its bytes through JSON: decrypt-media with the webhook data answers the exact bytes, re-requesting expired media from the phone', async () => {
    const plain = Buffer.from('\x89PNG\r\n\x1a\n fake image bytes '.repeat(50));
    const enc = encryptMedia(plain, 'image');
    const directPath = `/v/t62.7118-24/${Date.now()}.enc`;
    network.cdn.set(directPath, { bytes: enc.file, expired: false });
    const upsert = batch.image(ada, {
      directPath,
      mediaKey: enc.mediaKey,
      fileSha256: enc.fileSha256,
      fileEncSha256: enc.fileEncSha256,
      fileLength: plain.length,
    });
    const events = await replay({ 'messages.upsert': upsert });
    const data = events.find(([e]) => e === 'messages.received')![1];
    // Bytes as base64 in the JSON, 64-bit numbers as strings: protobuf's JSON form.
    expect(data.message.imageMessage).toMatchObject({ mediaKey: enc.mediaKey.toString('base64'), fileLength: String(plain.length), mimetype: 'image/png' });
    // What a webhook receiver has: the body, parsed.
    const fromWebhook = JSON.parse(JSON.stringify(data));
    const decrypted = await call(app, s.apiKey, 'POST', '/api/decrypt-media', { data: { messages: fromWebhook } });
    expect(decrypted.status, decrypted.text).toBe(200);
    expect(Buffer.from(await (await fetch(decrypted.body.publicUrl)).arrayBuffer()).equals(plain)).toBe(true);

    // Expired on the CDN: the phone is asked to upload it again (with the message's key), then it decrypts.
    network.expireMedia();
    const again = await call(app, s.apiKey, 'POST', '/api/decrypt-media', { data: { messages: fromWebhook } });
    expect(again.status, again.text).toBe(200);
    expect(network.callsOf(s.id, 'updateMediaMessage').at(-1)!.args[0]).toMatchObject({ id: upsert.messages[0]!.key.id, remoteJid: `${ada.lid}@lid` });
    expect(Buffer.from(await (await fetch(again.body.publicUrl)).arrayBuffer()).equals(plain)).toBe(true);
  });

  it('also reads mediaKey from the shapes a careless JSON round trip leaves ({type: Buffer}, an index-keyed object); a wrong key is 422; a foreign host is never fetched', async () => {
    const plain = Buffer.from('document body '.repeat(40));
    const enc = encryptMedia(plain, 'image');
    const directPath = `/v/t62.7118-24/${Date.now()}b.enc`;
    network.cdn.set(directPath, { bytes: enc.file, expired: false });
    const node = (mediaKey: unknown, extra: Record<string, unknown> = {}) => ({
      imageMessage: { url: `https://mmg.whatsapp.net${directPath}`, directPath, mimetype: 'image/png', mediaKey, fileLength: plain.length, ...extra },
    });
    const decrypt = (message: unknown) => call(app, s.apiKey, 'POST', '/api/decrypt-media', { data: { message } });
    const bufferJson = JSON.parse(JSON.stringify(enc.mediaKey));
    expect(bufferJson.type).toBe('Buffer');
    const indexed = JSON.parse(JSON.stringify(new Uint8Array(enc.mediaKey)));
    expect(indexed['0']).toBe(enc.mediaKey[0]);
    for (const shape of [bufferJson, indexed, [...enc.mediaKey]]) {
      const res = await decrypt(node(shape));
      expect(res.status, res.text).toBe(200);
      expect(Buffer.from(await (await fetch(res.body.publicUrl)).arrayBuffer()).equals(plain)).toBe(true);
    }
    const wrong = await decrypt(node(Buffer.alloc(32, 7).toString('base64')));
    expect(wrong.status).toBe(422);
    expect(wrong.body.errors).toHaveProperty('mediaKey');
    // A node naming another host: the download still goes to WhatsApp's media host (and finds the file there).
    const elsewhere = await decrypt(node(enc.mediaKey.toString('base64'), { url: 'https://169.254.169.254/latest/meta-data' }));
    expect(elsewhere.status, elsewhere.text).toBe(200);
    // Without a directPath, a foreign URL is refused outright.
    const foreign = await decrypt({ imageMessage: { url: 'http://127.0.0.1:1/x', mimetype: 'image/png', mediaKey: enc.mediaKey.toString('base64') } });
    expect(foreign.status).toBe(422);
    expect(foreign.body.errors).toHaveProperty('url');
  });
});

describe('bounds', () => {
  it('the message store keeps message_store_limit messages per session (oldest out); the caches stay within cache_size', async () => {
    const count = () => app.running.data.value<number>('SELECT COUNT(*) AS n FROM sessions_whatsapp_messages WHERE session_id = ?', [s.id]);
    const many = Array.from({ length: 120 }, (_, i) => batch.lidText(ada, `n${i}`).messages[0]!);
    socket().replay({ 'messages.upsert': { type: 'append', messages: many } });
    await adapter().idle(s.id);
    expect(await count()).toBeGreaterThanOrEqual(120);
    await adapter().prune(Date.now());
    // The test config keeps the default (5000): nothing pruned yet by count; by age nothing either.
    expect(await count()).toBeGreaterThanOrEqual(120);
    await adapter().store.pruneMessages(100, new Date(0).toISOString());
    expect(await count()).toBe(100);
    expect(await adapter().findMessage({ id: s.id } as never, many[0]!.key.id!)).toBeNull();
    expect(await adapter().findMessage({ id: s.id } as never, many[119]!.key.id!)).toMatchObject({ message: { conversation: 'n119' } });
    const sizes = adapter().connectionOf(s.id)!.cacheSizes();
    for (const size of Object.values(sizes)) expect(size).toBeLessThanOrEqual(1000);
  });
});
