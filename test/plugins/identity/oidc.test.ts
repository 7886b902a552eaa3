/**
 * External OpenID Connect mode against a real provider (npm `oidc-provider`) started here on a
 * loopback port: the device flow of the command-line client run at the provider, its JWT access
 * token presented to Wharf, and the ways a token or a provider can be wrong.
 *
 * The provider issues RFC 9068 JWT access tokens for the resource `https://wharf.test/api`
 * (resource indicators), with the user's email and name and a Clerk-style organization claim
 * `o: {id, slg, rol}` added to them; Wharf is configured with that audience and those claim paths.
 */
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import Provider, { errors as providerErrors } from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../../core/config.ts';
import { definePlugin } from '../../../core/plugin.ts';
import { builtinPlugins } from '../../../plugins/index.ts';
import { claimAt, roleFromClaim } from '../../../plugins/identity/oidc.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { identityOf } from '../../helpers/identity.ts';

const API = 'https://wharf.test/api';
const CLIENT_ID = 'wharf-cli';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const INVALID = { error: 'Invalid or expired credential' };

interface Person {
  email: string;
  name: string;
  org?: { id: string; slg: string; rol: string };
}

/** The provider's accounts; the dev interactions sign in whoever's login is typed. */
const people: Record<string, Person> = {
  alice: { email: 'alice@example.test', name: 'Alice Liddell', org: { id: 'org_acme', slg: 'acme', rol: 'org:admin' } },
  bob: { email: 'bob@example.test', name: 'Bob Builder', org: { id: 'org_other', slg: 'other', rol: 'org:member' } },
  carol: { email: 'carol@example.test', name: 'Carol' },
};

interface TestProvider {
  issuer: string;
  /** The provider's own signing key (it publishes the public half at its jwks_uri). */
  key: CryptoKey;
  kid: string;
  close(): Promise<void>;
}

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function startProvider(): Promise<TestProvider> {
  let handler: http.RequestListener = (_req, res) => res.end();
  const { server, url: issuer } = await listen((req, res) => handler(req, res));
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = 'provider-key-1';
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        token_endpoint_auth_method: 'none',
        grant_types: [DEVICE_GRANT, 'refresh_token'],
        response_types: [],
        redirect_uris: [],
      },
    ],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' }] },
    cookies: { keys: ['oidc-test-cookie-key'] },
    ttl: { AccessToken: 3600, IdToken: 3600, RefreshToken: 86_400, DeviceCode: 600, Interaction: 600, Session: 3600, Grant: 86_400 },
    scopes: ['openid', 'email', 'profile', 'offline_access'],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: {
      deviceFlow: { enabled: true },
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => API,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string) => {
          if (indicator !== API) throw new providerErrors.InvalidTarget();
          return { scope: 'wharf', audience: API, accessTokenFormat: 'jwt', accessTokenTTL: 3600, jwt: { sign: { alg: 'RS256' } } };
        },
      },
    },
    async findAccount(_ctx: unknown, id: string) {
      const person = people[id];
      if (!person) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, email: person.email, email_verified: true, name: person.name }) };
    },
    // What Keycloak's mappers or Clerk's session token template do: identity in the access token.
    async extraTokenClaims(_ctx: unknown, token: { kind: string; accountId?: string }) {
      const person = token.accountId ? people[token.accountId] : undefined;
      if (token.kind !== 'AccessToken' || !person) return undefined;
      return { email: person.email, name: person.name, ...(person.org ? { o: person.org } : {}) };
    },
  });
  handler = provider.callback();
  return { issuer, key: privateKey, kid, close: () => closeServer(server) };
}

/** A browser's cookies, enough for the provider's interaction pages (one value per name). */
class CookieJar {
  readonly #cookies = new Map<string, string>();

  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const pair = line.split(';')[0]!;
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
}

const formBody = (fields: Record<string, string>): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});

const hiddenInputs = (html: string) =>
  Object.fromEntries([...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/?>/g)].map((m) => [m[1]!, m[2]!]));

interface TokenSet {
  access_token: string;
  id_token?: string;
  refresh_token?: string;
  token_type: string;
}

/**
 * What `wharf login` and its user do against an external provider: device authorization,
 * a poll before approval (pending), the approval pages (code, sign-in, consent), the token.
 */
async function deviceLogin(provider: TestProvider, login: string): Promise<TokenSet> {
  const jar = new CookieJar();
  const browse = async (url: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set('cookie', jar.header());
    const res = await fetch(new URL(url, provider.issuer), { ...init, headers, redirect: 'manual' });
    jar.store(res);
    return res;
  };
  const token = (fields: Record<string, string>) => fetch(`${provider.issuer}/token`, formBody({ client_id: CLIENT_ID, ...fields }));

  const authorization = await fetch(`${provider.issuer}/device/auth`, formBody({ client_id: CLIENT_ID, scope: 'openid email profile offline_access wharf' }));
  expect(authorization.status).toBe(200);
  const device = (await authorization.json()) as { device_code: string; user_code: string; verification_uri_complete: string };
  expect(device.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);

  const pending = await token({ grant_type: DEVICE_GRANT, device_code: device.device_code });
  expect(pending.status).toBe(400);
  expect(await pending.json()).toMatchObject({ error: 'authorization_pending' });

  // The verification page posts the code back with its CSRF token; then the confirmation form.
  let page = await browse(device.verification_uri_complete);
  page = await browse('/device', formBody(hiddenInputs(await page.text())));
  const confirm = hiddenInputs(await page.text());
  expect(confirm.confirm).toBe('yes');
  page = await browse('/device', formBody(confirm));
  let location = page.headers.get('location');
  const prompts: string[] = [];
  while (location) {
    page = await browse(location);
    if (page.status >= 300 && page.status < 400) {
      location = page.headers.get('location');
      continue;
    }
    const html = await page.text();
    const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
    if (!prompt) {
      expect(html).toContain('Sign-in Success');
      break;
    }
    prompts.push(prompt);
    const action = /<form[^>]+action="([^"]+)"/.exec(html)![1]!;
    page = await browse(action, formBody(prompt === 'login' ? { prompt, login, password: 'any' } : { prompt }));
    location = page.headers.get('location');
  }
  expect(prompts).toEqual(['login', 'consent']);

  const issued = await token({ grant_type: DEVICE_GRANT, device_code: device.device_code });
  expect(issued.status).toBe(200);
  return (await issued.json()) as TokenSet;
}

/** A token signed with `key` (by default the provider's own), with the claims a good one has unless overridden. */
async function signToken(provider: TestProvider, claims: JWTPayload, options: { key?: CryptoKey; kid?: string; omit?: string[] } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload: JWTPayload = { iss: provider.issuer, aud: API, iat: now, exp: now + 600, client_id: CLIENT_ID, ...claims };
  for (const name of options.omit ?? []) delete payload[name];
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: options.kid ?? provider.kid }).sign(options.key ?? provider.key);
}

function oidcToml(issuer: string, extra = ''): string {
  return `[plugins.identity]
mode = "oidc"
[plugins.identity.oidc]
issuer = "${issuer}"
client_id = "${CLIENT_ID}"
${extra}
`;
}

/** Clerk-style nested organization claims, and the audience of the provider's access tokens. */
const CLERK_STYLE = `audience = ["${API}"]
org_claim = "o.id"
org_name_claim = "o.slg"
org_role_claim = "o.rol"`;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Shows the principal a request resolves to, as plugins that depend on identity see it. */
const whoami = definePlugin({
  name: 'whoami',
  description: 'Test plugin: GET /whoami answers the resolved user principal.',
  config: z.strictObject({}),
  // No tables: it runs on either database (the project "on postgres" runs this file too).
  engines: ['sqlite', 'postgres'],
  setup({ api }) {
    const group = api.group({ prefixes: ['/whoami'], envelope: 'plain' });
    group.route({
      method: 'GET',
      path: '/whoami',
      summary: 'who',
      tag: 'Test',
      auth: { kinds: ['oauth', 'session'], needs: 'user', schemes: [] },
      handler(ctx, { auth }) {
        ctx.body = { ...auth };
      },
    });
    return { routes: [group] };
  },
});

let provider: TestProvider;
let app: TestApp;
let alice: TokenSet;

beforeAll(async () => {
  provider = await startProvider();
  app = await startApp(oidcToml(provider.issuer, CLERK_STYLE), { plugins: [...builtinPlugins, whoami] });
  alice = await deviceLogin(provider, 'alice');
});
afterAll(async () => {
  await app?.close();
  await provider?.close();
});

describe('external OIDC mode: the command-line loop against a real provider', () => {
  it('announces the provider in /api/cli/config and prints no setup link', async () => {
    const res = await app.request('GET', '/api/cli/config');
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({
      instanceUrl: app.url,
      idpFapiUrl: provider.issuer,
      oauthClientId: CLIENT_ID,
      minCliVersion: '0.1.0',
      configured: true,
    });
    expect(app.running.notices.join('\n')).not.toContain('/setup?token=');
  });

  it('answers /api/cli/me for the device-flow access token with the mapped user and organization', async () => {
    expect(alice.token_type).toBe('Bearer');
    const me = await app.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) });
    expect(me.status).toBe(200);
    expect(me.body).toStrictEqual({
      kind: 'oauth',
      userId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: 'alice@example.test',
      name: 'Alice Liddell',
      orgs: [{ id: expect.stringMatching(/^[0-9a-f-]{36}$/), slug: 'acme', name: 'acme' }],
    });
    // Clerk's "org:admin" became the admin role; the same token again is the same user, not a second one.
    const orgs = await app.request('GET', '/api/orgs', { headers: bearer(alice.access_token) });
    expect(orgs.body).toStrictEqual({ orgs: [{ id: me.body.orgs[0].id, slug: 'acme', name: 'acme', role: 'admin' }] });
    const again = await app.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) });
    expect(again.body.userId).toBe(me.body.userId);
    expect((await identityOf(app).findUserByEmail('alice@example.test'))?.id).toBe(me.body.userId);
    // The token's organization is the one requests act in.
    const principal = await app.request('GET', '/whoami', { headers: bearer(alice.access_token) });
    expect(principal.body).toStrictEqual({
      kind: 'oauth',
      userId: me.body.userId,
      email: 'alice@example.test',
      name: 'Alice Liddell',
      orgId: me.body.orgs[0].id,
      role: 'admin',
    });
  });

  it('accepts the access token the provider issues on refresh', async () => {
    expect(alice.refresh_token).toEqual(expect.any(String));
    const res = await fetch(`${provider.issuer}/token`, formBody({ client_id: CLIENT_ID, grant_type: 'refresh_token', refresh_token: alice.refresh_token! }));
    expect(res.status).toBe(200);
    const refreshed = (await res.json()) as TokenSet;
    expect(refreshed.access_token).not.toBe(alice.access_token);
    const me = await app.request('GET', '/api/cli/me', { headers: bearer(refreshed.access_token) });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe('alice@example.test');
  });

  it('takes the provider token from the __session cookie as a dashboard session', async () => {
    const me = await app.request('GET', '/api/cli/me', { headers: { cookie: `__session=${alice.access_token}` } });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ kind: 'session', email: 'alice@example.test', orgs: [{ slug: 'acme' }] });
    const principal = await app.request('GET', '/whoami', { headers: { cookie: `__session=${alice.access_token}` } });
    expect(principal.body).toMatchObject({ kind: 'session', userId: me.body.userId, role: 'admin' });
    expect(principal.body).not.toHaveProperty('sessionId');
    const bad = await app.request('GET', '/api/cli/me', { headers: { cookie: '__session=eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl' } });
    expect(bad.status).toBe(401);
    expect(bad.body).toStrictEqual(INVALID);
  });

  it('refuses a cross-site state-changing request carrying the provider cookie', async () => {
    const res = await app.request('POST', '/api/orgs', {
      body: { name: 'Forged' },
      headers: { cookie: `__session=${alice.access_token}`, origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
    expect(res.body).toStrictEqual({ error: 'Cross-site request refused' });
  });

  it('creates a user without an organization claim and one for another organization', async () => {
    const carol = await deviceLogin(provider, 'carol');
    const me = await app.request('GET', '/api/cli/me', { headers: bearer(carol.access_token) });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ kind: 'oauth', email: 'carol@example.test', name: 'Carol', orgs: [] });
    expect((await app.request('GET', '/whoami', { headers: bearer(carol.access_token) })).body).toMatchObject({ orgId: null, role: null });
    // Organizations of Wharf's own can still be created; with no organization in the token, the first one is used.
    const created = await app.request('POST', '/api/orgs', { headers: bearer(carol.access_token), body: { name: 'Carol Corp' } });
    expect(created.status).toBe(201);
    expect((await app.request('GET', '/whoami', { headers: bearer(carol.access_token) })).body).toMatchObject({ orgId: created.body.id, role: 'owner' });
    const bob = await deviceLogin(provider, 'bob');
    const bobMe = await app.request('GET', '/api/cli/me', { headers: bearer(bob.access_token) });
    expect(bobMe.body.orgs).toEqual([expect.objectContaining({ slug: 'other' })]);
    expect(bobMe.body.userId).not.toBe(me.body.userId);
  });

  it('follows changes of name, email, organization name and role on the next token', async () => {
    const before = await app.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) });
    const changed = await signToken(provider, {
      sub: 'alice',
      email: 'alice@new.example',
      name: 'Alice Pleasance',
      o: { id: 'org_acme', slg: 'acme-renamed', rol: 'org:member' },
    });
    const me = await app.request('GET', '/api/cli/me', { headers: bearer(changed) });
    expect(me.body).toMatchObject({ userId: before.body.userId, email: 'alice@new.example', name: 'Alice Pleasance' });
    expect(me.body.orgs).toEqual([{ id: before.body.orgs[0].id, slug: 'acme', name: 'acme-renamed' }]);
    const orgs = await app.request('GET', '/api/orgs', { headers: bearer(changed) });
    expect(orgs.body.orgs[0].role).toBe('member');
    // Back to what the provider's real token says.
    const restored = await app.request('GET', '/api/orgs', { headers: bearer(alice.access_token) });
    expect(restored.body.orgs[0]).toMatchObject({ name: 'acme', role: 'admin' });
  });

  it("applies X-Service-Org after a membership check: 403 alike for a stranger's and a missing organization", async () => {
    const own = await app.request('GET', '/api/cli/me', { headers: { ...bearer(alice.access_token), 'x-service-org': 'acme' } });
    expect(own.status).toBe(200);
    // Carol, a member of no provider organization, switches to the one she created.
    const carolToken = await signToken(provider, { sub: 'carol' });
    const carolOrgs = await app.request('GET', '/api/orgs', { headers: bearer(carolToken) });
    const switched = await app.request('GET', '/whoami', { headers: { ...bearer(carolToken), 'x-service-org': 'carol-corp' } });
    expect(switched.body).toMatchObject({ orgId: carolOrgs.body.orgs[0].id, role: 'owner' });
    for (const org of ['other', 'no-such-org', '00000000-0000-4000-8000-000000000000']) {
      const res = await app.request('GET', '/api/cli/me', { headers: { ...bearer(alice.access_token), 'x-service-org': org } });
      expect(res.status).toBe(403);
      expect(res.body).toStrictEqual({ error: 'Not a member of that organization' });
    }
  });

  it('has no password sign-in, setup link or built-in device flow', async () => {
    for (const [method, path] of [
      ['POST', '/auth/login'],
      ['POST', '/auth/logout'],
      ['GET', '/setup'],
      ['POST', '/oauth/device/code'],
      ['GET', '/device'],
    ] as const) {
      const res = await app.request(method, path, { body: method === 'POST' ? { email: 'a@b.c', password: 'x' } : undefined, headers: { origin: app.url } });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error).toContain(`signs users in with its OpenID Connect provider (${provider.issuer})`);
    }
  });
});

describe('external OIDC mode: organization invitations are off', () => {
  it('answers 404 naming the provider on every invitation route, and the old add-member path invites nobody', async () => {
    const orgs = await app.request('GET', '/api/orgs', { headers: bearer(alice.access_token) });
    const acme = orgs.body.orgs.find((o: { slug: string }) => o.slug === 'acme');
    expect(acme.role).toBe('admin');
    const id = '00000000-0000-4000-8000-000000000000';
    for (const [method, path] of [
      ['GET', '/api/orgs/invitations'],
      ['POST', `/api/orgs/invitations/${id}/accept`],
      ['POST', `/api/orgs/invitations/${id}/decline`],
      ['GET', `/api/orgs/${acme.id}/invitations`],
      ['POST', `/api/orgs/${acme.id}/invitations`],
      ['POST', `/api/orgs/${acme.id}/members`],
      ['DELETE', `/api/orgs/${acme.id}/invitations/${id}`],
    ] as const) {
      const res = await app.request(method, path, { body: method === 'POST' ? { email: 'bob@example.test' } : undefined, headers: bearer(alice.access_token) });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toStrictEqual({ error: expect.stringContaining(`organization memberships from its OpenID Connect provider (${provider.issuer})`) });
    }
    // The same without a credential or with a body that would not validate.
    expect((await app.request('GET', '/api/orgs/invitations')).status).toBe(404);
    expect((await app.request('POST', `/api/orgs/${acme.id}/members`, { body: { email: 5 }, headers: bearer(alice.access_token) })).status).toBe(404);
    const members = await app.request('GET', `/api/orgs/${acme.id}/members`, { headers: bearer(alice.access_token) });
    expect(members.status).toBe(200);
    expect(members.body.members.map((m: { email: string }) => m.email)).not.toContain('bob@example.test');
  });
});

describe('external OIDC mode: tokens that must be refused (401, never 500)', () => {
  it.each([
    [
      'signed by another key under the provider key id',
      async () => signToken(provider, { sub: 'alice' }, { key: (await generateKeyPair('RS256')).privateKey }),
    ],
    [
      'signed by a key the provider does not publish',
      async () => signToken(provider, { sub: 'alice' }, { key: (await generateKeyPair('RS256')).privateKey, kid: 'stranger' }),
    ],
    ['for another audience', () => signToken(provider, { sub: 'alice', aud: 'https://elsewhere.example/api' })],
    ['from another issuer', () => signToken(provider, { sub: 'alice', iss: 'https://evil.example' })],
    ['expired', () => signToken(provider, { sub: 'alice', iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 })],
    ['not valid yet', () => signToken(provider, { sub: 'alice', nbf: Math.floor(Date.now() / 1000) + 3600 })],
    ['without an expiry', () => signToken(provider, { sub: 'alice' }, { omit: ['exp'] })],
    ['without a user claim', () => signToken(provider, { email: 'nobody@example.test' })],
    [
      'tampered with',
      async () => {
        const [header, , signature] = alice.access_token.split('.');
        const payload = Buffer.from(JSON.stringify({ sub: 'alice', iss: provider.issuer, aud: API, exp: 4102444800 })).toString('base64url');
        return `${header}.${payload}.${signature}`;
      },
    ],
    ['malformed', async () => 'eyJhbGciOiJSUzI1NiJ9.not-json.c2ln'],
  ])('a token %s', async (_label, make) => {
    const token = await make();
    const res = await app.request('GET', '/api/cli/me', { headers: bearer(token) });
    expect(res.status).toBe(401);
    expect(res.body).toStrictEqual(INVALID);
    const cookie = await app.request('GET', '/api/cli/me', { headers: { cookie: `__session=${token}` } });
    expect(cookie.status).toBe(401);
  });

  it('refuses the ID token, whose audience is the client, when an API audience is configured', async () => {
    expect(alice.id_token).toEqual(expect.any(String));
    const res = await app.request('GET', '/api/cli/me', { headers: bearer(alice.id_token!) });
    expect(res.status).toBe(401);
    expect(res.body).toStrictEqual(INVALID);
  });

  it('refuses a bearer that is no JWT and a missing credential', async () => {
    expect((await app.request('GET', '/api/cli/me', { headers: bearer('opaque-token') })).status).toBe(401);
    const none = await app.request('GET', '/api/cli/me');
    expect(none.status).toBe(401);
    expect(none.body).toStrictEqual({ error: 'Authentication required' });
  });
});

describe('external OIDC mode: configuration variants', () => {
  it('with default claim names and the client id as audience: the ID token and flat organization claims', async () => {
    const plain = await startApp(oidcToml(provider.issuer));
    try {
      // The provider's access token is for the API, not for the client: refused here.
      expect((await plain.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) })).status).toBe(401);
      const idToken = await plain.request('GET', '/api/cli/me', { headers: bearer(alice.id_token!) });
      expect(idToken.status).toBe(200);
      expect(idToken.body).toMatchObject({ kind: 'oauth', email: 'alice@example.test', name: 'Alice Liddell', orgs: [] });
      const flat = await signToken(provider, {
        aud: CLIENT_ID,
        sub: 'dave',
        email: 'dave@example.test',
        name: 'Dave',
        org_id: 'org_42',
        org_name: 'Forty Two',
        org_role: 'owner',
      });
      const me = await plain.request('GET', '/api/cli/me', { headers: bearer(flat) });
      expect(me.body).toMatchObject({ email: 'dave@example.test', orgs: [{ slug: 'forty-two', name: 'Forty Two' }] });
      const orgs = await plain.request('GET', '/api/orgs', { headers: bearer(flat) });
      expect(orgs.body.orgs[0].role).toBe('owner');
    } finally {
      await plain.close();
    }
  });

  it('with authorized_parties: azp, or the client_id of a JWT access token, must be listed', async () => {
    const strict = await startApp(oidcToml(provider.issuer, `${CLERK_STYLE}\nauthorized_parties = ["https://dashboard.example"]`));
    try {
      // The device-flow token names client_id wharf-cli, which is not listed.
      const cli = await strict.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) });
      expect(cli.status).toBe(401);
      expect(cli.body).toStrictEqual(INVALID);
      const listed = await signToken(provider, { sub: 'alice', azp: 'https://dashboard.example' });
      expect((await strict.request('GET', '/api/cli/me', { headers: { cookie: `__session=${listed}` } })).status).toBe(200);
      const other = await signToken(provider, { sub: 'alice', azp: 'https://evil.example' });
      expect((await strict.request('GET', '/api/cli/me', { headers: { cookie: `__session=${other}` } })).status).toBe(401);
    } finally {
      await strict.close();
    }
    const cliAllowed = await startApp(oidcToml(provider.issuer, `${CLERK_STYLE}\nauthorized_parties = ["${CLIENT_ID}"]`));
    try {
      expect((await cliAllowed.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) })).status).toBe(200);
    } finally {
      await cliAllowed.close();
    }
  });

  it('with auto_provision off: known users pass, unknown users get 401 and are not created', async () => {
    // The same database as the main app, where alice already exists.
    const closed = await startApp(oidcToml(provider.issuer, `${CLERK_STYLE}\nauto_provision = false`), { dataDir: app.dataDir });
    try {
      const known = await closed.request('GET', '/api/cli/me', { headers: bearer(alice.access_token) });
      expect(known.status).toBe(200);
      expect(known.body.orgs).toEqual([expect.objectContaining({ slug: 'acme' })]);
      const stranger = await signToken(provider, { sub: 'mallory', email: 'mallory@example.test', o: { id: 'org_mallory', slg: 'mallory' } });
      const res = await closed.request('GET', '/api/cli/me', { headers: bearer(stranger) });
      expect(res.status).toBe(401);
      expect(res.body).toStrictEqual(INVALID);
      expect(await identityOf(closed).findUserByEmail('mallory@example.test')).toBeUndefined();
      expect(await identityOf(closed).getOrg('mallory')).toBeUndefined();
    } finally {
      await closed.close();
    }
  });

  it('answers 401 and logs it when the provider cannot be reached for its keys', async () => {
    const flaky = await startProvider();
    const lonely = await startApp(oidcToml(flaky.issuer, CLERK_STYLE));
    try {
      const token = await signToken(flaky, { sub: 'alice' });
      await flaky.close();
      const res = await lonely.request('GET', '/api/cli/me', { headers: bearer(token) });
      expect(res.status).toBe(401);
      expect(res.body).toStrictEqual(INVALID);
      const warning = lonely.logs.find((l) => l.msg === 'OpenID provider unreachable: credentials cannot be verified and are refused');
      expect(warning).toMatchObject({ level: 'warn', issuer: flaky.issuer });
    } finally {
      await lonely.close();
    }
  });
});

describe('external OIDC mode: start-up errors', () => {
  it('names the issuer when the provider is unreachable', async () => {
    const { server, url } = await listen((_req, res) => res.end());
    await closeServer(server);
    await expect(startApp(oidcToml(url))).rejects.toThrow(
      new RegExp(
        `^plugin "identity" failed to start: OpenID provider ${url}: unreachable, GET ${url}/\\.well-known/openid-configuration failed \\(ECONNREFUSED\\)`,
      ),
    );
  });

  it.each([
    ['not JSON', 200, '<html>hello</html>', /is not JSON/],
    [
      'for another issuer',
      200,
      JSON.stringify({ issuer: 'https://other.example', jwks_uri: 'https://other.example/jwks' }),
      /names issuer "https:\/\/other.example", not the configured one/,
    ],
    ['without jwks_uri', 200, 'ISSUER', /has no http\(s\) jwks_uri/],
    ['missing', 404, 'not found', /answered HTTP 404/],
  ])('names the issuer when the discovery document is %s', async (_label, status, body, message) => {
    let issuer = '';
    const { server, url } = await listen((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body === 'ISSUER' ? JSON.stringify({ issuer }) : body);
    });
    issuer = url;
    try {
      const boot = startApp(oidcToml(url));
      await expect(boot).rejects.toThrow(`plugin "identity" failed to start: OpenID provider ${url}: `);
      await expect(boot).rejects.toThrow(message);
    } finally {
      await closeServer(server);
    }
  });

  // Rules the schema cannot say are the plugin's validate hook: the config is refused before anything starts.
  it('needs plugins.identity.oidc.issuer, an http(s) one', async () => {
    const boot = startApp('[plugins.identity]\nmode = "oidc"\n[plugins.identity.oidc]\nclient_id = "cli"\n');
    await expect(boot).rejects.toThrow(ConfigError);
    await expect(boot).rejects.toThrow(
      'test.toml:3: "plugins.identity.oidc.issuer": required when mode = "oidc": the URL of the OpenID Connect provider (its discovery document is read from <issuer>/.well-known/openid-configuration)',
    );
    await expect(startApp('[plugins.identity]\nmode = "oidc"\n[plugins.identity.oidc]\nissuer = "ftp://idp.example"\nclient_id = "cli"\n')).rejects.toThrow(
      'test.toml:4: "plugins.identity.oidc.issuer": must be an http(s) URL, got "ftp://idp.example"',
    );
  });

  it('needs an audience or a client id', async () => {
    await expect(startApp(`[plugins.identity]\nmode = "oidc"\n[plugins.identity.oidc]\nissuer = "${provider.issuer}"\n`)).rejects.toThrow(
      'test.toml:3: "plugins.identity.oidc.audience": mode = "oidc" needs an audience (the aud value of the tokens Wharf accepts) or oidc.client_id (then the audience)',
    );
  });

  it('announces configured: false without a client id', async () => {
    const noClient = await startApp(`[plugins.identity]\nmode = "oidc"\n[plugins.identity.oidc]\nissuer = "${provider.issuer}"\naudience = ["${API}"]\n`);
    try {
      const res = await noClient.request('GET', '/api/cli/config');
      expect(res.body).toMatchObject({ idpFapiUrl: provider.issuer, oauthClientId: null, configured: false });
    } finally {
      await noClient.close();
    }
  });
});

describe('claim helpers', () => {
  it('reads dotted paths, and claim names that contain dots', () => {
    const claims = { o: { id: 'org_1', rol: 'org:admin' }, 'https://example.com/org': 'ns', flat: 'x', list: ['a'] };
    expect(claimAt(claims, 'o.id')).toBe('org_1');
    expect(claimAt(claims, 'https://example.com/org')).toBe('ns');
    expect(claimAt(claims, 'flat')).toBe('x');
    expect(claimAt(claims, 'o.missing')).toBeUndefined();
    expect(claimAt(claims, 'flat.deeper')).toBeUndefined();
    expect(claimAt(claims, 'list.0')).toBeUndefined();
    expect(claimAt(claims, 'o.__proto__')).toBeUndefined();
  });

  it.each([
    ['owner', 'owner'],
    ['admin', 'admin'],
    ['member', 'member'],
    ['org:admin', 'admin'],
    ['org:member', 'member'],
    ['ORG:ADMIN', 'admin'],
    ['org:billing_manager', 'member'],
    ['', null],
    [undefined, null],
    [['admin'], null],
  ])('maps the role claim %j to %j', (claim, role) => {
    expect(roleFromClaim(claim)).toBe(role);
  });
});
