/**
 * Operations 21-45 end to end through the API on the sandbox network: upload real bytes and send
 * them to another sandbox session, decrypt what arrived and download the same bytes; the group
 * lifecycle with its participants and events; contacts (saving, reading, blocking drops the
 * blocked sender's messages); presence; the number lookups; and the bad input each must refuse.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { call, eventsOf, lastEventId, sandboxSession, type SessionInfo, startMessagingApp, type Tenant, tenant, whatsappSession } from './helpers.ts';

const UPLOAD_LIMIT = 64 * 1024;

let app: TestApp;
let t: Tenant;

beforeAll(async () => {
  app = await startMessagingApp(`[plugins.sessions]\nupload_max_bytes = ${UPLOAD_LIMIT}\n`);
  t = await tenant(app);
});
afterAll(() => app?.close());

const digits = (phone: string) => phone.replace(/\D/g, '');
const pn = (phone: string) => `${digits(phone)}@s.whatsapp.net`;

/** A raw POST with a body of bytes. */
async function raw(key: string | undefined, path: string, bytes: Uint8Array | string, headers: Record<string, string> = {}) {
  const res = await app.fetch(path, { method: 'POST', headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers }, body: bytes });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** GET of a public URL the server handed out: status, headers, bytes. */
async function download(url: string) {
  expect(url.startsWith(app.url)).toBe(true);
  const res = await fetch(url);
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

async function received(session: SessionInfo, after: number) {
  return (await eventsOf(app, session.id, after)).filter((e) => e.event === 'messages.received');
}

// A small PNG: the signature, then filler. The sandbox keeps bytes as they are.
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('wharf png bytes '.repeat(40))]);
const PDF = Buffer.from('%PDF-1.4\n% real bytes for the sandbox\n'.repeat(100));

describe('upload, send, decrypt-media', () => {
  it('a raw upload, sent as a document to another sandbox session, decrypts there to the same bytes', async () => {
    const a = await sandboxSession(app, t.pat, { name: 'Alice' });
    const b = await sandboxSession(app, t.pat, { name: 'Bob' });
    const up = await raw(a.apiKey, '/api/upload?fileName=contract%20%C3%A9t%C3%A9.pdf', PDF, { 'content-type': 'application/pdf' });
    expect(up.status, up.text).toBe(200);
    expect(up.body).toStrictEqual({
      success: true,
      publicUrl: expect.stringMatching(new RegExp(`^${app.url}/api/media/[A-Za-z0-9_-]{24}\\.pdf$`)),
      data: {
        id: expect.any(String),
        publicUrl: up.body.publicUrl,
        mimetype: 'application/pdf',
        size: PDF.length,
        fileName: 'contract été.pdf',
        expiresAt: expect.any(String),
      },
    });
    const hours = (Date.parse(up.body.data.expiresAt) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);

    // The public URL needs no credential and serves the bytes, safely.
    const got = await download(up.body.publicUrl);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(PDF)).toBe(true);
    expect(got.headers.get('content-type')).toBe('application/pdf');
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename="contract _t_.pdf"; filename*=UTF-8''contract%20%C3%A9t%C3%A9.pdf`);
    expect(got.headers.get('x-content-type-options')).toBe('nosniff');
    expect(got.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");

    const bFrom = await lastEventId(app, b.id);
    const sent = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, documentUrl: up.body.publicUrl, text: 'the contract' });
    expect(sent.body.data.status).toBe('delivered');
    const [event] = await received(b, bFrom);
    const data = event!.payload.data as { key: Record<string, unknown>; message: { documentMessage: Record<string, unknown> }; pushName: string };
    expect(data.message.documentMessage).toMatchObject({
      mimetype: 'application/pdf',
      fileName: 'contract été.pdf',
      fileLength: PDF.length,
      caption: 'the contract',
    });
    expect(data.message.documentMessage.url).not.toBe(up.body.publicUrl);

    // WasenderAPI's documented body: {data: {messages: {key, message}}}.
    const dec = await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: { messages: { key: { id: data.key.id }, message: data.message } } });
    expect(dec.status, dec.text).toBe(200);
    expect(dec.body).toStrictEqual({
      success: true,
      publicUrl: expect.stringMatching(new RegExp(`^${app.url}/api/decrypted-media/[A-Za-z0-9_-]{43}$`)),
      data: { publicUrl: dec.body.publicUrl, mimetype: 'application/pdf', size: PDF.length, fileName: 'contract été.pdf', expiresAt: expect.any(String) },
    });
    const minutes = (Date.parse(dec.body.data.expiresAt) - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(59);
    expect(minutes).toBeLessThanOrEqual(60);
    const plain = await download(dec.body.publicUrl);
    expect(plain.status).toBe(200);
    expect(plain.bytes.equals(PDF)).toBe(true);
    expect(plain.headers.get('content-type')).toBe('application/pdf');

    // A webhook's data passed as it came ({key, message, pushName, ...}) works too.
    const again = await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data });
    expect(again.status).toBe(200);
    expect(again.body.publicUrl).not.toBe(dec.body.publicUrl);
    expect((await download(again.body.publicUrl)).bytes.equals(PDF)).toBe(true);
  });

  it('a JSON {base64} upload (data URL) sent as an image decrypts to the same bytes and is served inline', async () => {
    const a = await sandboxSession(app, t.pat, { name: 'Alice' });
    const b = await sandboxSession(app, t.pat, { name: 'Bob' });
    const up = await call(app, a.apiKey, 'POST', '/api/upload', { base64: `data:image/png;base64,${PNG.toString('base64')}` });
    expect(up.status, up.text).toBe(200);
    expect(up.body.publicUrl).toMatch(/\.png$/);
    expect(up.body.data).toMatchObject({ mimetype: 'image/png', size: PNG.length, fileName: null });
    const bFrom = await lastEventId(app, b.id);
    await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, imageUrl: up.body.publicUrl, text: 'look' });
    const message = ((await received(b, bFrom))[0]!.payload.data as { message: Record<string, unknown> }).message;
    expect(message.imageMessage).toMatchObject({ mimetype: 'image/png', caption: 'look', mediaKey: expect.any(String) });
    const dec = await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: { messages: [{ key: {}, message }] } });
    const plain = await download(dec.body.publicUrl);
    expect(plain.bytes.equals(PNG)).toBe(true);
    expect(plain.headers.get('content-type')).toBe('image/png');
    expect(plain.headers.get('content-disposition')).toBe('inline');

    // mimetype beside plain base64; it overrides a data URL's.
    const plainB64 = await call(app, a.apiKey, 'POST', '/api/upload', { base64: PNG.toString('base64'), mimetype: 'image/png', fileName: 'x.png' });
    expect(plainB64.body.data).toMatchObject({ mimetype: 'image/png', size: PNG.length, fileName: 'x.png' });
    const overridden = await call(app, a.apiKey, 'POST', '/api/upload', { base64: `data:image/jpeg;base64,${PNG.toString('base64')}`, mimetype: 'image/png' });
    expect(overridden.body.data.mimetype).toBe('image/png');
  });

  it('a multipart/form-data upload (field "file") works, and HTML is never served inline', async () => {
    const a = await sandboxSession(app, t.pat);
    const form = new FormData();
    form.append('file', new Blob(['<script>alert(1)</script>'], { type: 'text/html' }), 'page.html');
    const res = await app.fetch('/api/upload', { method: 'POST', headers: { authorization: `Bearer ${a.apiKey}` }, body: form });
    const body = (await res.json()) as any;
    expect(res.status).toBe(200);
    expect(body.data).toMatchObject({ mimetype: 'text/html', fileName: 'page.html', size: 25 });
    const got = await download(body.publicUrl);
    expect(got.bytes.toString()).toBe('<script>alert(1)</script>');
    expect(got.headers.get('content-disposition')).toBe('attachment; filename="page.html"');
    expect(got.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
  });

  it('refuses bad uploads with 422, 413 beyond upload_max_bytes, 401 before reading a body', async () => {
    const a = await sandboxSession(app, t.pat);
    const k = a.apiKey;
    const fields = (r: { body: any }) => r.body.errors;
    expect(await raw(k, '/api/upload', Buffer.from('bytes'))).toMatchObject({ status: 422, body: { success: false, message: 'The given data was invalid.' } });
    expect(fields(await raw(k, '/api/upload', PDF, { 'content-type': 'not a type' }))).toHaveProperty('Content-Type');
    expect(fields(await raw(k, '/api/upload', '', { 'content-type': 'image/png' }))).toHaveProperty('file');
    expect(fields(await call(app, k, 'POST', '/api/upload', { mimetype: 'image/png' }))).toStrictEqual({
      base64: ['base64 is required for a JSON upload (or send the file itself as the body, with its Content-Type)'],
    });
    expect(fields(await call(app, k, 'POST', '/api/upload', { base64: 'not base64!', mimetype: 'image/png' }))).toHaveProperty('base64');
    expect(fields(await call(app, k, 'POST', '/api/upload', { base64: PNG.toString('base64') }))).toHaveProperty('mimetype');
    expect(fields(await call(app, k, 'POST', '/api/upload', { base64: 42 }))).toStrictEqual({ base64: ['base64 must be a string'] });
    expect(fields(await call(app, k, 'POST', '/api/upload', { base64: 'AAAA', mimetype: 'image/png', extra: 1 }))).toStrictEqual({
      extra: ['unknown field extra'],
    });
    const noFile = new FormData();
    noFile.append('note', 'no file here');
    const multi = await app.fetch('/api/upload', { method: 'POST', headers: { authorization: `Bearer ${k}` }, body: noFile });
    expect(multi.status).toBe(422);
    expect(((await multi.json()) as any).errors).toHaveProperty('file');

    const big = Buffer.alloc(UPLOAD_LIMIT + 1, 7);
    const tooBig = await raw(k, '/api/upload', big, { 'content-type': 'application/octet-stream' });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toStrictEqual({ success: false, message: `The file is larger than the upload limit of ${UPLOAD_LIMIT} bytes` });
    const tooBigJson = await call(app, k, 'POST', '/api/upload', { base64: big.toString('base64'), mimetype: 'application/pdf' });
    expect(tooBigJson.status).toBe(413);
    expect((await raw(k, '/api/upload', Buffer.alloc(UPLOAD_LIMIT, 7), { 'content-type': 'application/octet-stream' })).status).toBe(200);

    expect(await raw(undefined, '/api/upload', big, { 'content-type': 'application/octet-stream' })).toMatchObject({
      status: 401,
      body: { success: false, message: 'Authentication required' },
    });
    expect(await raw(t.pat, '/api/upload', big, { 'content-type': 'application/octet-stream' })).toMatchObject({
      status: 403,
      body: { success: false, message: 'This operation requires a session API key' },
    });
  });

  it('decrypt-media refuses a node without media, a wrong key, unknown media; public URLs expire', async () => {
    const a = await sandboxSession(app, t.pat);
    const b = await sandboxSession(app, t.pat);
    const up = await raw(a.apiKey, '/api/upload', PDF, { 'content-type': 'application/pdf' });
    const bFrom = await lastEventId(app, b.id);
    await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, documentUrl: up.body.publicUrl });
    const message = ((await received(b, bFrom))[0]!.payload.data as { message: { documentMessage: Record<string, unknown> } }).message;

    const noMedia = await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: { messages: { key: { id: 'x' }, message: { conversation: 'hi' } } } });
    expect(noMedia.status).toBe(422);
    expect(noMedia.body.errors).toStrictEqual({
      'data.messages.message': ['the message has no imageMessage, videoMessage, audioMessage, documentMessage or stickerMessage'],
    });
    const wrongKey = await call(app, b.apiKey, 'POST', '/api/decrypt-media', {
      data: { message: { documentMessage: { ...message.documentMessage, mediaKey: Buffer.alloc(32, 1).toString('base64') } } },
    });
    expect(wrongKey).toMatchObject({ status: 422, body: { errors: { mediaKey: ['mediaKey does not decrypt this media'] } } });
    const unknown = await call(app, b.apiKey, 'POST', '/api/decrypt-media', {
      data: { message: { imageMessage: { url: 'https://mmg.whatsapp.net/x.enc', mediaKey: 'AAAA' } } },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({
      success: false,
      error: expect.stringMatching(/^Media not found/),
      message: expect.stringMatching(/^Media not found/),
    });
    expect((await call(app, b.apiKey, 'POST', '/api/decrypt-media', {})).body.errors).toStrictEqual({ data: ['data is required'] });
    expect((await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: {} })).body.errors).toHaveProperty('data.messages');
    expect((await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: { messages: 'x' } })).status).toBe(422);

    // Expired or unknown ids answer 404 in the messaging envelope.
    const dec = await call(app, b.apiKey, 'POST', '/api/decrypt-media', { data: { message } });
    await app.running.data.run("UPDATE sessions_media SET expires_at = '2000-01-01T00:00:00.000Z'");
    for (const url of [dec.body.publicUrl, up.body.publicUrl, `${app.url}/api/decrypted-media/${'A'.repeat(43)}`, `${app.url}/api/media/nope`]) {
      const res = await app.request('GET', url.slice(app.url.length));
      expect(res.status, url).toBe(404);
      expect(res.body).toStrictEqual({ success: false, error: 'Media not found or expired', message: 'Media not found or expired' });
    }
  });

  it('media of a deleted session is gone with it', async () => {
    const a = await sandboxSession(app, t.pat);
    const up = await raw(a.apiKey, '/api/upload', PDF, { 'content-type': 'application/pdf' });
    expect((await download(up.body.publicUrl)).status).toBe(200);
    await call(app, t.pat, 'DELETE', `/api/whatsapp-sessions/${a.id}`);
    expect((await download(up.body.publicUrl)).status).toBe(404);
  });
});

describe('groups', () => {
  it('lifecycle: create, members and events, admins, settings, invites, leave', async () => {
    const a = await sandboxSession(app, t.pat, { name: 'Alice' });
    const b = await sandboxSession(app, t.pat, { name: 'Bob' });
    const c = await sandboxSession(app, t.pat, { name: 'Carol' });
    const d = await sandboxSession(app, t.pat, { name: 'Dan' });
    const from = { a: await lastEventId(app, a.id), b: await lastEventId(app, b.id), c: await lastEventId(app, c.id), d: await lastEventId(app, d.id) };

    const created = await call(app, a.apiKey, 'POST', '/api/groups', { name: 'Crew', participants: [b.phone] });
    expect(created.status, created.text).toBe(201);
    const jid: string = created.body.data.id;
    expect(created.body).toStrictEqual({
      success: true,
      data: {
        id: expect.stringMatching(/^120363\d{12}@g\.us$/),
        subject: 'Crew',
        desc: null,
        owner: pn(a.phone),
        creation: expect.any(Number),
        announce: false,
        restrict: false,
        size: 2,
        participants: [
          { id: pn(a.phone), lid: expect.stringMatching(/@lid$/), admin: 'superadmin', isAdmin: true, isSuperAdmin: true },
          { id: pn(b.phone), lid: expect.stringMatching(/@lid$/), admin: null, isAdmin: false, isSuperAdmin: false },
        ],
      },
    });
    for (const s of [a, b]) {
      const upserts = (await eventsOf(app, s.id, from[s === a ? 'a' : 'b'])).filter((e) => e.event === 'groups.upsert');
      expect(upserts.map((e) => e.payload.data)).toEqual([[expect.objectContaining({ id: jid, subject: 'Crew', size: 2 })]]);
    }
    expect(await eventsOf(app, c.id, from.c)).toEqual([]);

    expect((await call(app, b.apiKey, 'GET', '/api/groups')).body).toStrictEqual({ success: true, data: [{ id: jid, name: 'Crew', imgUrl: null }] });
    expect((await call(app, b.apiKey, 'GET', `/api/groups/${encodeURIComponent(jid)}/metadata`)).body.data.id).toBe(jid);
    expect((await call(app, b.apiKey, 'GET', `/api/groups/${jid}/participants`)).body.data.map((p: { id: string }) => p.id)).toEqual([
      pn(a.phone),
      pn(b.phone),
    ]);
    expect(await call(app, c.apiKey, 'GET', `/api/groups/${jid}/metadata`)).toMatchObject({
      status: 404,
      body: { success: false, error: 'Group not found', message: 'Group not found' },
    });
    expect((await call(app, c.apiKey, 'GET', '/api/groups')).body.data).toEqual([]);

    // A non-admin's participant changes are refused per participant, as WhatsApp answers them.
    expect((await call(app, b.apiKey, 'POST', `/api/groups/${jid}/participants/add`, { participants: [c.phone] })).body).toStrictEqual({
      success: true,
      data: [{ id: pn(c.phone), status: 403, message: 'not-authorized' }],
    });
    const fromAdd = { a: await lastEventId(app, a.id), b: await lastEventId(app, b.id) };
    const added = await call(app, a.apiKey, 'POST', `/api/groups/${jid}/participants/add`, { participants: [c.phone, b.phone] });
    expect(added.body.data).toEqual([
      { id: pn(c.phone), status: 200, message: 'added' },
      { id: pn(b.phone), status: 409, message: 'already a participant' },
    ]);
    for (const s of [a, b, c]) {
      const after = s === a ? fromAdd.a : s === b ? fromAdd.b : from.c;
      expect((await eventsOf(app, s.id, after)).map((e) => [e.event, e.payload.data])).toEqual([
        ['group-participants.update', { id: jid, participants: [pn(c.phone)], action: 'add' }],
      ]);
    }

    const promoted = await call(app, a.apiKey, 'PUT', `/api/groups/${jid}/participants/update`, { action: 'promote', participants: [b.phone] });
    expect(promoted.body.data).toEqual([{ id: pn(b.phone), status: 200, message: 'promoted' }]);
    expect((await call(app, a.apiKey, 'GET', `/api/groups/${jid}/participants`)).body.data[1]).toMatchObject({
      id: pn(b.phone),
      admin: 'admin',
      isAdmin: true,
    });

    const fromSettings = await lastEventId(app, c.id);
    const settings = await call(app, b.apiKey, 'PUT', `/api/groups/${jid}/settings`, { subject: 'Crew 2', description: 'ship it', announce: true });
    expect(settings.body).toStrictEqual({ success: true, data: { subject: 'Crew 2', description: 'ship it', announce: true, restrict: false } });
    expect((await eventsOf(app, c.id, fromSettings)).map((e) => [e.event, e.payload.data])).toEqual([
      ['groups.update', [{ id: jid, subject: 'Crew 2', description: 'ship it', announce: true }]],
    ]);
    // announce: only admins send; Carol is not one.
    expect((await call(app, c.apiKey, 'POST', '/api/send-message', { to: jid, text: 'me too?' })).status).toBe(422);
    expect((await call(app, b.apiKey, 'POST', '/api/send-message', { to: jid, text: 'admins only' })).body.data.status).toBe('delivered');
    expect(await call(app, c.apiKey, 'PUT', `/api/groups/${jid}/settings`, { restrict: true })).toMatchObject({
      status: 422,
      body: { errors: { settings: ['only group admins can change these settings'] } },
    });

    // Invites: admins read the link; anyone in the organization can look the code up and join.
    expect((await call(app, c.apiKey, 'GET', `/api/groups/${jid}/invite-link`)).status).toBe(422);
    const link = await call(app, a.apiKey, 'GET', `/api/groups/${jid}/invite-link`);
    expect(link.body.data).toStrictEqual({
      inviteCode: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      inviteLink: `https://chat.whatsapp.com/${link.body.data.inviteCode}`,
    });
    const info = await call(app, d.apiKey, 'GET', `/api/groups/invite/${link.body.data.inviteCode}`);
    expect(info.body).toStrictEqual({
      success: true,
      data: { id: jid, subject: 'Crew 2', desc: 'ship it', owner: pn(a.phone), creation: expect.any(Number), announce: true, restrict: false, size: 3 },
    });
    const fromJoin = await lastEventId(app, a.id);
    const joined = await call(app, d.apiKey, 'POST', '/api/groups/invite/accept', { code: link.body.data.inviteLink });
    expect(joined.body).toStrictEqual({ success: true, data: { groupJid: jid } });
    expect((await eventsOf(app, a.id, fromJoin)).map((e) => [e.event, e.payload.data])).toEqual([
      ['group-participants.update', { id: jid, participants: [pn(d.phone)], action: 'add' }],
    ]);
    expect((await call(app, d.apiKey, 'GET', `/api/groups/${jid}/metadata`)).body.data.size).toBe(4);
    expect(await call(app, d.apiKey, 'GET', '/api/groups/invite/NoSuchCode1')).toMatchObject({
      status: 404,
      body: { success: false, error: 'Invite not found', message: 'Invite not found' },
    });

    expect((await call(app, a.apiKey, 'GET', `/api/groups/${jid}/picture`)).body).toStrictEqual({ success: true, data: { imgUrl: null } });

    const removed = await call(app, a.apiKey, 'POST', `/api/groups/${jid}/participants/remove`, { participants: [c.phone, '+14155550999'] });
    expect(removed.body.data).toEqual([
      { id: pn(c.phone), status: 200, message: 'removed' },
      { id: '14155550999@s.whatsapp.net', status: 404, message: 'not a participant' },
    ]);
    expect((await eventsOf(app, c.id)).at(-1)!.payload.data).toEqual({ id: jid, participants: [pn(c.phone)], action: 'remove' });
    expect((await call(app, c.apiKey, 'GET', `/api/groups/${jid}/metadata`)).status).toBe(404);

    const left = await call(app, b.apiKey, 'POST', `/api/groups/${jid}/leave`);
    expect(left.body).toStrictEqual({ success: true, data: { groupJid: jid, left: true } });
    expect((await call(app, b.apiKey, 'GET', `/api/groups/${jid}/metadata`)).status).toBe(404);
    expect((await call(app, b.apiKey, 'POST', `/api/groups/${jid}/leave`)).status).toBe(404);

    // Who did what, in the session's audit log.
    const audit = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${a.id}/audit-logs?per_page=100`);
    expect(audit.body.data.data.map((r: { action: string }) => r.action).reverse()).toEqual([
      'session.created',
      'group.created',
      'group.participants_added',
      'group.participants_promoted',
      'group.participants_removed',
    ]);
    expect(audit.body.data.data[0]).toMatchObject({
      actor: { kind: 'sessionKey', id: String(a.id), user_id: null },
      details: { jid, participants: [pn(c.phone)] },
    });
  });

  it('another organization cannot see or join the groups of this one', async () => {
    const a = await sandboxSession(app, t.pat);
    const other = await tenant(app, { orgName: 'Elsewhere' });
    const x = await sandboxSession(app, other.pat);
    const jid = (await call(app, a.apiKey, 'POST', '/api/groups', { name: 'Private' })).body.data.id;
    const code = (await call(app, a.apiKey, 'GET', `/api/groups/${jid}/invite-link`)).body.data.inviteCode;
    expect((await call(app, x.apiKey, 'GET', `/api/groups/${jid}/metadata`)).status).toBe(404);
    expect((await call(app, x.apiKey, 'GET', `/api/groups/invite/${code}`)).status).toBe(404);
    expect((await call(app, x.apiKey, 'POST', '/api/groups/invite/accept', { code })).status).toBe(404);
  });

  it('refuses bad group input with 422 and unknown groups with 404', async () => {
    const a = await sandboxSession(app, t.pat);
    const k = a.apiKey;
    expect((await call(app, k, 'POST', '/api/groups', {})).body.errors).toStrictEqual({ name: ['name is required'] });
    expect((await call(app, k, 'POST', '/api/groups', { name: 42 })).body.errors).toStrictEqual({ name: ['name must be a string'] });
    expect((await call(app, k, 'POST', '/api/groups', { name: 'x', participants: ['+14155550100', 'bob'] })).body.errors).toStrictEqual({
      'participants.1': ['participants.1: must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)'],
    });
    expect((await call(app, k, 'POST', '/api/groups', { name: 'x', participants: '+14155550100' })).status).toBe(422);
    expect((await call(app, k, 'GET', '/api/groups/not-a-group/metadata')).body).toStrictEqual({
      success: false,
      message: 'The given data was invalid.',
      errors: { jid: ['jid must be a group JID such as 120363012345678901@g.us'] },
    });
    expect(await call(app, k, 'GET', '/api/groups/120363000000000001@g.us/metadata')).toMatchObject({
      status: 404,
      body: { success: false, error: 'Group not found', message: 'Group not found' },
    });
    expect((await call(app, k, 'POST', '/api/groups/120363000000000001@g.us/participants/add', { participants: [] })).status).toBe(422);
    expect(
      (await call(app, k, 'PUT', '/api/groups/120363000000000001@g.us/participants/update', { action: 'kick', participants: ['+14155550100'] })).body.errors,
    ).toHaveProperty('action');
    expect((await call(app, k, 'PUT', '/api/groups/120363000000000001@g.us/settings', {})).body.errors).toStrictEqual({
      body: ['body: send at least one of subject, description, announce, restrict'],
    });
    expect((await call(app, k, 'PUT', '/api/groups/120363000000000001@g.us/settings', { announce: 'yes' })).body.errors).toStrictEqual({
      announce: ['announce must be a boolean'],
    });
    expect((await call(app, k, 'POST', '/api/groups/invite/accept', { code: 'has spaces' })).status).toBe(422);
    expect((await call(app, k, 'GET', '/api/groups?page=0')).status).toBe(422);
  });
});

describe('contacts', () => {
  it('saves, renames, reads (by number, JID or LID), lists and pages contacts, with their events', async () => {
    const s = await sandboxSession(app, t.pat);
    const from = await lastEventId(app, s.id);
    const saved = await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: '+14155550177', fullName: 'Erin', saveOnPrimaryAddressbook: true });
    expect(saved.body).toStrictEqual({
      success: true,
      data: {
        id: '14155550177@s.whatsapp.net',
        lid: expect.stringMatching(/^\d{15}@lid$/),
        phoneNumber: '14155550177@s.whatsapp.net',
        name: 'Erin',
        notify: null,
        verifiedName: null,
        imgUrl: null,
        status: null,
        blocked: false,
      },
    });
    const lid = saved.body.data.lid;
    await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: '14155550177@s.whatsapp.net', fullName: 'Erin B.' });
    expect((await eventsOf(app, s.id, from)).map((e) => [e.event, e.payload.data])).toEqual([
      ['contacts.upsert', [{ id: '14155550177@s.whatsapp.net', lid, phoneNumber: '14155550177@s.whatsapp.net', name: 'Erin' }]],
      ['contacts.update', [{ id: '14155550177@s.whatsapp.net', lid, phoneNumber: '14155550177@s.whatsapp.net', name: 'Erin B.' }]],
    ]);
    for (const ref of ['+14155550177', '14155550177', '14155550177@s.whatsapp.net', lid]) {
      const one = await call(app, s.apiKey, 'GET', `/api/contacts/${encodeURIComponent(ref)}`);
      expect(one.status, ref).toBe(200);
      expect(one.body.data).toMatchObject({ id: '14155550177@s.whatsapp.net', name: 'Erin B.' });
    }
    expect(await call(app, s.apiKey, 'GET', '/api/contacts/+14155550000')).toMatchObject({
      status: 404,
      body: { success: false, error: 'Contact not found', message: 'Contact not found' },
    });
    expect((await call(app, s.apiKey, 'GET', '/api/contacts/bob')).body.errors).toStrictEqual({
      jid: ['jid must be a phone number in E.164 format, a phone JID (…@s.whatsapp.net) or a LID (…@lid)'],
    });

    for (const n of [1, 2, 3]) await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: `+1415555020${n}`, fullName: `C${n}` });
    const all = await call(app, s.apiKey, 'GET', '/api/contacts');
    expect(all.body.data.map((c: { name: string }) => c.name)).toEqual(['Erin B.', 'C1', 'C2', 'C3']);
    const page = await call(app, s.apiKey, 'GET', '/api/contacts?paginated=true&page=2&limit=3');
    expect(page.body).toStrictEqual({
      success: true,
      data: { current_page: 2, data: [expect.objectContaining({ name: 'C3' })], from: 4, to: 4, per_page: 3, total: 4, last_page: 2 },
    });
    expect((await call(app, s.apiKey, 'GET', '/api/contacts?limit=0')).status).toBe(422);
    expect((await call(app, s.apiKey, 'GET', '/api/contacts?sort=name')).body.errors).toStrictEqual({ sort: ['unknown field sort'] });

    for (const path of ['picture', 'profile-picture']) {
      expect((await call(app, s.apiKey, 'GET', `/api/contacts/+14155550177/${path}`)).body).toStrictEqual({ success: true, data: { imgUrl: null } });
    }
    expect((await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: 'bob', fullName: 'x' })).body.errors).toStrictEqual({
      jid: ['jid: must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)'],
    });
    expect((await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: '+14155550177', fullName: '' })).body.errors).toHaveProperty('fullName');
    expect(
      (await call(app, s.apiKey, 'PUT', '/api/contacts', { jid: '+14155550177', fullName: 'x', saveOnPrimaryAddressbook: 'yes' })).body.errors,
    ).toStrictEqual({
      saveOnPrimaryAddressbook: ['saveOnPrimaryAddressbook must be a boolean'],
    });
  });

  it('blocking a contact drops its messages; unblocking lets them through again', async () => {
    const a = await sandboxSession(app, t.pat, { name: 'Alice' });
    const b = await sandboxSession(app, t.pat, { name: 'Bob' });
    const blocked = await call(app, b.apiKey, 'POST', `/api/contacts/${a.phone}/block`);
    expect(blocked.body).toStrictEqual({ success: true, data: { message: 'Contact blocked', jid: a.phone } });
    expect((await call(app, b.apiKey, 'GET', `/api/contacts/${a.phone}`)).body.data.blocked).toBe(true);

    const bFrom = await lastEventId(app, b.id);
    const sent = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'can you hear me?' });
    expect(sent.body.data.status).toBe('sent');
    expect(await eventsOf(app, b.id, bFrom)).toEqual([]);
    expect((await call(app, a.apiKey, 'GET', `/api/messages/${sent.body.data.msgId}/info`)).body.data.status).toBe(2);

    const unblocked = await call(app, b.apiKey, 'POST', `/api/contacts/${digits(a.phone)}/unblock`, {});
    expect(unblocked.body).toStrictEqual({ success: true, data: { message: 'Contact unblocked', jid: digits(a.phone) } });
    const again = await call(app, a.apiKey, 'POST', '/api/send-message', { to: b.phone, text: 'and now?' });
    expect(again.body.data.status).toBe('delivered');
    expect((await received(b, bFrom)).map((e) => (e.payload.data as { message: unknown }).message)).toEqual([{ conversation: 'and now?' }]);

    const actions = (await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${b.id}/audit-logs`)).body.data.data.map((r: { action: string }) => r.action);
    expect(actions.slice(0, 2)).toEqual(['contact.unblocked', 'contact.blocked']);
    expect((await call(app, b.apiKey, 'POST', `/api/contacts/${a.phone}/block`, { please: true })).body.errors).toStrictEqual({
      please: ['unknown field please'],
    });
  });
});

describe('presence and lookups', () => {
  it('sends presence updates, and refuses unknown types and chats', async () => {
    const s = await sandboxSession(app, t.pat);
    for (const type of ['composing', 'recording', 'available', 'unavailable', 'paused']) {
      const res = await call(app, s.apiKey, 'POST', '/api/send-presence-update', { jid: '+14155550100', type });
      expect(res.body).toStrictEqual({ success: true, data: { jid: '14155550100@s.whatsapp.net', type } });
    }
    expect(
      (await call(app, s.apiKey, 'POST', '/api/send-presence-update', { jid: '120363000000000001@g.us', type: 'composing', delayMs: 1500 })).body.data,
    ).toStrictEqual({
      jid: '120363000000000001@g.us',
      type: 'composing',
      delayMs: 1500,
    });
    const bad = await call(app, s.apiKey, 'POST', '/api/send-presence-update', { jid: 'nobody', type: 'dancing', delayMs: -1 });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['delayMs', 'jid', 'type']);
  });

  it('on-whatsapp, lid-from-pn and pn-from-lid agree with what the network shows', async () => {
    const a = await sandboxSession(app, t.pat);
    const b = await sandboxSession(app, t.pat);
    const user = (await call(app, b.apiKey, 'GET', '/api/user')).body.data;
    const on = await call(app, a.apiKey, 'GET', `/api/on-whatsapp/${encodeURIComponent(b.phone)}`);
    expect(on.body).toStrictEqual({ success: true, data: { phone: b.phone, exists: true, jid: pn(b.phone), lid: user.lid } });
    expect((await call(app, a.apiKey, 'GET', `/api/on-whatsapp/${digits(b.phone)}`)).body.data.phone).toBe(b.phone);
    expect((await call(app, a.apiKey, 'GET', `/api/lid-from-pn/${encodeURIComponent(b.phone)}`)).body).toStrictEqual({
      success: true,
      data: { pn: pn(b.phone), lid: user.lid },
    });
    expect((await call(app, a.apiKey, 'GET', `/api/lid-from-pn/${pn(b.phone)}`)).body.data.lid).toBe(user.lid);
    expect((await call(app, a.apiKey, 'GET', `/api/pn-from-lid/${user.lid}`)).body).toStrictEqual({
      success: true,
      data: { lid: user.lid, pn: pn(b.phone), phone: b.phone },
    });
    expect((await call(app, a.apiKey, 'GET', `/api/pn-from-lid/${user.lid.replace('@lid', '')}`)).body.data.pn).toBe(pn(b.phone));
    expect(await call(app, a.apiKey, 'GET', '/api/pn-from-lid/999999999999999@lid')).toMatchObject({
      status: 404,
      body: { success: false, error: 'No phone number is known for this LID', message: 'No phone number is known for this LID' },
    });
    expect((await call(app, a.apiKey, 'GET', '/api/on-whatsapp/call-me')).body.errors).toStrictEqual({
      phone: ['phone must be a phone number in E.164 format, for example +14155550123'],
    });
    expect((await call(app, a.apiKey, 'GET', '/api/lid-from-pn/nope')).body.errors).toHaveProperty('pn');
    expect((await call(app, a.apiKey, 'GET', '/api/pn-from-lid/abc@lid')).body.errors).toHaveProperty('lid');
  });
});

describe('whatsapp sessions (no network adapter yet)', () => {
  it('answer 409 on every one of these operations', async () => {
    const w = await whatsappSession(app, t.pat);
    const cases: [string, string, unknown?][] = [
      ['POST', '/api/upload', { base64: 'AAAA', mimetype: 'image/png' }],
      ['POST', '/api/decrypt-media', { data: { message: { imageMessage: { url: 'x' } } } }],
      ['POST', '/api/send-presence-update', { jid: '+14155550100', type: 'composing' }],
      ['GET', '/api/contacts'],
      ['PUT', '/api/contacts', { jid: '+14155550100', fullName: 'x' }],
      ['GET', '/api/contacts/+14155550100'],
      ['GET', '/api/contacts/+14155550100/picture'],
      ['POST', '/api/contacts/+14155550100/block', {}],
      ['GET', '/api/on-whatsapp/+14155550100'],
      ['GET', '/api/lid-from-pn/+14155550100'],
      ['GET', '/api/pn-from-lid/123456789012345@lid'],
      ['GET', '/api/groups'],
      ['POST', '/api/groups', { name: 'x' }],
      ['GET', '/api/groups/120363000000000001@g.us/metadata'],
      ['POST', '/api/groups/120363000000000001@g.us/leave', {}],
      ['GET', '/api/groups/invite/abcdefgh'],
      ['POST', '/api/groups/invite/accept', { code: 'abcdefgh' }],
    ];
    for (const [method, path, body] of cases) {
      const res = await call(app, w.apiKey, method, path, body);
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(409);
      expect(res.body).toStrictEqual({ success: false, error: expect.stringMatching(/is not connected/), message: expect.stringMatching(/is not connected/) });
    }
    // A raw upload is refused before its body is read.
    expect((await raw(w.apiKey, '/api/upload', PDF, { 'content-type': 'application/pdf' })).status).toBe(409);
  });
});
