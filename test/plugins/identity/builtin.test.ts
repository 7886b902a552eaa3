import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { identityOf, login, signIn, type SignedIn } from '../../helpers/identity.ts';

let app: TestApp;
let owner: SignedIn;

beforeAll(async () => {
  // A cheap scrypt cost keeps the suite fast; the cost itself is measured in bench/.
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\nlogin_max_failures_per_account = 3\nlogin_max_failures_per_address = 50\n');
  owner = await signIn(app, { name: 'Olive Owner', orgName: 'Acme Corp' });
});
afterAll(() => app.close());

const json = (headers: Record<string, string>) => ({ ...headers, 'content-type': 'application/json' });

describe('sign-in', () => {
  it('answers {user, activeOrgId} and sets an HttpOnly, SameSite=Lax __session cookie', async () => {
    const res = await app.fetch('/auth/login', {
      method: 'POST',
      headers: json({ origin: app.url }),
      body: JSON.stringify({ email: owner.email.toUpperCase(), password: owner.password }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ user: { id: owner.userId, email: owner.email, name: 'Olive Owner' }, activeOrgId: owner.orgId });
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__session='))!;
    expect(cookie).toMatch(/; path=\//i);
    expect(cookie).toMatch(/; httponly/i);
    expect(cookie).toMatch(/; samesite=lax/i);
    expect(cookie).not.toMatch(/; secure/i); // the public URL is http here
    const jwt = cookie.split(';')[0]!.slice('__session='.length);
    expect(JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString())).toMatchObject({ alg: 'EdDSA' });
  });

  it.each([
    ['no body', undefined, 400, 'email is required'],
    ['email not a string', { email: 5, password: 'x' }, 400, 'email must be a string'],
    ['no password', { email: 'a@b.c' }, 400, 'password is required'],
  ])('refuses %s with 400 {error}', async (_name, body, status, error) => {
    const res = await app.request('POST', '/auth/login', { body, headers: { origin: app.url } });
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error });
  });

  it('gives the same 401 for an unknown email and a wrong password', async () => {
    const unknown = await app.request('POST', '/auth/login', {
      body: { email: 'nobody@example.test', password: 'whatever-it-is' },
      headers: { origin: app.url },
    });
    const wrong = await app.request('POST', '/auth/login', { body: { email: owner.email, password: 'not the password' }, headers: { origin: app.url } });
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(unknown.body).toEqual({ error: 'Invalid email or password' });
    expect(wrong.body).toEqual(unknown.body);
    expect(unknown.headers.get('set-cookie')).toBeNull();
  });

  it('takes similar time for an unknown email and a wrong password (no enumeration by timing)', async () => {
    const timing = await startApp('[plugins.identity]\nscrypt_cost = 16384\nlogin_max_failures_per_account = 100\nlogin_max_failures_per_address = 100\n');
    try {
      const user = await signIn(timing);
      const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const known: number[] = [];
      const unknownTimes: number[] = [];
      for (let i = 0; i < 7; i++) {
        known.push(
          await (async () => {
            const t = performance.now();
            await timing.request('POST', '/auth/login', { body: { email: user.email, password: 'nope-nope-nope' }, headers: { origin: timing.url } });
            return performance.now() - t;
          })(),
        );
        unknownTimes.push(
          await (async () => {
            const t = performance.now();
            await timing.request('POST', '/auth/login', {
              body: { email: `ghost${i}@example.test`, password: 'nope-nope-nope' },
              headers: { origin: timing.url },
            });
            return performance.now() - t;
          })(),
        );
      }
      const ratio = median(unknownTimes) / median(known);
      // Both pay one scrypt (tens of ms); without the decoy hash the unknown email would be ~50x faster.
      expect(ratio).toBeGreaterThan(0.5);
      expect(ratio).toBeLessThan(2);
    } finally {
      await timing.close();
    }
  });

  it('throttles failed sign-ins per account with 429 {message, retry_after} and Retry-After', async () => {
    const victim = await signIn(app);
    const attempt = (password: string) => app.request('POST', '/auth/login', { body: { email: victim.email, password }, headers: { origin: app.url } });
    for (let i = 0; i < 3; i++) expect((await attempt('wrong password')).status).toBe(401);
    const blocked = await attempt('wrong password');
    expect(blocked.status).toBe(429);
    expect(blocked.body).toEqual({ message: expect.stringMatching(/Too many failed sign-in attempts/), retry_after: expect.any(Number) });
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // Even the right password waits until the window passes: guessing gains nothing.
    expect((await attempt(victim.password)).status).toBe(429);
  });

  it('throttles per client address across accounts', async () => {
    const small = await startApp('[plugins.identity]\nscrypt_cost = 1024\nlogin_max_failures_per_address = 2\n');
    try {
      const statuses: number[] = [];
      for (const email of ['a@x.test', 'b@x.test', 'c@x.test']) {
        statuses.push((await small.request('POST', '/auth/login', { body: { email, password: 'nope-nope' }, headers: { origin: small.url } })).status);
      }
      expect(statuses).toEqual([401, 401, 429]);
    } finally {
      await small.close();
    }
  });
});

describe('dashboard session', () => {
  it('resolves the cookie, and logout ends the session on the very next request', async () => {
    const user = await signIn(app);
    const me = await app.request('GET', '/api/cli/me', { headers: user.headers });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({
      kind: 'session',
      userId: user.userId,
      email: user.email,
      name: expect.any(String),
      orgs: [{ id: user.orgId, slug: expect.any(String), name: expect.any(String) }],
    });
    const out = await app.request('POST', '/auth/logout', { headers: user.headers });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ success: true });
    expect(out.headers.getSetCookie().some((c) => /^__session=;/.test(c) && /max-age=0|expires=Thu, 01 Jan 1970/i.test(c))).toBe(true);
    // The old cookie is still a validly signed JWT, but its session is revoked.
    const after = await app.request('GET', '/api/cli/me', { headers: user.headers });
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ error: 'Invalid or expired credential' });
  });

  it.each([
    ['missing', {}, 'Authentication required'],
    ['malformed', { cookie: '__session=not-a-jwt' }, 'Invalid or expired credential'],
    [
      'forged',
      { cookie: `__session=${Buffer.from('{"alg":"EdDSA"}').toString('base64url')}.${Buffer.from('{"sid":"x","sub":"y"}').toString('base64url')}.AAAA` },
      'Invalid or expired credential',
    ],
    ['bearer garbage', { authorization: 'Bearer garbage' }, 'Invalid or expired credential'],
    ['not bearer', { authorization: 'Basic dXNlcjpwYXNz' }, 'Invalid or expired credential'],
  ])('answers 401 {error} for a %s credential', async (_name, headers, error) => {
    const res = await app.request('GET', '/api/cli/me', { headers });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error });
  });

  it('refuses an expired cookie', async () => {
    const short = await startApp('[plugins.identity]\nscrypt_cost = 1024\nsession_token_ttl_seconds = 60\n');
    try {
      const user = await signIn(short);
      expect((await short.request('GET', '/api/cli/me', { headers: user.headers })).status).toBe(200);
      // Re-sign the same claims with exp in the past using the server's own key.
      const { SignJWT, decodeJwt } = await import('jose');
      const claims = decodeJwt(user.cookie.slice('__session='.length));
      const expired = await new SignJWT({ sid: claims.sid })
        .setProtectedHeader({ alg: 'EdDSA' })
        .setSubject(claims.sub!)
        .setIssuer(claims.iss!)
        .setAudience(claims.aud as string)
        .setIssuedAt(Math.floor(Date.now() / 1000) - 120)
        .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
        .sign(short.running.keys.signingKey);
      const res = await short.request('GET', '/api/cli/me', { headers: { cookie: `__session=${expired}` } });
      expect(res.status).toBe(401);
    } finally {
      await short.close();
    }
  });

  it('renews the cookie once half its life has passed', async () => {
    const short = await startApp('[plugins.identity]\nscrypt_cost = 1024\nsession_token_ttl_seconds = 60\n');
    try {
      const user = await signIn(short);
      const { SignJWT, decodeJwt } = await import('jose');
      const claims = decodeJwt(user.cookie.slice('__session='.length));
      const old = await new SignJWT({ sid: claims.sid })
        .setProtectedHeader({ alg: 'EdDSA' })
        .setSubject(claims.sub!)
        .setIssuer(claims.iss!)
        .setAudience(claims.aud as string)
        .setIssuedAt(Math.floor(Date.now() / 1000) - 40)
        .setExpirationTime(Math.floor(Date.now() / 1000) + 20)
        .sign(short.running.keys.signingKey);
      const res = await short.fetch('/api/cli/me', { headers: { cookie: `__session=${old}` } });
      expect(res.status).toBe(200);
      const renewed = res.headers.getSetCookie().find((c) => c.startsWith('__session='));
      expect(renewed).toBeDefined();
      expect(decodeJwt(renewed!.split(';')[0]!.slice('__session='.length)).exp).toBeGreaterThan(Math.floor(Date.now() / 1000) + 50);
      // A fresh cookie is not renewed on every request.
      const fresh = await short.fetch('/api/cli/me', { headers: { cookie: user.cookie } });
      expect(fresh.headers.getSetCookie()).toEqual([]);
    } finally {
      await short.close();
    }
  });

  it('sets Secure on the cookie when the public URL is https', async () => {
    const secure = await startApp('[server]\npublic_url = "https://wharf.example.test"\n[plugins.identity]\nscrypt_cost = 1024\n');
    try {
      const identity = identityOf(secure);
      await identity.createUser({ email: 'sec@example.test', password: 'long enough password' });
      const res = await secure.fetch('/auth/login', {
        method: 'POST',
        headers: json({ origin: 'https://wharf.example.test' }),
        body: JSON.stringify({ email: 'sec@example.test', password: 'long enough password' }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.getSetCookie()[0]).toMatch(/; secure/i);
    } finally {
      await secure.close();
    }
  });
});

describe('cross-site request forgery', () => {
  it.each([
    ['a foreign Origin', { origin: 'https://evil.example' }, 403],
    ['Sec-Fetch-Site cross-site', { 'sec-fetch-site': 'cross-site' }, 403],
    ['Sec-Fetch-Site same-site (another subdomain)', { 'sec-fetch-site': 'same-site' }, 403],
    ['the instance Origin', { origin: 'self' }, 201],
    ['Sec-Fetch-Site same-origin', { 'sec-fetch-site': 'same-origin' }, 201],
    ['no Origin at all (not a browser)', {}, 201],
  ])('with a valid cookie and %s: %s', async (_name, extra, status) => {
    const headers: Record<string, string> = { cookie: owner.cookie, 'content-type': 'application/json' };
    for (const [k, v] of Object.entries(extra)) headers[k] = v === 'self' ? app.url : v;
    const res = await app.request('POST', '/api/orgs', { body: { name: `Org ${Math.random()}` }, headers });
    expect(res.status).toBe(status);
    if (status === 403) expect(res.body).toEqual({ error: 'Cross-site request refused' });
  });

  it('refuses a cross-site sign-in form post (login CSRF) but allows safe methods cross-site', async () => {
    const res = await app.request('POST', '/auth/login', {
      body: { email: owner.email, password: owner.password },
      headers: { origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
    const read = await app.request('GET', '/api/orgs', { headers: { cookie: owner.cookie, origin: 'https://evil.example' } });
    expect(read.status).toBe(200);
  });
});

describe('organizations', () => {
  it('lists the caller\u2019s organizations with roles and creates one with a derived or given slug', async () => {
    const user = await signIn(app, { orgName: 'Zeta Works' });
    const created = await app.request('POST', '/api/orgs', { body: { name: 'Ünïcode Café & Co' }, headers: user.headers });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), slug: 'unicode-cafe-co', name: 'Ünïcode Café & Co', role: 'owner' });
    const named = await app.request('POST', '/api/orgs', { body: { name: 'Named', slug: 'my-team' }, headers: user.headers });
    expect(named.status).toBe(201);
    expect(named.body.slug).toBe('my-team');
    const taken = await app.request('POST', '/api/orgs', { body: { name: 'Again', slug: 'my-team' }, headers: user.headers });
    expect(taken.status).toBe(409);
    expect(taken.body).toEqual({ error: 'slug "my-team" is taken' });
    const badSlug = await app.request('POST', '/api/orgs', { body: { name: 'Bad', slug: 'Not OK!' }, headers: user.headers });
    expect(badSlug.status).toBe(400);
    const noName = await app.request('POST', '/api/orgs', { body: { name: '   ' }, headers: user.headers });
    expect(noName.status).toBe(400);
    const list = await app.request('GET', '/api/orgs', { headers: user.headers });
    expect(list.body.orgs.map((o: { slug: string; role: string }) => `${o.slug}:${o.role}`)).toEqual([
      'zeta-works:owner',
      'unicode-cafe-co:owner',
      'my-team:owner',
    ]);
    expect(Object.keys(list.body.orgs[0])).toEqual(['id', 'slug', 'name', 'role']);
  });

  it('switches the active organization only to one the user belongs to', async () => {
    const user = await signIn(app);
    const second = (await app.request('POST', '/api/orgs', { body: { name: 'Second' }, headers: user.headers })).body;
    const ok = await app.request('PUT', '/auth/active-org', { body: { orgId: second.id }, headers: user.headers });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ activeOrgId: second.id });
    expect((await app.request('GET', '/auth/session', { headers: user.headers })).body.activeOrgId).toBe(second.id);
    const foreign = await app.request('PUT', '/auth/active-org', { body: { orgId: owner.orgId }, headers: user.headers });
    expect(foreign.status).toBe(403);
    expect(foreign.body).toEqual({ error: 'Not a member of that organization' });
    const missing = await app.request('PUT', '/auth/active-org', { body: { orgId: '00000000-0000-0000-0000-000000000000' }, headers: user.headers });
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(foreign.body);
    expect((await app.request('PUT', '/auth/active-org', { body: {}, headers: user.headers })).status).toBe(400);
  });

  it('lets owners and admins invite, change and remove members, and keeps one owner', async () => {
    const boss = await signIn(app, { orgName: 'Members Inc' });
    const admin = await signIn(app, { orgId: boss.orgId, role: 'admin' });
    const member = await signIn(app, { orgId: boss.orgId, role: 'member' });
    const outsider = await signIn(app);
    const path = `/api/orgs/${boss.orgId}/members`;

    const listed = await app.request('GET', path, { headers: member.headers });
    expect(listed.status).toBe(200);
    expect(listed.body.members.map((m: { role: string }) => m.role)).toEqual(['owner', 'admin', 'member']);

    expect((await app.request('POST', path, { body: { email: outsider.email }, headers: member.headers })).status).toBe(403);
    expect((await app.request('POST', path, { body: { email: outsider.email, role: 'owner' }, headers: admin.headers })).status).toBe(403);
    // Members are invited (test/plugins/identity/invitations.test.ts), and join by accepting.
    const invited = await app.request('POST', path, { body: { email: outsider.email.toUpperCase(), role: 'member' }, headers: admin.headers });
    expect(invited.status).toBe(202);
    expect((await app.request('POST', `/api/orgs/invitations/${invited.body.invitation.id}/accept`, { headers: outsider.headers })).status).toBe(200);
    expect((await app.request('POST', path, { body: { email: outsider.email }, headers: admin.headers })).status).toBe(409);
    expect((await app.request('POST', path, { body: { email: outsider.email, role: 'king' }, headers: boss.headers })).status).toBe(400);

    expect((await app.request('PATCH', `${path}/${outsider.userId}`, { body: { role: 'admin' }, headers: admin.headers })).status).toBe(200);
    expect((await app.request('PATCH', `${path}/${boss.userId}`, { body: { role: 'member' }, headers: admin.headers })).status).toBe(403);
    const lastOwner = await app.request('PATCH', `${path}/${boss.userId}`, { body: { role: 'member' }, headers: boss.headers });
    expect(lastOwner.status).toBe(409);
    expect(lastOwner.body).toEqual({ error: 'An organization keeps at least one owner' });
    expect((await app.request('DELETE', `${path}/${boss.userId}`, { headers: boss.headers })).status).toBe(409);

    expect((await app.request('DELETE', `${path}/${member.userId}`, { headers: outsider.headers })).status).toBe(200);
    // The removed member loses the organization on the next request.
    expect((await app.request('GET', path, { headers: member.headers })).status).toBe(404);
  });

  it('answers 404 for an organization the caller is not in, existing or not', async () => {
    const stranger = await signIn(app);
    const a = await app.request('GET', `/api/orgs/${owner.orgId}/members`, { headers: stranger.headers });
    const b = await app.request('GET', '/api/orgs/00000000-0000-0000-0000-000000000000/members', { headers: stranger.headers });
    expect(a.status).toBe(404);
    expect(b.status).toBe(404);
    expect(a.body).toEqual(b.body);
  });
});

describe('X-Service-Org', () => {
  it('overrides the organization after a membership check, by id or slug', async () => {
    const user = await signIn(app, { orgName: 'Header Home' });
    const other = (await app.request('POST', '/api/orgs', { body: { name: 'Header Other' }, headers: user.headers })).body;
    const session = async (headers: Record<string, string>) => await app.request('GET', '/auth/session', { headers: { ...user.headers, ...headers } });
    expect((await session({})).body.activeOrgId).toBe(user.orgId);
    expect((await session({ 'x-service-org': other.id })).body.activeOrgId).toBe(other.id);
    expect((await session({ 'x-service-org': other.slug })).body.activeOrgId).toBe(other.id);
    const stranger = await session({ 'x-service-org': owner.orgId });
    const missing = await session({ 'x-service-org': 'no-such-org' });
    expect(stranger.status).toBe(403);
    expect(stranger.body).toEqual({ error: 'Not a member of that organization' });
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(stranger.body);
  });
});

describe('discovery', () => {
  it('GET /api/cli/config is public and names this instance', async () => {
    const res = await app.request('GET', '/api/cli/config');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ instanceUrl: app.url, idpFapiUrl: app.url, oauthClientId: 'wharf-cli', minCliVersion: '0.1.0', configured: true });
  });
});

describe('password changes', () => {
  it('a new password ends existing sessions', async () => {
    const user = await signIn(app);
    const identity = identityOf(app) as unknown as { setPassword(id: string, pw: string): Promise<void> };
    await identity.setPassword(user.userId, 'a brand new password');
    expect((await app.request('GET', '/api/cli/me', { headers: user.headers })).status).toBe(401);
    await expect(login(app, user.email, user.password)).rejects.toThrow(/401/);
    expect(await login(app, user.email, 'a brand new password')).toMatch(/^__session=/);
  });
});
