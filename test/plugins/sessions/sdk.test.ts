/**
 * Compatibility proof: WasenderAPI's own TypeScript SDK (npm `wasenderapi`, unmodified) drives a
 * Wharf server by changing only its base URL to `<server>/api`. It picks the PAT for
 * `/whatsapp-sessions...` paths and the session key for everything else, as it does against
 * WasenderAPI. The session-key tests run on sandbox sessions and on whatsapp sessions connected
 * through the fake WhatsApp network (Baileys' socket replaced, test/helpers/fake-whatsapp.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Boom } from '@hapi/boom';
import { createWasender, WasenderAPIError } from 'wasenderapi';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../helpers/fake-whatsapp.ts';
import { eventsOf, startMessagingApp, type Tenant, tenant, until } from './helpers.ts';
import { testNetworks, textOf } from './test-networks.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const network = (fake.network = new FakeWhatsApp());
const networks = testNetworks(network);

let app: TestApp;
let t: Tenant;
let base: string;
/** A public image a send names by URL (the whatsapp session fetches it: private addresses allowed here). */
let imageServer: http.Server;
let imageUrl: string;
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' + '1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082',
  'hex',
);

beforeAll(async () => {
  app = await startMessagingApp(`[plugins.sessions]\nallow_private_networks = true\n${networks[1]!.toml}`);
  t = await tenant(app);
  base = `${app.url}/api`;
  imageServer = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(PNG);
  });
  await new Promise<void>((resolve) => imageServer.listen(0, '127.0.0.1', resolve));
  imageUrl = `http://127.0.0.1:${(imageServer.address() as AddressInfo).port}/cat.png`;
});
afterAll(async () => {
  await app?.close();
  imageServer?.close();
});

async function apiError(promise: Promise<unknown>): Promise<WasenderAPIError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof WasenderAPIError) return err;
    throw err;
  }
  throw new Error('expected a WasenderAPIError');
}

describe('the wasenderapi SDK against Wharf', () => {
  it('manages sessions with a personal access token', async () => {
    const admin = createWasender(undefined, t.pat, base);
    const created = await admin.createWhatsAppSession({
      name: 'From the SDK',
      phone_number: '+14155550142',
      account_protection: false,
      log_messages: true,
      webhook_events: ['messages-personal.received'],
    });
    const session = created.response.data;
    expect(session).toMatchObject({
      id: expect.any(Number),
      name: 'From the SDK',
      phone_number: '+14155550142',
      status: 'disconnected',
      webhook_events: ['messages-personal'],
    });

    const all = await admin.getAllWhatsAppSessions();
    expect(all.response.data.map((s) => s.id)).toContain(session.id);
    const details = await admin.getWhatsAppSessionDetails(session.id);
    expect(details.response.data).toMatchObject({ id: session.id, api_key: expect.stringMatching(/^wsk_/) });

    const updated = await admin.updateWhatsAppSession(session.id, {
      name: 'Renamed by SDK',
      webhook_enabled: true,
      webhook_url: 'https://hooks.example.com/sdk',
    });
    expect(updated.response.data).toMatchObject({ name: 'Renamed by SDK', webhook_enabled: true });

    // Connecting starts pairing: need_scan with the QR code, which the QR route serves too.
    const connect = await admin.connectWhatsAppSession(session.id, true);
    expect(connect.response.data).toMatchObject({ status: 'need_scan', qrCode: expect.stringMatching(/^2@/) });
    const qr = await admin.getWhatsAppSessionQRCode(session.id);
    expect(qr.response.data).toMatchObject({ qrCode: (connect.response.data as { qrCode: string }).qrCode });
    expect((await admin.disconnectWhatsAppSession(session.id)).response.data).toMatchObject({ status: 'disconnected' });
    // Not pairing any more: the QR route's 409 reaches the SDK's caller with its reason.
    const noQr = await apiError(admin.getWhatsAppSessionQRCode(session.id));
    expect(noQr.statusCode).toBe(409);
    expect(noQr.message).toMatch(/is not pairing/);

    const regenerated = await admin.regenerateApiKey(session.id);
    expect(regenerated.response).toStrictEqual({ success: true, api_key: expect.stringMatching(/^wsk_/) });

    expect((await admin.deleteWhatsAppSession(session.id)).response).toStrictEqual({ success: true, data: null });
    const gone = await apiError(admin.getWhatsAppSessionDetails(session.id));
    expect(gone.statusCode).toBe(404);
    expect(gone.message).toMatch(/: Session not found$/);
  });
});

describe.each(networks)('the wasenderapi SDK on $name sessions', (net) => {
  it('connects and disconnects a session', async () => {
    const s = await net.session(app, t.pat);
    const admin = createWasender(undefined, t.pat, base);
    expect((await admin.connectWhatsAppSession(s.id)).response.data).toMatchObject({ status: 'connected' });
    // A sandbox session is always connected; a whatsapp one disconnects (and keeps its pairing).
    expect((await admin.disconnectWhatsAppSession(s.id)).response.data).toMatchObject({ status: net.name === 'sandbox' ? 'connected' : 'disconnected' });
    expect((await admin.connectWhatsAppSession(s.id)).response.data).toMatchObject({ status: 'connected' });
  });

  it('sends, reads message info, edits and deletes with a session API key', async () => {
    const alice = await net.session(app, t.pat, { name: 'Alice' });
    const bob = await net.session(app, t.pat, { name: 'Bob' });
    const sdk = createWasender(alice.apiKey, undefined, base);

    expect((await sdk.getSessionStatus()).response).toStrictEqual({ status: 'connected' });

    const sent = await sdk.sendText({ to: bob.phone, text: 'Hello from the SDK' });
    const { msgId, status } = (sent.response as unknown as { data: { msgId: number; status: string } }).data;
    expect(status).toEqual(net.sentStatus);
    await net.settled(app, alice, msgId, 'delivered');
    // Bob's receipt and Alice's delivery status are two sessions' events, recorded by two
    // connections in no fixed order (on PostgreSQL each commit is its own round trip): poll.
    const receivedTexts = async () =>
      (await eventsOf(app, bob.id))
        .filter((e) => e.event === 'messages.received')
        .map((e) => textOf((e.payload.data as { message: Record<string, unknown> }).message));
    await expect.poll(receivedTexts).toEqual(['Hello from the SDK']);

    const info = await sdk.getMessageInfo(msgId);
    expect(info.response.data).toMatchObject({ msgId, status: 3 });
    expect(textOf(info.response.data.message as Record<string, unknown>)).toBe('Hello from the SDK');

    await sdk.sendImage({ to: bob.phone, imageUrl, text: 'cat' });
    await sdk.sendLocation({ to: bob.phone, location: { latitude: '48.8584', longitude: '2.2945', name: 'Tour Eiffel' } });
    await sdk.sendContact({ to: bob.phone, contact: { name: 'Carol', phone: '+14155550111' } });
    await sdk.sendQuotedMessage({ to: bob.phone, text: 'replying', replyTo: msgId });

    expect((await sdk.editMessage(msgId, 'Edited by the SDK')).response).toMatchObject({ success: true });
    expect((await sdk.getMessageInfo(msgId)).response.data.message).toStrictEqual({ conversation: 'Edited by the SDK' });
    expect((await sdk.deleteMessage(msgId)).response).toMatchObject({ success: true });
    expect((await apiError(sdk.getMessageInfo(msgId))).statusCode).toBe(404);
    // Bob got the image, the location, the contact card and the reply.
    await until(async () => (await eventsOf(app, bob.id)).filter((e) => e.event === 'messages.received').length >= 5, 'the other sends received');
    const kinds = (await eventsOf(app, bob.id))
      .filter((e) => e.event === 'messages.received')
      .map((e) => Object.keys((e.payload.data as { message: Record<string, unknown> }).message).find((k) => k !== 'messageContextInfo'));
    expect(kinds.slice(1)).toEqual(['imageMessage', 'locationMessage', 'contactMessage', 'extendedTextMessage']);
  });

  it('reports validation, credential and connection errors with their status and fields', async () => {
    const s = await net.session(app, t.pat);
    const sdk = createWasender(s.apiKey, undefined, base);
    const invalid = await apiError(sdk.sendText({ to: 'not a number', text: 'x' }));
    expect(invalid.statusCode).toBe(422);
    expect(invalid.apiMessage).toBe('The given data was invalid.');
    expect(invalid.errorDetails).toHaveProperty('to');

    const wrongKind = createWasender(t.pat, undefined, base);
    const forbidden = await apiError(wrongKind.sendText({ to: '+14155550100', text: 'x' }));
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.apiMessage).toBe('This operation requires a session API key');

    const patAsKey = createWasender(undefined, s.apiKey, base);
    const needsPat = await apiError(patAsKey.getAllWhatsAppSessions());
    expect(needsPat.statusCode).toBe(403);
    expect(needsPat.apiMessage).toBe('This operation requires a personal access token');

    const unknown = createWasender('wsk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', undefined, base);
    expect((await apiError(unknown.getSessionStatus())).statusCode).toBe(401);

    const protectedSession = await net.session(app, t.pat, { account_protection: true });
    const limited = createWasender(protectedSession.apiKey, undefined, base);
    await limited.sendText({ to: s.phone, text: 'first' });
    const tooFast = await apiError(limited.sendText({ to: s.phone, text: 'second' }));
    expect(tooFast.statusCode).toBe(429);
    expect(tooFast.retryAfter).toBe(5);
  });

  it('uploads (JSON base64), sends the upload, and decrypts what arrived to the same bytes', async () => {
    const alice = await net.session(app, t.pat, { name: 'Alice' });
    const bob = await net.session(app, t.pat, { name: 'Bob' });
    const sdkA = createWasender(alice.apiKey, undefined, base);
    const sdkB = createWasender(bob.apiKey, undefined, base);
    const bytes = Buffer.from('%PDF-1.4 bytes through the SDK\n'.repeat(20));
    const up = await sdkA.uploadMediaFile({ base64: bytes.toString('base64'), mimetype: 'application/pdf' });
    expect(up.response).toMatchObject({ success: true, publicUrl: expect.stringMatching(/\/api\/media\/[A-Za-z0-9_-]+\.pdf$/) });
    await sdkA.sendDocument({ to: bob.phone, documentUrl: up.response.publicUrl, text: 'from the SDK' });
    const event = await until(async () => (await eventsOf(app, bob.id)).filter((e) => e.event === 'messages.received').at(-1), 'the document received');
    // What a webhook handler has in hand: the event's data, passed as it came.
    const decrypted = await sdkB.decryptMediaFile(event.payload.data as object);
    const { publicUrl } = decrypted.response as unknown as { publicUrl: string };
    expect(publicUrl).toMatch(/\/api\/decrypted-media\//);
    expect(Buffer.from(await (await fetch(publicUrl)).arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('presence, on-whatsapp, contacts with block and unblock', async () => {
    const alice = await net.session(app, t.pat, { name: 'Alice' });
    const bob = await net.session(app, t.pat, { name: 'Bob' });
    const sdk = createWasender(alice.apiKey, undefined, base);
    expect((await sdk.sendPresenceUpdate(bob.phone, 'composing', 500)).response).toMatchObject({ success: true });
    expect((await sdk.checkIfOnWhatsapp(bob.phone)).response).toMatchObject({ success: true, data: { exists: true } });

    await createWasender(bob.apiKey, undefined, base).sendText({ to: alice.phone, text: 'hello Alice' });
    await until(async () => (await eventsOf(app, alice.id)).some((e) => e.event === 'messages.received'), 'the text received');
    const contacts = await sdk.getContacts();
    expect(contacts.response.data).toEqual([expect.objectContaining({ id: `${bob.phone.slice(1)}@s.whatsapp.net`, notify: 'Bob' })]);
    const number = bob.phone.slice(1);
    expect((await sdk.getContactInfo(number)).response.data).toMatchObject({ notify: 'Bob', blocked: false });
    expect((await sdk.getContactProfilePicture(number)).response.data).toStrictEqual({ imgUrl: null });
    expect((await sdk.blockContact(number)).response.data).toMatchObject({ message: 'Contact blocked' });
    expect((await sdk.getContactInfo(number)).response.data).toMatchObject({ blocked: true });
    expect((await sdk.unblockContact(number)).response.data).toMatchObject({ message: 'Contact unblocked' });
    expect((await apiError(sdk.getContactInfo('14155550000'))).statusCode).toBe(404);
  });

  it('groups: create, read, change participants and settings, invites, leave', async () => {
    const alice = await net.session(app, t.pat, { name: 'Alice' });
    const bob = await net.session(app, t.pat, { name: 'Bob' });
    const carol = await net.session(app, t.pat, { name: 'Carol' });
    const sdk = createWasender(alice.apiKey, undefined, base);
    const created = await sdk.createGroup('SDK group', [bob.phone]);
    const jid = (created.response as unknown as { data: { id: string } }).data.id;
    expect((await sdk.getGroups()).response.data).toEqual([{ id: jid, name: 'SDK group', imgUrl: null }]);
    expect((await sdk.getGroupMetadata(jid)).response.data).toMatchObject({ id: jid, subject: 'SDK group', size: 2 });
    expect((await sdk.getGroupParticipants(jid)).response.data).toHaveLength(2);
    expect((await sdk.addGroupParticipants(jid, [carol.phone])).response.data).toEqual([
      { id: `${carol.phone.slice(1)}@s.whatsapp.net`, status: 200, message: 'added' },
    ]);
    expect((await sdk.updateGroupParticipants(jid, 'promote', [carol.phone])).response).toMatchObject({ success: true });
    expect((await sdk.removeGroupParticipants(jid, [bob.phone])).response.data).toEqual([
      { id: `${bob.phone.slice(1)}@s.whatsapp.net`, status: 200, message: 'removed' },
    ]);
    expect((await sdk.updateGroupSettings(jid, { subject: 'Renamed', description: 'by the SDK', restrict: true })).response.data).toMatchObject({
      subject: 'Renamed',
      description: 'by the SDK',
    });
    const link = (await sdk.getGroupInviteLink(jid)).response as unknown as { data: { inviteCode: string } };
    expect((await sdk.getGroupProfilePicture(jid)).response).toMatchObject({ success: true, data: { imgUrl: null } });

    const bobSdk = createWasender(bob.apiKey, undefined, base);
    expect((await bobSdk.getGroupInviteInfo(link.data.inviteCode)).response).toMatchObject({ success: true, data: { id: jid, subject: 'Renamed' } });
    expect((await bobSdk.acceptGroupInvite(link.data.inviteCode)).response).toMatchObject({ success: true, data: { groupJid: jid } });
    expect((await bobSdk.leaveGroup(jid)).response).toMatchObject({ success: true });
    const gone = await apiError(bobSdk.getGroupMetadata(jid));
    expect(gone.statusCode).toBe(404);
  });
});
