/**
 * The device authorization grant (RFC 8628) of the command-line client over real HTTP: device
 * code, polling, the JSON approval, tokens, refresh rotation and the RFC's errors.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../core/tokens.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { signIn, type SignedIn } from '../../helpers/identity.ts';

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const FAST = '[plugins.identity]\ndevice_poll_interval_seconds = 1\nscrypt_cost = 1024\n';

type Res = Awaited<ReturnType<TestApp['request']>>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let app: TestApp;
let alice: SignedIn;
/** A second organization alice belongs to, and one she does not. */
let aliceSecondOrg: { id: string; slug: string };
let strangerOrg: { id: string; slug: string };

beforeAll(async () => {
  app = await startApp(FAST);
  alice = await signIn(app, { name: 'Alice', orgName: 'Alice Main' });
  const second = await app.request('POST', '/api/orgs', { body: { name: 'Alice Side', slug: 'alice-side' }, headers: alice.headers });
  expect(second.status).toBe(201);
  aliceSecondOrg = second.body;
  const bob = await signIn(app, { orgName: 'Bob Org' });
  const bobOrg = await app.request('GET', '/api/orgs', { headers: bob.headers });
  strangerOrg = bobOrg.body.orgs[0];
});
afterAll(() => app?.close());

function post(a: TestApp, path: string, fields: Record<string, string>): Promise<Res> {
  return a.request('POST', path, { raw: new URLSearchParams(fields).toString(), headers: FORM });
}

async function newDeviceCode(a = app): Promise<Record<string, any>> {
  const res = await post(a, '/oauth/device/code', { client_id: 'wharf-cli' });
  expect(res.status).toBe(200);
  return res.body;
}

function poll(deviceCode: string, a = app, clientId = 'wharf-cli'): Promise<Res> {
  return post(a, '/oauth/token', { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId });
}

function refresh(token: string, fields: Record<string, string> = {}): Promise<Res> {
  return post(app, '/oauth/token', { grant_type: 'refresh_token', refresh_token: token, client_id: 'wharf-cli', ...fields });
}

function approve(user: SignedIn, body: Record<string, unknown>, a = app): Promise<Res> {
  return a.request('POST', '/oauth/device/approve', { body, headers: user.headers });
}

/** The whole flow for `user`, approving `orgId`; the first poll after approval gets the tokens. */
async function tokensFor(user: SignedIn, orgId: string): Promise<Record<string, any>> {
  const code = await newDeviceCode();
  expect((await approve(user, { user_code: code.user_code, orgId, approve: true })).status).toBe(200);
  const res = await poll(code.device_code);
  expect(res.status).toBe(200);
  return res.body;
}

/** An RFC 6749 §5.2 error: 400, `error` the code, nothing but an optional `error_description` beside it, never cached. */
function expectOAuthError(res: Res, code: string): void {
  expect(res.status, res.text).toBe(400);
  expect(res.body.error).toBe(code);
  expect(Object.keys(res.body).filter((k) => k !== 'error' && k !== 'error_description')).toEqual([]);
  if (res.body.error_description !== undefined) expect(res.body.error_description).toMatch(/^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/);
  expect(res.headers.get('cache-control')).toBe('no-store');
}

function me(accessToken: string, headers: Record<string, string> = {}): Promise<Res> {
  return app.request('GET', '/api/cli/me', { headers: { authorization: `Bearer ${accessToken}`, ...headers } });
}

describe('device authorization', () => {
  it('issues a device code and a user code from the consonant alphabet, at <public_url>/device', async () => {
    const res = await post(app, '/oauth/device/code', { client_id: 'wharf-cli', scope: 'openid' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const publicUrl = app.running.config.core.server.public_url;
    expect(res.body).toStrictEqual({
      device_code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      user_code: expect.stringMatching(USER_CODE),
      verification_uri: `${publicUrl}/device`,
      verification_uri_complete: `${publicUrl}/device?user_code=${res.body.user_code}`,
      expires_in: 600,
      interval: 1,
    });
    const other = await newDeviceCode();
    expect(other.device_code).not.toBe(res.body.device_code);
    expect(other.user_code).not.toBe(res.body.user_code);
  });

  it('accepts JSON as well as a form', async () => {
    const res = await app.request('POST', '/oauth/device/code', { body: { client_id: 'wharf-cli' } });
    expect(res.status).toBe(200);
    expect(res.body.user_code).toMatch(USER_CODE);
  });

  it('stores device codes, user codes and refresh tokens only as hashes', async () => {
    const code = await newDeviceCode();
    await approve(alice, { user_code: code.user_code, orgId: alice.orgId, approve: true });
    const tokens = (await poll(code.device_code)).body;
    const dump = JSON.stringify([
      await app.running.data.all('SELECT * FROM identity_device_codes'),
      await app.running.data.all('SELECT * FROM identity_refresh_tokens'),
    ]);
    expect(dump).toContain(alice.userId); // the rows are there
    for (const secret of [code.device_code, code.user_code, code.user_code.replace('-', ''), tokens.refresh_token]) {
      expect(dump).not.toContain(secret);
    }
  });
});

describe('the whole loop', () => {
  it('pending, slow_down, approval through JSON, then tokens that /api/cli/me accepts as kind oauth', async () => {
    const code = await newDeviceCode();
    expectOAuthError(await poll(code.device_code), 'authorization_pending');
    // Polled again at once: slow_down, and the interval of this code goes up by 5 seconds...
    expectOAuthError(await poll(code.device_code), 'slow_down');
    await sleep(1200);
    // ...so waiting the original 1 second is still too soon.
    expectOAuthError(await poll(code.device_code), 'slow_down');

    // Lower case and no dash: user codes are matched as a person types them.
    const typed = code.user_code.toLowerCase().replace('-', '');
    const approved = await approve(alice, { user_code: typed, orgId: aliceSecondOrg.slug, approve: true });
    expect(approved.status).toBe(200);
    expect(approved.body).toStrictEqual({ success: true, status: 'approved', orgId: aliceSecondOrg.id });

    await sleep(6100);
    const res = await poll(code.device_code);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toStrictEqual({
      access_token: expect.stringMatching(/^eyJ/),
      token_type: 'Bearer',
      expires_in: 3600,
      refresh_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const claims = decodeJwt(res.body.access_token);
    expect(claims.sub).toBe(alice.userId);
    expect(claims.org).toBe(aliceSecondOrg.id);
    expect(claims.aud).toBe('wharf-cli');
    expect((claims.exp ?? 0) - (claims.iat ?? 0)).toBe(3600);

    const who = await me(res.body.access_token);
    expect(who.status).toBe(200);
    expect(who.body).toMatchObject({ kind: 'oauth', userId: alice.userId, email: alice.email, name: 'Alice' });
    expect(who.body.orgs.map((o: { id: string }) => o.id).sort()).toEqual([alice.orgId, aliceSecondOrg.id].sort());

    // The device code is spent.
    expectOAuthError(await poll(code.device_code), 'invalid_grant');
  });

  it('lets X-Service-Org switch to another organization of the user, and refuses others alike', async () => {
    const { access_token: token } = await tokensFor(alice, alice.orgId);
    expect((await me(token, { 'x-service-org': aliceSecondOrg.slug })).status).toBe(200);
    expect((await me(token, { 'x-service-org': aliceSecondOrg.id })).status).toBe(200);
    const stranger = await me(token, { 'x-service-org': strangerOrg.id });
    const missing = await me(token, { 'x-service-org': 'no-such-org' });
    expect(stranger.status).toBe(403);
    expect(missing.status).toBe(403);
    expect(stranger.body).toStrictEqual({ error: expect.any(String) });
    expect(missing.body).toStrictEqual(stranger.body);
  });

  it('answers access_denied after a denial, on every later poll', async () => {
    const code = await newDeviceCode();
    const denied = await approve(alice, { user_code: code.user_code, approve: false });
    expect(denied.status).toBe(200);
    expect(denied.body).toStrictEqual({ success: true, status: 'denied' });
    expectOAuthError(await poll(code.device_code), 'access_denied');
    expectOAuthError(await poll(code.device_code), 'access_denied');
    // Decided once: neither approve nor deny again.
    const again = await approve(alice, { user_code: code.user_code, orgId: alice.orgId, approve: true });
    expect(again.status).toBe(409);
    expect(again.body).toStrictEqual({ error: expect.stringMatching(/already/) });
  });

  it('refuses a device code presented by another client, leaving it usable by the right one', async () => {
    const code = await newDeviceCode();
    expectOAuthError(await poll(code.device_code, app, 'someone-else'), 'invalid_client');
    await approve(alice, { user_code: code.user_code, orgId: alice.orgId, approve: true });
    expect((await poll(code.device_code)).status).toBe(200);
  });
});

describe('expiry', () => {
  let short: TestApp;
  let carol: SignedIn;
  beforeAll(async () => {
    short = await startApp('[plugins.identity]\ndevice_code_ttl_seconds = 1\nscrypt_cost = 1024\n');
    carol = await signIn(short);
  });
  afterAll(() => short?.close());

  it('answers expired_token once the code is past its lifetime, and the code can no longer be approved', async () => {
    const code = await newDeviceCode(short);
    expect(code.expires_in).toBe(1);
    await sleep(1100);
    expectOAuthError(await poll(code.device_code, short), 'expired_token');
    const late = await approve(carol, { user_code: code.user_code, orgId: carol.orgId, approve: true }, short);
    expect(late.status).toBe(404);
    expect(late.body).toStrictEqual({ error: expect.stringMatching(/expired/) });
    expectOAuthError(await poll(code.device_code, short), 'expired_token');
  });

  it('answers expired_token for an approved code not redeemed in time', async () => {
    const code = await newDeviceCode(short);
    expect((await approve(carol, { user_code: code.user_code, orgId: carol.orgId, approve: true }, short)).status).toBe(200);
    await sleep(1100);
    expectOAuthError(await poll(code.device_code, short), 'expired_token');
  });
});

describe('refresh tokens', () => {
  it('rotate: a new access and refresh token, the old refresh token spent', async () => {
    const first = await tokensFor(alice, aliceSecondOrg.id);
    const res = await refresh(first.refresh_token);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toStrictEqual({ access_token: expect.stringMatching(/^eyJ/), token_type: 'Bearer', expires_in: 3600, refresh_token: expect.any(String) });
    expect(res.body.refresh_token).not.toBe(first.refresh_token);
    expect(res.body.access_token).not.toBe(first.access_token);
    expect(decodeJwt(res.body.access_token)).toMatchObject({ sub: alice.userId, org: aliceSecondOrg.id });
    expect((await me(res.body.access_token)).body.kind).toBe('oauth');
    // The successor rotates in turn; client_id may be left out (a public client).
    const third = await post(app, '/oauth/token', { grant_type: 'refresh_token', refresh_token: res.body.refresh_token });
    expect(third.status).toBe(200);
  });

  it('revoke the whole family when a spent one comes back: the newest then fails too', async () => {
    const first = await tokensFor(alice, alice.orgId);
    const second = (await refresh(first.refresh_token)).body;
    const third = (await refresh(second.refresh_token)).body;
    expect(third.refresh_token).toEqual(expect.any(String));
    // Another sign-in of the same user is a different family and stays valid.
    const other = await tokensFor(alice, alice.orgId);

    expectOAuthError(await refresh(first.refresh_token), 'invalid_grant');
    expectOAuthError(await refresh(third.refresh_token), 'invalid_grant');
    expectOAuthError(await refresh(second.refresh_token), 'invalid_grant');
    const family = await app.running.data.all<{ revoked_at: string | null }>(
      'SELECT revoked_at FROM identity_refresh_tokens WHERE family_id = (SELECT family_id FROM identity_refresh_tokens WHERE token_hash = ?)',
      [sha256Hex(first.refresh_token)],
    );
    expect(family.length).toBe(3);
    expect(family.filter((t) => t.revoked_at === null)).toEqual([]);

    expect((await refresh(other.refresh_token)).status).toBe(200);
  });

  it('refuse an unknown or expired token, and a wrong client', async () => {
    expectOAuthError(await refresh('not-a-token'), 'invalid_grant');
    const tokens = await tokensFor(alice, alice.orgId);
    expectOAuthError(await refresh(tokens.refresh_token, { client_id: 'someone-else' }), 'invalid_client');
    const aged = await app.running.data.run("UPDATE identity_refresh_tokens SET expires_at = '2000-01-01T00:00:00.000Z' WHERE token_hash = ?", [
      sha256Hex(tokens.refresh_token),
    ]);
    expect(aged.changes).toBe(1);
    expectOAuthError(await refresh(tokens.refresh_token), 'invalid_grant');
  });
});

describe('bad requests get the RFC error codes, never a 500', () => {
  it.each([
    ['device code without client_id', '/oauth/device/code', {}, 'invalid_request'],
    ['device code with an empty client_id', '/oauth/device/code', { client_id: '' }, 'invalid_request'],
    ['device code for another client', '/oauth/device/code', { client_id: 'not-wharf' }, 'invalid_client'],
    ['token without grant_type', '/oauth/token', { device_code: 'x', client_id: 'wharf-cli' }, 'invalid_request'],
    ['an unsupported grant_type', '/oauth/token', { grant_type: 'authorization_code', code: 'x', client_id: 'wharf-cli' }, 'unsupported_grant_type'],
    ['the password grant', '/oauth/token', { grant_type: 'password', username: 'a', password: 'b' }, 'unsupported_grant_type'],
    ['device grant without device_code', '/oauth/token', { grant_type: DEVICE_GRANT, client_id: 'wharf-cli' }, 'invalid_request'],
    ['device grant without client_id', '/oauth/token', { grant_type: DEVICE_GRANT, device_code: 'x' }, 'invalid_request'],
    ['device grant for another client', '/oauth/token', { grant_type: DEVICE_GRANT, device_code: 'x', client_id: 'not-wharf' }, 'invalid_client'],
    ['an unknown device code', '/oauth/token', { grant_type: DEVICE_GRANT, device_code: 'x'.repeat(43), client_id: 'wharf-cli' }, 'invalid_grant'],
    ['refresh grant without refresh_token', '/oauth/token', { grant_type: 'refresh_token', client_id: 'wharf-cli' }, 'invalid_request'],
  ])('%s', async (_name, path, fields, code) => {
    expectOAuthError(await post(app, path, fields as Record<string, string>), code);
  });

  it('answers invalid_request for JSON of the wrong shape and for bodies of another type', async () => {
    const numbers = await app.request('POST', '/oauth/token', { body: { grant_type: DEVICE_GRANT, device_code: 42, client_id: 'wharf-cli' } });
    expectOAuthError(numbers, 'invalid_request');
    expect(numbers.body.error_description).toMatch(/device_code/);
    expectOAuthError(await app.request('POST', '/oauth/token', { body: ['grant_type'] }), 'invalid_request');
    expectOAuthError(
      await app.request('POST', '/oauth/device/code', { raw: 'client_id=wharf-cli', headers: { 'content-type': 'text/plain' } }),
      'invalid_request',
    );
    expectOAuthError(await app.request('POST', '/oauth/token'), 'invalid_request');
  });

  it('answers 405 in the plain envelope for GET', async () => {
    const res = await app.request('GET', '/oauth/token');
    expect(res.status).toBe(405);
    expect(res.body).toStrictEqual({ error: expect.stringMatching(/not allowed/) });
  });
});

describe('POST /oauth/device/approve', () => {
  it('needs a dashboard session: 401 without one, 403 with a command-line token', async () => {
    const code = await newDeviceCode();
    const none = await app.request('POST', '/oauth/device/approve', { body: { user_code: code.user_code, orgId: alice.orgId, approve: true } });
    expect(none.status).toBe(401);
    expect(none.body).toStrictEqual({ error: expect.any(String) });
    const { access_token: token } = await tokensFor(alice, alice.orgId);
    const bearer = await app.request('POST', '/oauth/device/approve', {
      body: { user_code: code.user_code, orgId: alice.orgId, approve: true },
      headers: { authorization: `Bearer ${token}` },
    });
    expect(bearer.status).toBe(403);
    expect(bearer.body.error).toMatch(/dashboard session/);
    expectOAuthError(await poll(code.device_code), 'authorization_pending');
  });

  it('refuses a cross-site request carrying the cookie', async () => {
    const code = await newDeviceCode();
    const res = await approve(
      { ...alice, headers: { cookie: alice.cookie, origin: 'https://evil.example' } },
      { user_code: code.user_code, orgId: alice.orgId, approve: true },
    );
    expect(res.status).toBe(403);
    expectOAuthError(await poll(code.device_code), 'authorization_pending');
  });

  it('approves only for an organization the user belongs to, 403 alike for a stranger and a missing one', async () => {
    const code = await newDeviceCode();
    const stranger = await approve(alice, { user_code: code.user_code, orgId: strangerOrg.id, approve: true });
    const missing = await approve(alice, { user_code: code.user_code, orgId: '00000000-0000-4000-8000-000000000000', approve: true });
    expect(stranger.status).toBe(403);
    expect(missing.status).toBe(403);
    expect(missing.body).toStrictEqual(stranger.body);
    const noOrg = await approve(alice, { user_code: code.user_code, approve: true });
    expect(noOrg.status).toBe(400);
    expect(noOrg.body).toStrictEqual({ error: 'orgId is required to approve' });
    expectOAuthError(await poll(code.device_code), 'authorization_pending');
  });

  it.each([
    ['no body', undefined, 400, /required/],
    ['approve not a boolean', { user_code: 'BCDF-GHJK', orgId: 'x', approve: 'yes' }, 400, /approve must be a boolean/],
    ['a malformed user code', { user_code: 'AEIO-1234', approve: false }, 400, /not a valid code/],
    ['an unknown user code', { user_code: 'BCDF-GHJK', approve: false }, 404, /Unknown or expired/],
  ])('answers %s with a clear error', async (_name, body, status, message) => {
    const res = await app.request('POST', '/oauth/device/approve', { ...(body === undefined ? {} : { body }), headers: alice.headers });
    expect(res.status).toBe(status);
    expect(res.body).toStrictEqual({ error: expect.stringMatching(message) });
  });

  it('answers 429 after too many wrong codes from one user', async () => {
    const dave = await signIn(app);
    const answers: number[] = [];
    for (let i = 0; i < 11; i++) answers.push((await approve(dave, { user_code: 'ZZZZ-ZZZZ', approve: false })).status);
    expect(answers.slice(0, 10)).toEqual(Array(10).fill(404));
    expect(answers[10]).toBe(429);
    const code = await newDeviceCode();
    const blocked = await approve(dave, { user_code: code.user_code, approve: false });
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toMatch(/^\d+$/);
    // Other users are not affected.
    expect((await approve(alice, { user_code: code.user_code, approve: false })).status).toBe(200);
  });
});
