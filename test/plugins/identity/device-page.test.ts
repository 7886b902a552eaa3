/**
 * The `/device` approval page in a real browser (Debian's Chromium, JavaScript disabled): the
 * command-line side asks for a device code, the browser signs in, picks the organization and
 * approves or denies, and the command-line side then polls /oauth/token.
 */
import { decodeJwt } from 'jose';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { openBrowser, type BrowserSession } from '../../helpers/browser.ts';
import { signIn, type SignedIn } from '../../helpers/identity.ts';

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

let app: TestApp;
let erin: SignedIn;
let labs: { id: string; slug: string; name: string };
const browsers: BrowserSession[] = [];

beforeAll(async () => {
  app = await startApp('', {});
  erin = await signIn(app, { name: 'Erin', orgName: 'Erin Main' });
  const created = await app.request('POST', '/api/orgs', { body: { name: 'Erin Labs' }, headers: erin.headers });
  expect(created.status).toBe(201);
  labs = created.body;
});
afterAll(async () => {
  for (const b of browsers) await b.close();
  await app?.close();
});

async function deviceCode(): Promise<Record<string, any>> {
  const res = await app.request('POST', '/oauth/device/code', { raw: 'client_id=wharf-cli', headers: FORM });
  expect(res.status).toBe(200);
  return res.body;
}

function poll(code: string) {
  return app.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: DEVICE_GRANT, device_code: code, client_id: 'wharf-cli' }).toString(),
    headers: FORM,
  });
}

/**
 * The page the CLI points the user at. Tests listen on a random port while the public URL names
 * port 0, as a reverse proxy's public name would differ: keep the path and query, reach this server.
 */
function reachable(uri: string): string {
  const { pathname, search } = new URL(uri);
  return new URL(pathname + search, app.url).toString();
}

/** A fresh browser profile (no cookies) with JavaScript disabled. */
async function newPage(): Promise<Page> {
  const session = await openBrowser({ javaScriptEnabled: false });
  browsers.push(session);
  const page = await session.context.newPage();
  // The browser really runs no scripts: one that would retitle this page does nothing.
  await page.goto('data:text/html,<title>static</title><script>document.title = "scripted"</script>');
  expect(await page.title()).toBe('static');
  return page;
}

async function text(page: Page): Promise<string> {
  // Playwright's innerText (what a reader sees), not a DOM node's property.
  // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator method, not the DOM property.
  return page.locator('body').innerText();
}

async function signInThroughForm(page: Page, password: string): Promise<void> {
  await page.fill('#email', erin.email);
  await page.fill('#password', password);
  await page.click('button[type=submit]');
  await page.waitForLoadState('load');
}

describe('/device in a browser without JavaScript', () => {
  it('signs in, confirms the code, picks the organization and approves; the CLI then gets its tokens', async () => {
    const code = await deviceCode();
    expect((await poll(code.device_code)).body).toMatchObject({ error: 'authorization_pending' });

    const page = await newPage();
    const opened = await page.goto(reachable(code.verification_uri_complete));
    expect(opened?.status()).toBe(200);
    expect(await page.locator('script').count()).toBe(0);
    expect(await page.locator('form[action="/device"] #password').count()).toBe(1);

    // A wrong password: the sign-in form again, with the error and no hint which part was wrong.
    await signInThroughForm(page, 'not the password at all');
    expect(await text(page)).toContain('Invalid email or password');
    expect(await page.locator('#password').count()).toBe(1);

    await signInThroughForm(page, erin.password);
    expect(new URL(page.url()).pathname).toBe('/device');
    expect(new URL(page.url()).searchParams.get('user_code')).toBe(code.user_code);
    expect(await text(page)).toContain(`Signed in as ${erin.email}`);
    expect(await page.inputValue('#user_code')).toBe(code.user_code);
    const options = await page.locator('#orgId option').allTextContents();
    expect(options).toEqual(expect.arrayContaining([expect.stringContaining('Erin Main'), `Erin Labs (${labs.slug})`]));
    expect(await page.locator('#orgId').inputValue()).toBe(erin.orgId); // the active organization first

    await page.selectOption('#orgId', { label: `Erin Labs (${labs.slug})` });
    await page.click('button[value=approve]');
    await page.waitForLoadState('load');
    const result = await text(page);
    expect(result).toContain('Approved');
    expect(result).toContain('Erin Labs');
    expect(result).toContain('You can close this window');

    const tokens = await poll(code.device_code);
    expect(tokens.status, tokens.text).toBe(200);
    expect(tokens.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, refresh_token: expect.any(String) });
    expect(decodeJwt(tokens.body.access_token)).toMatchObject({ sub: erin.userId, org: labs.id });
    const me = await app.request('GET', '/api/cli/me', { headers: { authorization: `Bearer ${tokens.body.access_token}` } });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ kind: 'oauth', userId: erin.userId, email: erin.email });

    // The code is spent: the page says so to a signed-in user.
    await page.goto(reachable(code.verification_uri_complete));
    expect(await text(page)).toContain('already approved or denied');
  });

  it('shows a bad code with an error, then denies; the CLI hears access_denied', async () => {
    const code = await deviceCode();
    const page = await newPage();
    await page.goto(reachable(code.verification_uri)); // no code in the link: the user types it
    await signInThroughForm(page, erin.password);
    expect(await page.inputValue('#user_code')).toBe('');

    await page.fill('#user_code', 'BCDF-BCDF');
    await page.click('button[value=deny]');
    await page.waitForLoadState('load');
    expect(await text(page)).toContain('Unknown or expired code');
    expect(await page.inputValue('#user_code')).toBe('BCDF-BCDF');

    await page.fill('#user_code', 'aeiou');
    await page.click('button[value=approve]');
    await page.waitForLoadState('load');
    expect(await text(page)).toContain('not a valid code');

    // Typed in lower case without the dash: still the same code.
    await page.fill('#user_code', code.user_code.toLowerCase().replace('-', ' '));
    await page.click('button[value=deny]');
    await page.waitForLoadState('load');
    const result = await text(page);
    expect(result).toContain('Denied');
    expect(result).toContain('You can close this window');

    const res = await poll(code.device_code);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'access_denied' });
  });
});

describe('/device over plain HTTP', () => {
  it('tells nobody signed out whether a code exists: the same sign-in form for any code', async () => {
    const code = await deviceCode();
    const real = await app.fetch(`/device?user_code=${code.user_code}`);
    const bogus = await app.fetch('/device?user_code=BCDF-GHJK');
    expect(real.status).toBe(200);
    expect(bogus.status).toBe(200);
    const [a, b] = [await real.text(), await bogus.text()];
    expect(a.replaceAll(code.user_code, 'CODE')).toBe(b.replaceAll('BCDF-GHJK', 'CODE'));
  });

  it('refuses to be framed or cached', async () => {
    const res = await app.fetch('/device');
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('refuses a cross-site form post, even with a valid cookie, and leaves the code pending', async () => {
    const code = await deviceCode();
    const res = await app.fetch('/device', {
      method: 'POST',
      headers: { ...FORM, cookie: erin.cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      body: new URLSearchParams({ action: 'approve', user_code: code.user_code, orgId: erin.orgId }).toString(),
    });
    expect(res.status).toBe(403);
    expect((await poll(code.device_code)).body).toMatchObject({ error: 'authorization_pending' });
  });

  it('signs out from the page: the sign-in form again, and the old cookie no longer works', async () => {
    const frank = await signIn(app, { orgName: 'Frank Org' });
    const before = await app.fetch('/device', { headers: { cookie: frank.cookie } });
    expect(await before.text()).toContain(`Signed in as <strong>${frank.email}</strong>`);
    const out = await app.fetch('/device', {
      method: 'POST',
      headers: { ...FORM, ...frank.headers },
      body: new URLSearchParams({ action: 'signout', user_code: 'BCDF-GHJK' }).toString(),
    });
    expect(out.status).toBe(200);
    expect(out.headers.getSetCookie().some((c) => /^__session=;/.test(c))).toBe(true);
    expect(await out.text()).toContain('name="password"');
    const after = await app.fetch('/device', { headers: { cookie: frank.cookie } });
    const page = await after.text();
    expect(page).toContain('name="password"');
    expect(page).not.toContain('Signed in as');
  });

  it('asks a signed-out approval to sign in first, and refuses an organization the user is not in', async () => {
    const code = await deviceCode();
    const signedOut = await app.fetch('/device', {
      method: 'POST',
      headers: { ...FORM, origin: app.url },
      body: new URLSearchParams({ action: 'approve', user_code: code.user_code, orgId: erin.orgId }).toString(),
    });
    expect(signedOut.status).toBe(401);
    expect(await signedOut.text()).toContain('Sign in first');

    const stranger = await signIn(app, { orgName: 'Not Erin' });
    const res = await app.fetch('/device', {
      method: 'POST',
      headers: { ...FORM, ...erin.headers },
      body: new URLSearchParams({ action: 'approve', user_code: code.user_code, orgId: stranger.orgId }).toString(),
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('Not a member of that organization');
    expect((await poll(code.device_code)).body).toMatchObject({ error: 'authorization_pending' });
  });
});
