/**
 * The dashboard with identity from an external OpenID Connect provider (npm `oidc-provider`,
 * started here on loopback), in a real browser: /login sends the user to the provider's own
 * sign-in (authorization code with PKCE), the token it issues comes back into the `__session`
 * cookie, and the dashboard then works on the public API like in built-in mode; sign-out forgets
 * the token.
 */
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider from 'oidc-provider';
import { errors as providerErrors } from 'oidc-provider';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { type BrowserSession, openBrowser } from '../../helpers/browser.ts';
import { heading, inner, shot, text } from './helpers.ts';

const API = 'https://wharf.test/api';
const CLIENT_ID = 'wharf-dashboard';

const people: Record<string, { email: string; name: string; org: { id: string; slg: string; rol: string } }> = {
  grace: { email: 'grace@example.test', name: 'Grace Hopper', org: { id: 'org_navy', slg: 'navy', rol: 'org:admin' } },
};

let server: http.Server;
let issuer: string;
let app: TestApp;
let browser: BrowserSession;
let page: Page;

/** A provider for `issuer` whose public client may redirect to `redirectUris`. */
async function provider(key: JWK & { kid: string }, redirectUris: string[]): Promise<Provider> {
  return new Provider(issuer, {
    clients: [
      { client_id: CLIENT_ID, token_endpoint_auth_method: 'none', grant_types: ['authorization_code'], response_types: ['code'], redirect_uris: redirectUris },
    ],
    jwks: { keys: [{ ...key, alg: 'RS256', use: 'sig' }] },
    cookies: { keys: ['oidc-dashboard-test-key'] },
    scopes: ['openid', 'email', 'profile'],
    claims: { openid: ['sub'], email: ['email'], profile: ['name'] },
    features: {
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
      return person ? { accountId: id, claims: async () => ({ sub: id, email: person.email, name: person.name }) } : undefined;
    },
    async extraTokenClaims(_ctx: unknown, token: { kind: string; accountId?: string }) {
      const person = token.accountId ? people[token.accountId] : undefined;
      return token.kind === 'AccessToken' && person ? { email: person.email, name: person.name, o: person.org } : undefined;
    },
  } as never);
}

beforeAll(async () => {
  let handler: http.RequestListener = (_req, res) => res.end();
  server = http.createServer((req, res) => handler(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const key = { ...(await exportJWK(privateKey)), kid: 'dashboard-test-key' } as JWK & { kid: string };
  // Wharf reads the provider's discovery document when it starts; the dashboard's redirect URI
  // names Wharf's port, known once it has started: the same provider (issuer, key) is made again with it.
  handler = (await provider(key, ['http://127.0.0.1/login'])).callback();
  app = await startApp(`[plugins.identity]
mode = "oidc"
[plugins.identity.oidc]
issuer = "${issuer}"
client_id = "${CLIENT_ID}"
audience = ["${API}"]
org_claim = "o.id"
org_name_claim = "o.slg"
org_role_claim = "o.rol"
[plugins.dashboard.oidc]
resource = "${API}"
`);
  handler = (await provider(key, [`${app.url}/login`])).callback();
  browser = await openBrowser({ viewport: { width: 1280, height: 900 } });
  page = browser.context.pages()[0] ?? (await browser.context.newPage());
  page.setDefaultTimeout(10_000);
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  server?.closeAllConnections();
  server?.close();
});

describe('the dashboard with an external OpenID Connect provider', () => {
  it("signs in through the provider's own page and comes back signed in, in the organization its token names", async () => {
    await page.goto(`${app.url}/#/apps`);
    await page.waitForURL(/\/login\?next=/);
    const host = new URL(issuer).host;
    await expect.poll(() => text(page)).toContain(`This Wharf signs users in with ${host}`);
    // Wharf's own device page is built-in identity's: not offered here.
    expect(await page.locator('a[href="/device"]').count()).toBe(0);
    await shot(page, 'oidc-01-login');
    await page.getByRole('button', { name: `Sign in with ${host}` }).click();
    // The provider's pages (oidc-provider's development sign-in and consent).
    await page.waitForURL(new RegExp(`^${issuer}/interaction/`));
    await page.locator('input[name=login]').fill('grace');
    await page.locator('input[name=password]').fill('anything');
    await page.locator('button[type=submit]').click();
    await page.getByRole('button', { name: 'Continue' }).click();
    // Back at Wharf, on the page asked for.
    await page.waitForURL(`${app.url}/#/apps`);
    await expect.poll(() => heading(page)).toBe('Apps');
    await expect.poll(() => text(page, 'header')).toContain('Grace Hopper');
    expect(await inner(page.locator('.org-switch select option:checked'))).toBe('navy');
    const cookie = (await browser.context.cookies(app.url)).find((c) => c.name === '__session');
    expect(cookie?.value.split('.')).toHaveLength(3);
    const me = await app.request('GET', '/api/cli/me', { headers: { cookie: `__session=${cookie!.value}` } });
    expect(me.body).toMatchObject({ kind: 'session', email: 'grace@example.test' });
  }, 90_000);

  it('works on the API with that cookie: creates an app in the organization', async () => {
    const form = page.getByRole('region', { name: 'Create an app', exact: true });
    await form.getByLabel('Name').fill('Navy files');
    await form.getByRole('button', { name: 'Create app' }).click();
    await expect.poll(() => heading(page)).toBe('Navy files');
    await shot(page, 'oidc-02-app');
    const cookie = (await browser.context.cookies(app.url)).find((c) => c.name === '__session')!;
    const apps = await app.request('GET', '/api/apps', { headers: { cookie: `__session=${cookie.value}` } });
    expect(apps.body.apps.map((a: { name: string }) => a.name)).toEqual(['Navy files']);
    // Invitations are the provider's business in this mode: the page does not offer them.
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Organization', exact: true }).click();
    await expect.poll(() => text(page)).toContain('Members');
    expect(await text(page)).not.toContain('Invitations');
    expect(await page.locator('a[href="/device"]').count()).toBe(0);
  }, 60_000);

  it('signs out by forgetting the token', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/login$/);
    expect((await browser.context.cookies(app.url)).find((c) => c.name === '__session')).toBeUndefined();
    await page.goto(`${app.url}/#/apps`);
    await page.waitForURL(/\/login\?next=/);
  }, 60_000);
});
