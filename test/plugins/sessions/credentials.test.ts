/**
 * The two credentials: personal access tokens (minted by a dashboard session, a CLI OAuth token
 * or a PAT; shown once; listed with name and last use; revocable; expiring) and session API keys
 * (regenerated at once). Revocation and regeneration act on the very next request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomToken, sha256Hex } from '../../../core/tokens.ts';
import type { TestApp } from '../../helpers/app.ts';
import { signIn } from '../../helpers/identity.ts';
import { call, type Res, sandboxSession, startMessagingApp, type Tenant, tenant } from './helpers.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

let app: TestApp;
let alice: Tenant;

beforeAll(async () => {
  app = await startMessagingApp('[plugins.sessions]\npat_last_used_resolution_seconds = 0\n');
  alice = await tenant(app);
});
afterAll(() => app?.close());

function post(path: string, fields: Record<string, string>): Promise<Res> {
  return app.request('POST', path, { raw: new URLSearchParams(fields).toString(), headers: FORM });
}

/** A command-line OAuth access token for `user` in `orgId`, through the real device flow. */
async function cliToken(user: Tenant, orgId: string): Promise<string> {
  const code = (await post('/oauth/device/code', { client_id: 'wharf-cli' })).body;
  const approved = await app.request('POST', '/oauth/device/approve', { body: { user_code: code.user_code, orgId, approve: true }, headers: user.headers });
  expect(approved.status).toBe(200);
  const token = await post('/oauth/token', { grant_type: DEVICE_GRANT, device_code: code.device_code, client_id: 'wharf-cli' });
  expect(token.status).toBe(200);
  return token.body.access_token;
}

describe('personal access tokens', () => {
  it('are minted by a dashboard session, a CLI token and a PAT, shown once, listed without the secret', async () => {
    const fromCookie = await app.request('POST', '/api/personal-access-tokens', { body: { name: 'from dashboard' }, headers: alice.headers });
    const oauth = await cliToken(alice, alice.orgId);
    const fromCli = await call(app, oauth, 'POST', '/api/personal-access-tokens', { name: 'from cli' });
    const fromPat = await call(app, alice.pat, 'POST', '/api/personal-access-tokens', {
      name: 'from pat',
      expires_at: new Date(Date.now() + 86_400_000).toISOString(),
    });
    for (const res of [fromCookie, fromCli, fromPat]) {
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({ token: expect.stringMatching(/^wpat_[A-Za-z0-9_-]{43}$/), user_id: alice.userId, last_used_at: null });
      expect(res.body.data.hint).toBe(`…${res.body.data.token.slice(-4)}`);
    }
    expect([fromCookie, fromCli, fromPat].map((r) => r.body.data.created_by)).toEqual([
      'session',
      'oauth',
      `pat:${(await listed(alice.pat)).find((t) => t.name === 'tests')!.id}`,
    ]);

    const list = await call(app, alice.pat, 'GET', '/api/personal-access-tokens');
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).not.toContain(fromCli.body.data.token);
    expect(list.body.data.find((t: { name: string }) => t.name === 'from pat')).toStrictEqual({
      id: fromPat.body.data.id,
      name: 'from pat',
      hint: fromPat.body.data.hint,
      user_id: alice.userId,
      created_by: fromPat.body.data.created_by,
      created_at: expect.any(String),
      last_used_at: null,
      expires_at: fromPat.body.data.expires_at,
    });
    // Only the hash is stored.
    const row = (await app.running.data.one<Record<string, unknown>>('SELECT * FROM sessions_pats WHERE id = ?', [fromCookie.body.data.id]))!;
    expect(row.token_hash).toBe(sha256Hex(fromCookie.body.data.token));
    expect(JSON.stringify(row)).not.toContain(fromCookie.body.data.token);
  });

  it('records the last use', async () => {
    const minted = await call(app, alice.pat, 'POST', '/api/personal-access-tokens', { name: 'used' });
    await call(app, minted.body.data.token, 'GET', '/api/whatsapp-sessions');
    const entry = (await listed(alice.pat)).find((t) => t.id === minted.body.data.id)!;
    expect(Date.parse(entry.last_used_at as string)).toBeGreaterThan(Date.now() - 10_000);
  });

  it('a revoked token fails on the very next request', async () => {
    const minted = (await call(app, alice.pat, 'POST', '/api/personal-access-tokens', { name: 'short-lived' })).body.data;
    expect((await call(app, minted.token, 'GET', '/api/whatsapp-sessions')).status).toBe(200);
    const revoke = await call(app, alice.pat, 'DELETE', `/api/personal-access-tokens/${minted.id}`);
    expect(revoke.body).toStrictEqual({ success: true, data: { id: minted.id, revoked: true } });
    const after = await call(app, minted.token, 'GET', '/api/whatsapp-sessions');
    expect(after.status).toBe(401);
    expect(after.body).toStrictEqual({ success: false, message: 'Invalid or expired credential' });
    expect((await call(app, alice.pat, 'DELETE', `/api/personal-access-tokens/${minted.id}`)).status).toBe(404);
    expect((await listed(alice.pat)).map((t) => t.id)).not.toContain(minted.id);
  });

  it('a token can revoke itself', async () => {
    const minted = (await call(app, alice.pat, 'POST', '/api/personal-access-tokens', { name: 'self' })).body.data;
    expect((await call(app, minted.token, 'DELETE', `/api/personal-access-tokens/${minted.id}`)).status).toBe(200);
    expect((await call(app, minted.token, 'GET', '/api/personal-access-tokens')).status).toBe(401);
  });

  it('an expired token fails', async () => {
    const minted = (
      await call(app, alice.pat, 'POST', '/api/personal-access-tokens', { name: 'expiring', expires_at: new Date(Date.now() + 60_000).toISOString() })
    ).body.data;
    expect((await call(app, minted.token, 'GET', '/api/personal-access-tokens')).status).toBe(200);
    await app.running.data.run('UPDATE sessions_pats SET expires_at = ? WHERE id = ?', [new Date(Date.now() - 1000).toISOString(), minted.id]);
    expect((await call(app, minted.token, 'GET', '/api/personal-access-tokens')).status).toBe(401);
  });

  it.each([
    [{}, { name: ['name is required'] }],
    [{ name: '' }, { name: [expect.stringMatching(/^name: /)] }],
    [{ name: 'x', expires_at: 'tomorrow' }, { expires_at: [expect.stringMatching(/^expires_at: /)] }],
    [{ name: 'x', expires_at: '2001-01-01T00:00:00Z' }, { expires_at: ['expires_at must be in the future'] }],
    [{ name: 'x', scopes: ['all'] }, { scopes: ['unknown field scopes'] }],
  ])('refuses %j with 422', async (body, errors) => {
    const res = await call(app, alice.pat, 'POST', '/api/personal-access-tokens', body);
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({ success: false, message: 'The given data was invalid.', errors });
  });

  it('owners see and revoke every token of the organization; members only their own', async () => {
    const member = await signIn(app, { orgId: alice.orgId, role: 'member' });
    const memberPat = (await app.request('POST', '/api/personal-access-tokens', { body: { name: 'member token' }, headers: member.headers })).body.data;
    const memberList = await call(app, memberPat.token, 'GET', '/api/personal-access-tokens');
    expect(memberList.body.data.map((t: { name: string }) => t.name)).toEqual(['member token']);
    const ownerTokenId = (await listed(alice.pat)).find((t) => t.name === 'tests')!.id;
    expect(await call(app, memberPat.token, 'DELETE', `/api/personal-access-tokens/${ownerTokenId}`)).toMatchObject({
      status: 404,
      body: { success: false, error: 'Token not found', message: 'Token not found' },
    });
    expect((await listed(alice.pat)).map((t) => t.name)).toContain('member token');
    expect((await call(app, alice.pat, 'DELETE', `/api/personal-access-tokens/${memberPat.id}`)).status).toBe(200);
    expect((await call(app, memberPat.token, 'GET', '/api/personal-access-tokens')).status).toBe(401);
  });

  it('stops working when its user leaves the organization', async () => {
    const member = await signIn(app, { orgId: alice.orgId, role: 'member' });
    const token = (await app.request('POST', '/api/personal-access-tokens', { body: { name: 'leaver' }, headers: member.headers })).body.data.token;
    expect((await call(app, token, 'GET', '/api/whatsapp-sessions')).status).toBe(200);
    const removed = await app.request('DELETE', `/api/orgs/${alice.orgId}/members/${member.userId}`, { headers: alice.headers });
    expect(removed.status).toBe(200);
    expect((await call(app, token, 'GET', '/api/whatsapp-sessions')).status).toBe(401);
  });

  it('acts in the organization it was minted in; a CLI token honours X-Service-Org', async () => {
    const second = await app.request('POST', '/api/orgs', { body: { name: 'Alice Second' }, headers: alice.headers });
    const oauth = await cliToken(alice, alice.orgId);
    const inSecond = await call(app, oauth, 'POST', '/api/sandbox-sessions', { name: 'In second org' }, { 'x-service-org': second.body.id });
    expect(inSecond.status).toBe(201);
    const firstList = await call(app, alice.pat, 'GET', '/api/whatsapp-sessions');
    expect(firstList.body.data.map((s: { id: number }) => s.id)).not.toContain(inSecond.body.data.id);
    expect((await call(app, alice.pat, 'GET', `/api/whatsapp-sessions/${inSecond.body.data.id}`)).status).toBe(404);
    const stranger = await call(app, oauth, 'GET', '/api/whatsapp-sessions', undefined, { 'x-service-org': 'no-such-org' });
    expect(stranger.status).toBe(403);
  });

  it('describes itself at /api/cli/me', async () => {
    const me = await call(app, alice.pat, 'GET', '/api/cli/me');
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ kind: 'pat', userId: alice.userId, orgId: alice.orgId, orgs: [{ id: alice.orgId }] });
  });

  it('malformed tokens of our prefixes are simply invalid', async () => {
    for (const token of ['wpat_short', `wpat_${randomToken(32)}x`, 'wsk_', `wsk_${'!'.repeat(43)}`]) {
      const res = await call(app, token, 'GET', '/api/whatsapp-sessions');
      expect(res.status).toBe(401);
      expect(res.body).toStrictEqual({ success: false, message: 'Invalid or expired credential' });
    }
    const garbage = await app.request('GET', '/api/status', { headers: { authorization: 'Basic abc' } });
    expect(garbage).toMatchObject({ status: 401, body: { success: false, message: 'Invalid or expired credential' } });
  });
});

describe('session API keys', () => {
  it('regenerating invalidates the old key immediately', async () => {
    const s = await sandboxSession(app, alice.pat);
    expect((await call(app, s.apiKey, 'GET', '/api/status')).body).toStrictEqual({ status: 'connected' });
    const regen = await call(app, alice.pat, 'POST', `/api/whatsapp-sessions/${s.id}/regenerate-key`, {});
    expect(regen.body).toStrictEqual({ success: true, api_key: expect.stringMatching(/^wsk_[A-Za-z0-9_-]{43}$/) });
    expect((await call(app, s.apiKey, 'GET', '/api/status')).status).toBe(401);
    expect((await call(app, regen.body.api_key, 'GET', '/api/status')).status).toBe(200);
    const read = await call(app, alice.pat, 'GET', `/api/whatsapp-sessions/${s.id}`);
    expect(read.body.data.api_key).toBe(regen.body.api_key);
  });

  it('are stored encrypted and looked up by hash', async () => {
    const s = await sandboxSession(app, alice.pat);
    const row = (await app.running.data.one<Record<string, string>>(
      'SELECT api_key_enc, api_key_hash, webhook_secret_enc FROM sessions_sessions WHERE id = ?',
      [s.id],
    ))!;
    expect(row.api_key_hash).toBe(sha256Hex(s.apiKey));
    expect(row.api_key_enc).toMatch(/^v1\./);
    expect(row.webhook_secret_enc).toMatch(/^v1\./);
    expect(JSON.stringify(row)).not.toContain(s.apiKey);
    expect(JSON.stringify(row)).not.toContain(s.body.webhook_secret);
  });

  it('a deleted session key fails at once', async () => {
    const s = await sandboxSession(app, alice.pat);
    expect((await call(app, alice.pat, 'DELETE', `/api/whatsapp-sessions/${s.id}`)).status).toBe(200);
    expect((await call(app, s.apiKey, 'GET', '/api/status')).status).toBe(401);
  });

  it('describes itself at /api/cli/me', async () => {
    const s = await sandboxSession(app, alice.pat);
    expect((await call(app, s.apiKey, 'GET', '/api/cli/me')).body).toStrictEqual({ kind: 'sessionKey', sessionId: s.id, orgId: alice.orgId });
  });
});

async function listed(pat: string): Promise<Record<string, unknown>[]> {
  return (await call(app, pat, 'GET', '/api/personal-access-tokens')).body.data;
}
