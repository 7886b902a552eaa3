/**
 * Every messaging route against every credential: none, an invalid one, a PAT, a session key, the
 * dashboard cookie, and another organization's PAT; each with its exact status and body. Each
 * case gets fresh sessions, so destructive operations (delete, regenerate key) never disturb the
 * next case. The whole table runs twice: on sandbox sessions, and on whatsapp sessions connected
 * through the fake WhatsApp network (Baileys' socket replaced, test/helpers/fake-whatsapp.ts).
 */
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomToken } from '../../../core/tokens.ts';
import type { TestApp } from '../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../helpers/fake-whatsapp.ts';
import { call, eventsOf, lastEventId, type Res, type SessionInfo, startMessagingApp, type Tenant, tenant, until, WHATSAPP_TEST_TOML } from './helpers.ts';
import { type TestNetwork, testNetworks } from './test-networks.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const networks = testNetworks((fake.network = new FakeWhatsApp()));

type Cred = 'none' | 'invalid' | 'pat' | 'sessionKey' | 'cookie' | 'otherPat';
const CREDS: readonly Cred[] = ['none', 'invalid', 'pat', 'sessionKey', 'cookie', 'otherPat'];

interface Fixture {
  session: SessionInfo;
  peer: SessionInfo;
  msgId: number;
  failedMsgId: number;
  inboundKey: Record<string, unknown>;
  patId: number;
  /** Built only for routes that declare `media` (operations 21-45). */
  extra: Extra;
}

interface Extra {
  /** Path of an uploaded file's public URL, and of a decrypted one. */
  uploadPath: string;
  decryptedPath: string;
  /** A media message the session received from its peer, as the webhook gave it. */
  mediaMessage: Record<string, unknown>;
  /** A group the session created (super admin) with its peer in it, and its invite code. */
  groupJid: string;
  inviteCode: string;
  /** The peer's LID. */
  peerLid: string;
}

interface Expect {
  status: number;
  body?: Record<string, unknown>;
}

interface Route {
  method: string;
  path: (fx: Fixture) => string;
  credential: 'account' | 'sessionKey' | 'public';
  body?: (fx: Fixture) => unknown;
  /** What an authorized caller of the right kind gets. */
  ok: Expect;
  /** What another organization's PAT gets, when it is not `ok` (routes naming a resource). */
  foreign?: Expect;
  /** Needs the fixture's `extra` part. */
  extra?: boolean;
  /** Its path in the OpenAPI document, when it is not derived from `path`. */
  doc?: string;
}

/** What the QR route answers for a connected session of each network. */
const QR_REFUSAL = {
  sandbox: 'A sandbox session is always connected and needs no QR code',
  whatsapp: 'The session is connected: there is no QR code to scan',
} as const;

const NOT_FOUND_SESSION: Expect = { status: 404, body: { success: false, error: 'Session not found', message: 'Session not found' } };
const OK: Expect = { status: 200, body: { success: true } };

let app: TestApp;
let alice: Tenant;
let bob: Tenant;
let phoneCounter = 0;

beforeAll(async () => {
  app = await startMessagingApp(WHATSAPP_TEST_TOML);
  alice = await tenant(app, { orgName: 'Alice Org' });
  bob = await tenant(app, { orgName: 'Bob Org' });
});
afterAll(() => app?.close());

function sessionRoutes(net: TestNetwork, prefix: string): Route[] {
  const id = (fx: Fixture) => `${prefix}/${fx.session.id}`;
  return [
    { method: 'GET', path: () => prefix, credential: 'account', ok: OK },
    {
      method: 'POST',
      path: () => prefix,
      credential: 'account',
      body: () => ({ name: 'New', phone_number: `+4930${String(++phoneCounter).padStart(8, '0')}`, account_protection: false, log_messages: true }),
      ok: { status: 201, body: { success: true, data: { type: 'whatsapp', status: 'disconnected' } } },
    },
    {
      method: 'GET',
      path: id,
      credential: 'account',
      ok: { status: 200, body: { success: true, data: { api_key: expect.stringMatching(/^wsk_/) } } },
      foreign: NOT_FOUND_SESSION,
    },
    {
      method: 'PUT',
      path: id,
      credential: 'account',
      body: () => ({ name: 'Renamed' }),
      ok: { status: 200, body: { success: true, data: { name: 'Renamed' } } },
      foreign: NOT_FOUND_SESSION,
    },
    { method: 'DELETE', path: id, credential: 'account', ok: { status: 200, body: { success: true, data: null } }, foreign: NOT_FOUND_SESSION },
    {
      method: 'POST',
      path: (fx) => `${id(fx)}/connect`,
      credential: 'account',
      body: () => ({}),
      ok: { status: 200, body: { success: true, data: { status: 'connected' } } },
      foreign: NOT_FOUND_SESSION,
    },
    ...['qrcode', 'qr-code'].map(
      (p): Route => ({
        method: 'GET',
        path: (fx) => `${id(fx)}/${p}`,
        credential: 'account',
        ok: { status: 409, body: { success: false, error: QR_REFUSAL[net.name], message: QR_REFUSAL[net.name] } },
        foreign: NOT_FOUND_SESSION,
      }),
    ),
    {
      method: 'POST',
      path: (fx) => `${id(fx)}/disconnect`,
      credential: 'account',
      // A sandbox session is always connected; a whatsapp one disconnects.
      ok: { status: 200, body: { success: true, data: { status: net.name === 'sandbox' ? 'connected' : 'disconnected' } } },
      foreign: NOT_FOUND_SESSION,
    },
    {
      method: 'POST',
      path: (fx) => `${id(fx)}/restart`,
      credential: 'account',
      ok: { status: 200, body: { success: true, data: { status: 'connected' } } },
      foreign: NOT_FOUND_SESSION,
    },
    ...['regenerate-key', 'regenerate-api-key'].map(
      (p): Route => ({
        method: 'POST',
        path: (fx) => `${id(fx)}/${p}`,
        credential: 'account',
        body: () => ({}),
        ok: { status: 200, body: { success: true, api_key: expect.stringMatching(/^wsk_/) } },
        foreign: NOT_FOUND_SESSION,
      }),
    ),
    ...['message-logs', 'session-logs', 'audit-logs'].map(
      (p): Route => ({
        method: 'GET',
        path: (fx) => `${id(fx)}/${p}`,
        credential: 'account',
        ok: { status: 200, body: { success: true, data: { current_page: 1 } } },
        foreign: NOT_FOUND_SESSION,
      }),
    ),
    {
      method: 'PUT',
      path: (fx) => `${id(fx)}/proxy`,
      credential: 'account',
      body: () => ({ proxy_url: null }),
      ok: { status: 200, body: { success: true, data: { proxy_url: null } } },
      foreign: NOT_FOUND_SESSION,
    },
    {
      method: 'GET',
      path: (fx) => `${id(fx)}/webhook-signing`,
      credential: 'account',
      ok: { status: 200, body: { success: true, data: { mode: 'secret' } } },
      foreign: NOT_FOUND_SESSION,
    },
    {
      method: 'PUT',
      path: (fx) => `${id(fx)}/webhook-signing`,
      credential: 'account',
      body: () => ({ mode: 'hmac' }),
      ok: { status: 200, body: { success: true, data: { mode: 'hmac' } } },
      foreign: NOT_FOUND_SESSION,
    },
    {
      method: 'POST',
      path: (fx) => `${id(fx)}/rotate-webhook-secret`,
      credential: 'account',
      body: () => ({}),
      ok: { status: 200, body: { success: true, data: { webhook_secret: expect.any(String) } } },
      foreign: NOT_FOUND_SESSION,
    },
  ];
}

/** Operations 21-45 (upload, media, presence, contacts, lookups, groups) and the public media URLs. */
function directoryRoutes(): Route[] {
  const key = (r: Omit<Route, 'credential' | 'extra'>): Route => ({ ...r, credential: 'sessionKey', extra: true });
  const group = (fx: Fixture) => `/api/groups/${fx.extra.groupJid}`;
  const contact = (fx: Fixture) => `/api/contacts/${fx.peer.phone}`;
  const participants = (fx: Fixture) => ({ participants: [fx.peer.phone] });
  return [
    key({
      method: 'POST',
      path: () => '/api/upload',
      body: () => ({ base64: Buffer.from('matrix bytes').toString('base64'), mimetype: 'text/plain' }),
      ok: { status: 200, body: { success: true, publicUrl: expect.stringMatching(/\/api\/media\/[A-Za-z0-9_-]+\.txt$/) } },
    }),
    { method: 'GET', path: (fx) => fx.extra.uploadPath, credential: 'public', extra: true, doc: '/api/media/{file}', ok: { status: 200 } },
    key({
      method: 'POST',
      path: () => '/api/decrypt-media',
      body: (fx) => ({ data: { messages: { key: { id: 'x' }, message: fx.extra.mediaMessage } } }),
      ok: { status: 200, body: { success: true, publicUrl: expect.stringMatching(/\/api\/decrypted-media\//) } },
    }),
    { method: 'GET', path: (fx) => fx.extra.decryptedPath, credential: 'public', extra: true, doc: '/api/decrypted-media/{id}', ok: { status: 200 } },
    key({
      method: 'POST',
      path: () => '/api/send-presence-update',
      body: (fx) => ({ jid: fx.peer.phone, type: 'composing' }),
      ok: { status: 200, body: { success: true, data: { type: 'composing' } } },
    }),
    key({ method: 'GET', path: () => '/api/contacts', ok: OK }),
    key({
      method: 'PUT',
      path: () => '/api/contacts',
      body: (fx) => ({ jid: fx.peer.phone, fullName: 'Peer' }),
      ok: { status: 200, body: { success: true, data: { name: 'Peer' } } },
    }),
    key({ method: 'GET', path: contact, doc: '/api/contacts/{jid}', ok: { status: 200, body: { success: true, data: { notify: 'Peer' } } } }),
    ...['picture', 'profile-picture'].map((p) =>
      key({
        method: 'GET',
        path: (fx) => `${contact(fx)}/${p}`,
        doc: `/api/contacts/{jid}/${p}`,
        ok: { status: 200, body: { success: true, data: { imgUrl: null } } },
      }),
    ),
    ...['block', 'unblock'].map((p) =>
      key({
        method: 'POST',
        path: (fx) => `${contact(fx)}/${p}`,
        doc: `/api/contacts/{jid}/${p}`,
        ok: { status: 200, body: { success: true, data: { message: p === 'block' ? 'Contact blocked' : 'Contact unblocked' } } },
      }),
    ),
    key({
      method: 'GET',
      path: (fx) => `/api/on-whatsapp/${fx.peer.phone}`,
      doc: '/api/on-whatsapp/{phone}',
      ok: { status: 200, body: { success: true, data: { exists: true } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `/api/lid-from-pn/${fx.peer.phone}`,
      doc: '/api/lid-from-pn/{pn}',
      ok: { status: 200, body: { success: true, data: { lid: expect.stringMatching(/@lid$/) } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `/api/pn-from-lid/${fx.extra.peerLid}`,
      doc: '/api/pn-from-lid/{lid}',
      ok: { status: 200, body: { success: true, data: { phone: expect.stringMatching(/^\+/) } } },
    }),
    key({ method: 'GET', path: () => '/api/groups', ok: { status: 200, body: { success: true, data: [{ name: 'Matrix group' }] } } }),
    key({
      method: 'POST',
      path: () => '/api/groups',
      body: (fx) => ({ name: 'New group', participants: [fx.peer.phone] }),
      ok: { status: 201, body: { success: true, data: { subject: 'New group', size: 2 } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `/api/groups/invite/${fx.extra.inviteCode}`,
      doc: '/api/groups/invite/{code}',
      ok: { status: 200, body: { success: true, data: { subject: 'Matrix group' } } },
    }),
    key({
      method: 'POST',
      path: () => '/api/groups/invite/accept',
      body: (fx) => ({ code: fx.extra.inviteCode }),
      ok: { status: 200, body: { success: true, data: { groupJid: expect.stringMatching(/@g\.us$/) } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `${group(fx)}/metadata`,
      doc: '/api/groups/{jid}/metadata',
      ok: { status: 200, body: { success: true, data: { subject: 'Matrix group', size: 2 } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `${group(fx)}/participants`,
      doc: '/api/groups/{jid}/participants',
      ok: { status: 200, body: { success: true, data: [{ admin: 'superadmin' }, { admin: null }] } },
    }),
    key({
      method: 'POST',
      path: (fx) => `${group(fx)}/participants/add`,
      doc: '/api/groups/{jid}/participants/add',
      body: () => ({ participants: ['+14155550188'] }),
      ok: { status: 200, body: { success: true, data: [{ status: 200, message: 'added' }] } },
    }),
    key({
      method: 'POST',
      path: (fx) => `${group(fx)}/participants/remove`,
      doc: '/api/groups/{jid}/participants/remove',
      body: participants,
      ok: { status: 200, body: { success: true, data: [{ status: 200, message: 'removed' }] } },
    }),
    key({
      method: 'PUT',
      path: (fx) => `${group(fx)}/participants/update`,
      doc: '/api/groups/{jid}/participants/update',
      body: (fx) => ({ action: 'promote', ...participants(fx) }),
      ok: { status: 200, body: { success: true, data: [{ status: 200, message: 'promoted' }] } },
    }),
    key({
      method: 'PUT',
      path: (fx) => `${group(fx)}/settings`,
      doc: '/api/groups/{jid}/settings',
      body: () => ({ subject: 'Renamed group', announce: true }),
      ok: { status: 200, body: { success: true, data: { subject: 'Renamed group', announce: true } } },
    }),
    key({
      method: 'POST',
      path: (fx) => `${group(fx)}/leave`,
      doc: '/api/groups/{jid}/leave',
      ok: { status: 200, body: { success: true, data: { left: true } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `${group(fx)}/invite-link`,
      doc: '/api/groups/{jid}/invite-link',
      ok: { status: 200, body: { success: true, data: { inviteLink: expect.stringMatching(/^https:\/\/chat\.whatsapp\.com\//) } } },
    }),
    key({
      method: 'GET',
      path: (fx) => `${group(fx)}/picture`,
      doc: '/api/groups/{jid}/picture',
      ok: { status: 200, body: { success: true, data: { imgUrl: null } } },
    }),
  ];
}

const routes = (net: TestNetwork): Route[] => [
  ...sessionRoutes(net, '/api/whatsapp-sessions'),
  ...sessionRoutes(net, '/api/messaging-sessions'),
  {
    method: 'POST',
    path: () => '/api/sandbox-sessions',
    credential: 'account',
    body: () => ({ name: 'Fresh sandbox' }),
    ok: { status: 201, body: { success: true, data: { type: 'sandbox', status: 'connected' } } },
  },
  { method: 'GET', path: () => '/api/personal-access-tokens', credential: 'account', ok: OK },
  {
    method: 'POST',
    path: () => '/api/personal-access-tokens',
    credential: 'account',
    body: () => ({ name: 'ci' }),
    ok: { status: 201, body: { success: true, data: { token: expect.stringMatching(/^wpat_/) } } },
  },
  {
    method: 'DELETE',
    path: (fx) => `/api/personal-access-tokens/${fx.patId}`,
    credential: 'account',
    ok: { status: 200, body: { success: true, data: { revoked: true } } },
    foreign: { status: 404, body: { success: false, error: 'Token not found', message: 'Token not found' } },
  },
  { method: 'GET', path: () => '/api/status', credential: 'sessionKey', ok: { status: 200, body: { status: 'connected' } } },
  {
    method: 'GET',
    path: () => '/api/user',
    credential: 'sessionKey',
    ok: { status: 200, body: { success: true, data: { id: expect.stringMatching(/@s\.whatsapp\.net$/) } } },
  },
  {
    method: 'POST',
    path: () => '/api/send-message',
    credential: 'sessionKey',
    body: (fx) => ({ to: fx.peer.phone, text: 'matrix' }),
    ok: { status: 200, body: { success: true, data: { status: net.sentStatus } } },
  },
  {
    method: 'GET',
    path: (fx) => `/api/messages/${fx.msgId}/info`,
    credential: 'sessionKey',
    ok: { status: 200, body: { success: true, data: { status: 3 } } },
  },
  { method: 'PUT', path: (fx) => `/api/messages/${fx.msgId}`, credential: 'sessionKey', body: () => ({ text: 'edited' }), ok: OK },
  { method: 'DELETE', path: (fx) => `/api/messages/${fx.msgId}`, credential: 'sessionKey', ok: OK },
  {
    method: 'POST',
    path: (fx) => `/api/messages/${fx.failedMsgId}/resend`,
    credential: 'sessionKey',
    // The sandbox refuses again at once; WhatsApp accepts, and refuses later with its ack (already
    // recorded when the answer reads the status, if it came in the turn of the send's commit).
    ok: { status: 200, body: { success: true, data: { status: net.name === 'sandbox' ? 'failed' : expect.stringMatching(/^(in_progress|failed)$/) } } },
  },
  { method: 'POST', path: () => '/api/messages/read', credential: 'sessionKey', body: (fx) => ({ key: fx.inboundKey }), ok: OK },
  { method: 'POST', path: () => '/api/messages/react', credential: 'sessionKey', body: (fx) => ({ key: fx.inboundKey, reaction: '👍' }), ok: OK },
  {
    method: 'POST',
    path: () => '/api/sandbox/receive',
    credential: 'sessionKey',
    body: () => ({ from: '+14155550100', text: 'hi' }),
    ok:
      net.name === 'sandbox'
        ? { status: 200, body: { success: true, data: { key: { fromMe: false, remoteJid: expect.stringMatching(/@lid$/) } } } }
        : {
            status: 422,
            body: {
              success: false,
              message: 'Sandbox receive works only on sandbox sessions.',
              errors: { session: [expect.stringMatching(/is a whatsapp session/)] },
            },
          },
  },
  {
    method: 'GET',
    path: () => '/api/webhook-events',
    credential: 'public',
    ok: { status: 200, body: { success: true, data: expect.arrayContaining(['messages.received']) } },
  },
  ...directoryRoutes(),
];

async function extra(session: SessionInfo, peer: SessionInfo): Promise<Extra> {
  const base = app.url.length;
  const upload = await call(app, peer.apiKey, 'POST', '/api/upload', {
    base64: Buffer.from('%PDF-1.4 matrix').toString('base64'),
    mimetype: 'application/pdf',
  });
  const from = await lastEventId(app, session.id);
  const sent = await call(app, peer.apiKey, 'POST', '/api/send-message', { to: session.phone, documentUrl: upload.body.publicUrl });
  const received = await until(async () => (await eventsOf(app, session.id, from)).find((e) => e.event === 'messages.received'), 'the document received');
  const got = received.payload.data as {
    key: { remoteJid: string };
    message: Record<string, unknown>;
  };
  const decrypted = await call(app, session.apiKey, 'POST', '/api/decrypt-media', { data: { message: got.message } });
  const group = await call(app, session.apiKey, 'POST', '/api/groups', { name: 'Matrix group', participants: [peer.phone] });
  const link = await call(app, session.apiKey, 'GET', `/api/groups/${group.body.data.id}/invite-link`);
  expect([upload.status, sent.status, decrypted.status, group.status, link.status]).toEqual([200, 200, 200, 201, 200]);
  return {
    uploadPath: upload.body.publicUrl.slice(base),
    decryptedPath: decrypted.body.publicUrl.slice(base),
    mediaMessage: got.message,
    groupJid: group.body.data.id,
    inviteCode: link.body.data.inviteCode,
    peerLid: got.key.remoteJid,
  };
}

async function fixture(net: TestNetwork, withExtra = false): Promise<Fixture> {
  const session = await net.session(app, alice.pat, { name: 'Matrix' });
  const peer = await net.session(app, alice.pat, { name: 'Peer' });
  const sent = await call(app, session.apiKey, 'POST', '/api/send-message', { to: peer.phone, text: 'first' });
  const failed = await call(app, session.apiKey, 'POST', '/api/send-message', { to: net.unreachable, text: 'lost' });
  const inboundKey = await net.receive(app, session, { from: '+14155550123', text: 'incoming' });
  const pat = await call(app, alice.pat, 'POST', '/api/personal-access-tokens', { name: 'to revoke' });
  expect([sent.status, failed.status, pat.status]).toEqual([200, 200, 201]);
  await net.settled(app, session, sent.body.data.msgId, 'delivered');
  await net.settled(app, session, failed.body.data.msgId, 'failed');
  return {
    session,
    peer,
    msgId: sent.body.data.msgId,
    failedMsgId: failed.body.data.msgId,
    inboundKey,
    patId: pat.body.data.id,
    extra: withExtra ? await extra(session, peer) : placeholder().extra,
  };
}

function headersFor(cred: Cred, route: Route, fx: Fixture): Record<string, string> {
  switch (cred) {
    case 'none':
      return {};
    case 'invalid':
      return { authorization: `Bearer ${route.credential === 'sessionKey' ? 'wsk_' : 'wpat_'}${randomToken(32)}` };
    case 'pat':
      return { authorization: `Bearer ${alice.pat}` };
    case 'sessionKey':
      return { authorization: `Bearer ${fx.session.apiKey}` };
    case 'cookie':
      return alice.headers;
    case 'otherPat':
      return { authorization: `Bearer ${bob.pat}` };
  }
}

function expected(cred: Cred, route: Route): Expect {
  if (route.credential === 'public') return route.ok;
  if (cred === 'none') return { status: 401, body: { success: false, message: 'Authentication required' } };
  if (cred === 'invalid') return { status: 401, body: { success: false, message: 'Invalid or expired credential' } };
  const accountKinds: Cred[] = ['pat', 'cookie', 'otherPat'];
  const rightKind = route.credential === 'account' ? accountKinds.includes(cred) : cred === 'sessionKey';
  if (!rightKind) {
    const needs = route.credential === 'account' ? 'personal access token' : 'session API key';
    return { status: 403, body: { success: false, message: `This operation requires a ${needs}` } };
  }
  if (cred === 'otherPat' && route.foreign) return route.foreign;
  return route.ok;
}

const cases = (net: TestNetwork) =>
  routes(net).flatMap((route) => CREDS.map((cred) => ({ route, cred, name: `${route.method} ${route.path(placeholder())} as ${cred}` })));

function placeholder(): Fixture {
  return {
    session: { id: 0, apiKey: '', phone: '', body: {} },
    peer: { id: 0, apiKey: '', phone: '', body: {} },
    msgId: 0,
    failedMsgId: 0,
    inboundKey: {},
    patId: 0,
    extra: {
      uploadPath: '/api/media/{file}',
      decryptedPath: '/api/decrypted-media/{id}',
      mediaMessage: {},
      groupJid: '{jid}',
      inviteCode: '{code}',
      peerLid: '{lid}',
    },
  };
}

describe.each(networks)('every route against every credential, on $name sessions', (net) => {
  it.each(cases(net))('$name', async ({ route, cred }) => {
    const fx = await fixture(net, route.extra);
    const want = expected(cred, route);
    const res: Res = await app.request(route.method, route.path(fx), {
      ...(route.body ? { body: route.body(fx) } : {}),
      headers: headersFor(cred, route, fx),
    });
    expect(res.status, res.text).toBe(want.status);
    if (want.status >= 400 && want.body) expect(res.body).toStrictEqual(want.body);
    else if (want.body) expect(res.body).toMatchObject(want.body);
  });

  it('another organization sees none of these sessions in its list', async () => {
    const fx = await fixture(net);
    const res = await call(app, bob.pat, 'GET', '/api/whatsapp-sessions');
    expect(res.status).toBe(200);
    expect(res.body.data.map((s: { id: number }) => s.id)).not.toContain(fx.session.id);
  });

  it.runIf(net.name === 'sandbox')('covers every messaging operation in the OpenAPI document', async () => {
    const doc = await app.request('GET', '/api/openapi.json');
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.body.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`);
    }
    const tested = new Set(
      routes(net).map((r) => {
        const fx = placeholder();
        if (r.doc) return `${r.method} ${r.doc}`;
        return `${r.method} ${r
          .path(fx)
          .replace(/\/0(?=\/|$)/, '/{id}')
          .replace(/^\/api\/messages\/\{id\}/, '/api/messages/{msgId}')}`;
      }),
    );
    const messaging = [...documented].filter((op) =>
      /\/api\/(whatsapp-sessions|messaging-sessions|sandbox|personal-access-tokens|send-message|messages|status|user|webhook-events|upload|media|decrypt-media|decrypted-media|send-presence-update|contacts|on-whatsapp|lid-from-pn|pn-from-lid|groups)/.test(
        op,
      ),
    );
    expect(messaging.filter((op) => !tested.has(op))).toEqual([]);
    expect(messaging.length).toBe(tested.size);
    expect(messaging.filter((op) => !tested.has(op))).toEqual([]);
  });
});
