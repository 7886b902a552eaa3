/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core), against a whole
 * Wharf on loopback with its embedded object store and a real webhook receiver: a user's first
 * hour, in order. Sign in; create an app; create a token and read it once; upload two files with
 * progress and see them listed; search; download one and compare the bytes; delete one and many;
 * create a sandbox session, point its webhook at the receiver, make it receive a message, see the
 * delivery with every attempt, redeliver it; personal access tokens; switch and create
 * organizations; API errors shown in place; sign out. Each page is saved under
 * test-output/screenshots/.
 */
import { AbortMultipartUploadCommand, CreateMultipartUploadCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { execFileSync } from 'node:child_process';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import encodeQR from 'qr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { type BrowserSession, openBrowser } from '../../helpers/browser.ts';
import { ensureDebianTool } from '../../helpers/debian.ts';
import { signIn } from '../../helpers/identity.ts';
import type { NetworkAdapter, NetworkHost } from '../../../plugins/sessions/networks/types.ts';
import type { Sessions } from '../../../plugins/sessions/service.ts';
import { answer, Receiver } from '../webhooks/helpers.ts';
import { DISPLAY_NAME_MAX, ORG_SLUG_MAX, STORAGE_LIMIT_MAX } from '../../../core/limits.ts';
import { asBrowser, eventually, heading, inner, SCREENSHOTS, shot, text } from './helpers.ts';

const EMAIL = 'ada@example.test';
const PASSWORD = 'correct horse battery staple';
const MiB = 1024 * 1024;

let app: TestApp;
let receiver: Receiver;
let browser: BrowserSession;
let context: BrowserContext;
let page: Page;
let orgId: string;
/** An app token kept for the end, to ask where the store is. */
let storeToken: string;
const errors: string[] = [];
/** Every origin the page sent a request to. */
const origins = new Set<string>();

beforeAll(async () => {
  app = await startApp(
    `[plugins.identity]
scrypt_cost = 1024
[plugins.webhooks]
allow_private_networks = true
retry_schedule_seconds = [0.5]
retry_jitter = 0
timeout_ms = 2000
`,
  );
  receiver = await Receiver.start();
  browser = await openBrowser({ viewport: { width: 1280, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'], acceptDownloads: true });
  context = browser.context;
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(10_000);
  // Anything the page logs as an error, or throws, fails the run at the end.
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  context.on('request', (req) => {
    if (/^https?:/.test(req.url())) origins.add(new URL(req.url()).origin);
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await app?.close();
});

/** A link of the dashboard's navigation. */
const nav = (name: string) => page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name, exact: true });
/** The section of the page whose heading is `name`. */
const region = (name: string) => page.getByRole('region', { name, exact: true });

async function api(method: string, path: string, body?: unknown) {
  return app.request(method, path, { ...(body === undefined ? {} : { body }), headers: await asBrowser(context, app) });
}

describe('the dashboard, first hour', () => {
  let appId: string;
  let token: string;
  const small = Buffer.from('one small file, for the search\n'.repeat(40));
  const large = randomBytes(2 * MiB + 123);

  it('goes from the setup link serve printed to the dashboard, signed in as the first owner', async () => {
    const link = /https?:\/\/\S+\/setup\?token=\S+/.exec(app.running.notices.join('\n'))?.[0];
    expect(link).toBeDefined();
    // The link names the public URL; the test server listens on it.
    await page.goto(link!);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Name', { exact: true }).fill('Ada Lovelace');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Organization name').fill('Analytical Engines');
    await page.getByRole('button').click();
    await expect.poll(() => text(page, 'body')).toContain('Wharf is ready');
    // The command works from the quick start (npx), and an option never breaks after its dashes.
    expect(await text(page, 'body')).toContain(`npx wharf login --instance ${app.url}`);
    const option = "[...document.querySelectorAll('code.command span')].find((s) => s.textContent === '--instance')";
    expect(await page.evaluate(`getComputedStyle(${option}).whiteSpace`)).toBe('nowrap');
    await shot(page, '00-setup-ready');
    await page.getByRole('link', { name: 'Open the dashboard' }).click();
    await expect.poll(() => heading(page)).toBe('Analytical Engines');
    await expect.poll(() => text(page)).toContain('No apps yet');
    await shot(page, '02-overview-empty');
    const session = (await api('GET', '/auth/session')).body;
    expect(session.user.email).toBe(EMAIL);
    orgId = session.activeOrgId;
    expect(session.orgs).toMatchObject([{ id: orgId, name: 'Analytical Engines', role: 'owner' }]);
  }, 60_000);

  it('creates an app with a storage limit', async () => {
    await nav('Apps').click();
    const form = region('Create an app');
    await form.getByLabel('Name').fill('Photos');
    await form.getByLabel('Storage limit').fill('5');
    await form.getByLabel('Unit').selectOption('MiB');
    await form.getByRole('button', { name: 'Create app' }).click();
    await expect.poll(() => heading(page)).toBe('Photos');
    appId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    const { body } = await api('GET', `/api/apps?appId=${appId}`);
    expect(body.app).toMatchObject({ name: 'Photos', storageLimit: 5 * MiB, teamId: orgId });
    await expect.poll(() => text(page, '.facts')).toContain('0 B of 5.0 MiB');
    await nav('Apps').click();
    await expect.poll(() => text(page)).toContain(body.app.bucketName);
    await shot(page, '03-apps');
  }, 60_000);

  it("refuses, in place, a storage limit the server would misread, and holds names to the server's length", async () => {
    const form = region('Create an app');
    const alert = form.getByRole('alert');
    await form.getByLabel('Name').fill('Limits');
    await form.getByLabel('Unit').selectOption('TiB');
    await form.getByLabel('Storage limit').fill('1e30');
    await form.getByRole('button', { name: 'Create app' }).click();
    await expect.poll(() => inner(alert)).toContain(`too big: at most ${STORAGE_LIMIT_MAX.toLocaleString('en')} bytes (8.00 PiB)`);
    await form.getByLabel('Unit').selectOption('MiB');
    await form.getByLabel('Storage limit').fill('0.0000001');
    await form.getByRole('button', { name: 'Create app' }).click();
    await expect.poll(() => inner(alert)).toContain('under one byte');
    expect((await api('GET', '/api/apps')).body.apps.map((a: { name: string }) => a.name)).toEqual(['Photos']);
    // The server says the same of a number past its maximum: too big, and how big it may be.
    const huge = await api('POST', '/api/apps', { name: 'Limits', storageLimit: 1e30 });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toBe(`storageLimit: is too big: at most ${STORAGE_LIMIT_MAX} bytes (8 PiB)`);
    // The form's name length is the server's: the longest it allows, and not one more.
    expect(await form.getByLabel('Name').getAttribute('maxlength')).toBe(String(DISPLAY_NAME_MAX));
    expect((await api('PATCH', '/api/apps', { appId, name: 'x'.repeat(DISPLAY_NAME_MAX + 1) })).status).toBe(400);
    expect((await api('PATCH', '/api/apps', { appId, name: 'x'.repeat(DISPLAY_NAME_MAX) })).status).toBe(200);
    expect((await api('PATCH', '/api/apps', { appId, name: 'Photos' })).status).toBe(200);
    await form.getByLabel('Storage limit').fill('');
  }, 60_000);

  it('creates an API token, shows it once with a copy button, then lists only its prefix', async () => {
    await page.getByRole('link', { name: 'Photos', exact: true }).click();
    const tokens = region('API tokens');
    await tokens.getByLabel('Token name').fill('backend');
    await tokens.getByRole('button', { name: 'Create token' }).click();
    const shown = tokens.getByTestId('shown-once');
    await expect.poll(() => inner(shown)).toMatch(/^svc_live_[A-Za-z0-9_-]{43}$/);
    token = await inner(shown);
    storeToken = token;
    await tokens.getByRole('button', { name: 'Copy', exact: true }).click();
    await expect.poll(() => tokens.getByRole('button', { name: 'Copied', exact: true }).isVisible()).toBe(true);
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(token);
    // The token works: it is what the API handed out.
    const validated = await app.request('POST', '/api/tokens/validate', { body: { token } });
    expect(validated.body).toMatchObject({ valid: true, appId });
    await expect.poll(() => text(page, 'table')).toContain(`${token.slice(0, 12)}`);
    await shot(page, '04-app-token-once');
    await tokens.getByRole('button', { name: 'I have copied it' }).click();
    await page.reload();
    await expect.poll(() => region('API tokens').getByRole('cell', { name: 'backend', exact: true }).isVisible()).toBe(true);
    expect(await page.content()).not.toContain(token);
  }, 60_000);

  it('shows the storage connection details an SDK gets for the token', async () => {
    const connection = region('Connection details for SDKs');
    await connection.getByLabel('API token').fill(token);
    await connection.getByRole('button', { name: 'Show storage details' }).click();
    await expect.poll(() => text(page, '#connection')).toContain('S3_BUCKET=wharf-');
    const details = (await app.request('POST', '/api/tokens/validate', { body: { token } })).body.storage;
    const block = await text(page, '#connection pre');
    expect(block).toContain(`S3_ACCESS_KEY=${details.accessKey}`);
    expect(block).toContain(`S3_ENDPOINT=http://${details.endPoint}:${details.port}`);
    // Secrets stay masked until asked for.
    expect(block).not.toContain(details.secretKey);
    await connection.getByRole('button', { name: 'Reveal secrets' }).click();
    expect(await text(page, '#connection pre')).toContain(`S3_SECRET_KEY=${details.secretKey}`);
  }, 60_000);

  it('uploads two files straight to the store, with a progress bar each, and lists them', async () => {
    // A slow uplink, so the progress of the larger file is seen between empty and full.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 1 * MiB });
    // The larger file first: the small one, sent beside it rather than after it, is done while
    // the larger one is still on its way.
    await page.getByLabel('Choose files to upload').setInputFiles([
      { name: 'big-photo.bin', mimeType: 'application/octet-stream', buffer: large },
      { name: 'notes.txt', mimeType: 'text/plain', buffer: small },
    ]);
    const bar = page.getByRole('progressbar', { name: 'Upload of big-photo.bin' });
    const midway = await eventually(
      async () => {
        const value = Number(await bar.getAttribute('value'));
        const smallDone = /notes\.txt\s+done/.test(await text(page, '.uploads'));
        return smallDone && value > 0 && value < large.length ? value : 0;
      },
      15_000,
      'the small file done while the large one is partly sent',
    );
    expect(midway).toBeGreaterThan(0);
    await shot(page, '05-upload-in-progress');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await expect.poll(() => text(page, '.uploads'), { timeout: 20_000 }).toMatch(/big-photo\.bin\s+done, 2\.0 MiB/);
    expect(await text(page, '.uploads')).toMatch(/notes\.txt\s+done/);
    expect(Number(await bar.getAttribute('value'))).toBe(large.length);
    await expect.poll(() => text(page, '#files table')).toContain('big-photo.bin');
    expect(await text(page, '#files table')).toContain('notes.txt');
    const listed = (await api('GET', `/api/files?appId=${appId}`)).body.files;
    expect(listed.map((f: { name: string; size: number }) => [f.name, f.size]).sort()).toEqual([
      ['big-photo.bin', large.length],
      ['notes.txt', small.length],
    ]);
    await expect.poll(() => text(page, '.facts')).toContain('2 files');
    await shot(page, '06-app-files');
    // The README's picture (docs/dashboard.png is a copy): this whole page at laptop size, as its
    // caption says: the files, the API token, the connection details (secrets hidden).
    await page.getByRole('button', { name: 'Hide secrets' }).click();
    await page.setViewportSize({ width: 1100, height: 760 });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'readme-app.png'), fullPage: true, animations: 'disabled' });
    await page.setViewportSize({ width: 1280, height: 900 });
  }, 90_000);

  it('searches the names', async () => {
    await page.getByLabel('Search names').fill('notes');
    await expect.poll(() => page.locator('#files tbody tr').count()).toBe(1);
    expect(await text(page, '#files tbody')).toContain('notes.txt');
    await page.getByLabel('Search names').fill('nothing-like-this');
    await expect.poll(() => text(page, '#files')).toContain('No file name contains “nothing-like-this”');
    await shot(page, '07-files-search');
    // A term the API refuses (over 1024 characters): its error, and not the last term's rows beside it.
    await page.getByLabel('Search names').fill('notes');
    await expect.poll(() => page.locator('#files tbody tr').count()).toBe(1);
    await page.getByLabel('Search names').fill('n'.repeat(1025));
    await expect.poll(() => text(page, '#files')).toContain('search: must be at most 1024 characters');
    expect(await page.locator('#files tbody tr').count()).toBe(0);
    await page.getByLabel('Search names').fill('');
    await expect.poll(() => page.locator('#files tbody tr').count()).toBe(2);
  }, 60_000);

  it('downloads a file with the bytes that were uploaded', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download big-photo.bin' }).click()]);
    expect(download.suggestedFilename()).toBe('big-photo.bin');
    const bytes = fs.readFileSync(await download.path());
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(createHash('sha256').update(large).digest('hex'));
  }, 60_000);

  it('refuses an upload over the storage limit and says why, on that file', async () => {
    await page
      .getByLabel('Choose files to upload')
      .setInputFiles([{ name: 'too-big.bin', mimeType: 'application/octet-stream', buffer: randomBytes(4 * MiB) }]);
    await expect.poll(() => text(page, '.uploads')).toMatch(/too-big\.bin\s+failed: .*storage limit/i);
    expect((await api('GET', `/api/files?appId=${appId}`)).body.pagination.total).toBe(2);
  }, 60_000);

  it('shows the bytes of an unfinished multipart upload apart from the files, until it is aborted', async () => {
    const { bucketName: Bucket, storage } = (await app.request('POST', '/api/tokens/validate', { body: { token: storeToken } })).body;
    const s3 = new S3Client({
      endpoint: `http://${storage.endPoint}:${storage.port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: storage.accessKey, secretAccessKey: storage.secretKey },
    });
    try {
      const Key = 'unfinished.bin';
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
      await s3.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: randomBytes(MiB) }));
      await page.reload();
      await expect.poll(() => text(page, '.facts')).toContain('2 files, plus 1.0 MiB in unfinished multipart uploads');
      await s3.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }));
      await page.reload();
      await expect.poll(() => text(page, '.facts')).toContain('2 files');
      expect(await text(page, '.facts')).not.toContain('unfinished');
    } finally {
      s3.destroy();
    }
  }, 60_000);

  it('deletes one file, then several at once', async () => {
    await page.getByLabel('Choose files to upload').setInputFiles([{ name: 'third.txt', mimeType: 'text/plain', buffer: Buffer.from('third') }]);
    await expect.poll(() => page.locator('#files tbody tr').count()).toBe(3);
    await page.getByRole('button', { name: 'Delete notes.txt' }).click();
    const dialog = page.getByRole('dialog');
    await expect.poll(() => inner(dialog)).toContain('Delete notes.txt?');
    // The focus starts on Cancel: Enter alone keeps the file.
    expect(await page.evaluate('document.activeElement?.textContent?.trim()')).toBe('Cancel');
    await page.keyboard.press('Enter');
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect(await page.locator('#files tbody tr').count()).toBe(3);
    await page.getByRole('button', { name: 'Delete notes.txt' }).click();
    await expect.poll(() => inner(dialog)).toContain('Delete notes.txt?');
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => page.locator('#files tbody tr').count()).toBe(2);
    await page.getByLabel('Select every file on this page').check();
    await page.getByRole('button', { name: 'Delete selected (2)' }).click();
    await expect.poll(() => inner(dialog)).toContain('Delete 2 files?');
    await shot(page, '08-delete-files-dialog');
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => text(page, '#files')).toContain('No files yet');
    expect((await api('GET', `/api/files?appId=${appId}`)).body.files).toEqual([]);
  }, 60_000);
});

describe('the dashboard, messaging', () => {
  let sessionId: number;

  it('creates a sandbox session, connected at once, and follows its status live', async () => {
    await nav('Messaging').click();
    await expect.poll(() => heading(page)).toBe('Messaging sessions');
    const form = region('Create a session');
    await form.getByLabel('Sandbox').check();
    await form.getByLabel('Name').fill('Support line');
    await form.getByRole('button', { name: 'Create session' }).click();
    await expect.poll(() => heading(page)).toBe('Support line');
    sessionId = Number(new URL(page.url()).hash.split('/')[2]);
    await expect.poll(() => text(page, '[data-testid=session-status]')).toBe('Connected');
    await expect.poll(() => text(page, '.facts')).toContain('Live');
    // What the network answers is said in place: a sandbox stays connected.
    await region('Connection').getByRole('button', { name: 'Disconnect' }).click();
    await expect.poll(() => text(page, '#connection')).toContain('Sandbox sessions are always connected; disconnect does nothing');
    expect(await text(page, '[data-testid=session-status]')).toBe('Connected');
  }, 60_000);

  it('sets the webhook to a local receiver: URL, enabled, picked events, signing; errors from the API in place', async () => {
    const hook = region('Webhook');
    await hook.getByLabel('URL').fill('ftp://files.example.com/hook');
    await hook.getByLabel('Enabled').check();
    await hook.getByLabel('Only these:').check();
    // The picker lists the 22 names the API lists.
    await expect.poll(() => hook.locator('input[name=event]').count()).toBe(22);
    // "Only these" with nothing ticked is refused in place: the API reads [] as every event.
    await hook.getByLabel('URL').fill(receiver.url('/wharf'));
    await hook.getByRole('button', { name: 'Save webhook settings' }).click();
    await expect.poll(() => text(page, '#webhook [role=alert]')).toContain('tick at least one event');
    expect(await text(page, '#webhook')).not.toContain('Saved.');
    const unsaved = (await api('GET', `/api/whatsapp-sessions/${sessionId}`)).body.data;
    expect(unsaved.webhook_url).not.toBe(receiver.url('/wharf'));
    expect(unsaved.webhook_events).not.toEqual([]);
    await hook.getByLabel('URL').fill('ftp://files.example.com/hook');
    await hook.getByLabel('messages.received').check();
    await hook.getByLabel('messages-personal').check();
    await expect.poll(() => text(page, '#webhook')).toContain('will be delivered twice');
    await hook.getByLabel('messages-personal').uncheck();
    await hook.getByRole('button', { name: 'Save webhook settings' }).click();
    await expect.poll(() => text(page, '#webhook [role=alert]')).toContain('webhook_url: must be an http or https URL');
    // Said once: the server's message already names the field.
    expect(await text(page, '#webhook [role=alert]')).not.toContain('webhook_url: webhook_url');
    await hook.getByLabel('URL').fill(receiver.url('/wharf'));
    await hook.getByLabel('Signing').selectOption('hmac');
    await hook.getByRole('button', { name: 'Save webhook settings' }).click();
    await expect.poll(() => text(page, '#webhook')).toContain('Saved.');
    const { body } = await api('GET', `/api/whatsapp-sessions/${sessionId}`);
    expect(body.data).toMatchObject({ webhook_url: receiver.url('/wharf'), webhook_enabled: true, webhook_events: ['messages.received'] });
    expect((await api('GET', `/api/whatsapp-sessions/${sessionId}/webhook-signing`)).body.data.mode).toBe('hmac');
    await shot(page, '09-session');
  }, 60_000);

  it('makes the sandbox receive a message; the receiver gets it, signed; the delivery shows every attempt', async () => {
    // The first attempt fails, the retry succeeds: both are on the record.
    let calls = 0;
    receiver.behaviour = (req, res, received) => {
      calls++;
      answer(calls === 1 ? 500 : 200, calls === 1 ? 'try again' : 'ok')(req, res, received);
    };
    const form = region('Receive a message');
    await form.getByLabel('From').fill('+14155550199');
    await form.getByLabel('Text').fill('Is the engine ready?');
    await form.getByRole('button', { name: 'Receive it' }).click();
    await expect.poll(() => text(page, '#receive')).toContain('Received: message');
    const [first, second] = await receiver.waitFor(2, 15_000);
    expect(first!.json).toMatchObject({ event: 'messages.received', sessionId, data: { message: { conversation: 'Is the engine ready?' } } });
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    // HMAC signing, with the secret the page shows.
    await region('Webhook').getByRole('button', { name: 'Reveal', exact: true }).click();
    const secret = (await inner(page.locator('#webhook [data-secret=shown]'))).trim();
    expect(second!.headers['x-webhook-signature']).toBe(createHmac('sha256', secret).update(second!.body).digest('hex'));

    await page.getByRole('link', { name: 'See its deliveries' }).click();
    await expect.poll(() => heading(page)).toBe('Webhook deliveries');
    await expect.poll(() => text(page, 'table'), { timeout: 15_000 }).toMatch(/messages\.received\s+Support line\s+Delivered\s+2 of 5\s+HTTP 200/);
    await shot(page, '10-deliveries');
    await page.locator('table a').first().click();
    await expect.poll(() => text(page, '#main')).toContain('Attempts');
    const attempts = await text(page, 'table');
    expect(attempts).toMatch(/1\s.*HTTP 500\s+try again/);
    expect(attempts).toMatch(/2\s.*HTTP 200\s+ok/);
    expect(await text(page, 'pre')).toContain('Is the engine ready?');
    // The session by its name, not its number.
    await expect.poll(() => text(page, 'dl.kv')).toMatch(/Session\s+Support line/);
    await shot(page, '11-dispatch');
  }, 60_000);

  it('redelivers a dispatch: a new series with the same webhook-id, shown as redelivering the first', async () => {
    const firstId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    await page.getByRole('button', { name: 'Redeliver' }).click();
    await expect.poll(() => new URL(page.url()).hash).not.toBe(`#/deliveries/${firstId}`);
    const [, , third] = await receiver.waitFor(3, 10_000);
    expect(third!.headers['webhook-id']).toBe(receiver.requests[0]!.headers['webhook-id']);
    // The new dispatch's own record, not the first one's left on screen.
    await expect.poll(() => text(page, '#main'), { timeout: 15_000 }).toMatch(new RegExp(`Redelivers\\s+#${firstId}`));
    await expect.poll(() => text(page, '.title-row'), { timeout: 15_000 }).toContain('Delivered');
    expect(await text(page, 'dl')).toMatch(/Attempts\s+1 of 5/);
  }, 60_000);

  it('filters deliveries by status and session', async () => {
    await page.goto(`${app.url}/#/deliveries?status=abandoned`);
    await expect.poll(() => text(page)).toContain('No dispatch records match.');
    await page.getByLabel('Status', { exact: true }).selectOption('delivered');
    await page.getByLabel('Session', { exact: true }).selectOption(String(sessionId));
    await expect.poll(() => page.locator('tbody tr').count()).toBe(2);
    expect(new URL(page.url()).hash).toBe(`#/deliveries?status=delivered&session=${sessionId}`);
  }, 60_000);

  it('shows message and audit logs of the session', async () => {
    await page.goto(`${app.url}/#/sessions/${sessionId}`);
    const logs = region('Logs');
    // The Messages log (shown first) lists what the session sent, and says where received messages go instead:
    // this one has received a message and sent none.
    await expect
      .poll(() => text(page, '#logs'))
      .toMatch(/Messages this session sent\. Messages it receives are not listed here: they are delivered to its webhook.*No messages sent yet\./s);
    await logs.getByRole('tab', { name: 'Audit' }).click();
    await expect.poll(() => text(page, '#logs')).toContain('session.updated');
    expect(await text(page, '#logs')).toContain('session.created');
    // Who did it, by name: the person signed in, and the session's own API key; no ids.
    const by = await page.locator('#logs td[data-label=By]').allInnerTexts();
    expect(by).toContain('Ada Lovelace');
    expect(by.join('\n')).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-|sessionKey|^session /m);
    await logs.getByRole('tab', { name: 'Connection' }).click();
    await expect.poll(() => text(page, '#logs')).toContain('sandbox session created');
  }, 60_000);

  it('reveals, copies and regenerates the API key; the old key stops working', async () => {
    const key = region('API key');
    await key.getByRole('button', { name: 'Reveal', exact: true }).click();
    const old = (await inner(page.locator('#api-key [data-secret=shown]'))).trim();
    expect(old).toMatch(/^wsk_/);
    await key.getByRole('button', { name: 'Copy', exact: true }).click();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(old);
    await key.getByRole('button', { name: 'Regenerate' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Regenerate' }).click();
    await expect.poll(async () => (await inner(page.locator('#api-key [data-secret=shown]'))).trim()).not.toBe(old);
    expect((await app.request('GET', '/api/status', { headers: { authorization: `Bearer ${old}` } })).status).toBe(401);
  }, 60_000);
});

describe('the dashboard, pairing a WhatsApp session', () => {
  // The live WhatsApp network cannot run here: a stand-in adapter pairs by QR code through the
  // same host calls a real one makes, so the page's QR code and live status are the real thing.
  let host: NetworkHost;
  let pairingQr = 'wharf-pairing-1';
  let sessionId: number;

  beforeAll(() => {
    const service = app.running.services.sessions as unknown as Sessions;
    service.registerNetwork('whatsapp', (h) => {
      host = h;
      const adapter: Partial<NetworkAdapter> = {
        name: 'whatsapp',
        capabilities: { pairing: ['qr'], receive: false },
        async connect(session) {
          await host.setStatus(session.id, 'need_scan');
          return { status: 'need_scan', qrCode: pairingQr };
        },
        qrCode: async () => ({ qrCode: pairingQr, qrImage: `data:image/gif;base64,${Buffer.from(encodeQR(pairingQr, 'gif')).toString('base64')}` }),
        async disconnect(session) {
          await host.setStatus(session.id, 'disconnected');
          return { status: 'disconnected' };
        },
        forget: async () => {},
      };
      return adapter as NetworkAdapter;
    });
  });

  async function decodeQr(): Promise<string> {
    const zbarimg = await ensureDebianTool('/usr/bin/zbarimg', 'zbar-tools');
    const file = await shot(page, '12-qr-page');
    const png = file.replace('12-qr-page', 'qr-code');
    await page.locator('canvas.qr').screenshot({ path: png });
    return execFileSync(zbarimg, ['--raw', '-q', png]).toString().trim();
  }

  it('creates a WhatsApp session, shows the pairing QR code on connect and follows it as it changes', async () => {
    await nav('Messaging').click();
    const form = region('Create a session');
    await form.getByLabel('WhatsApp').check();
    await form.getByLabel('Name').fill('Sales phone');
    await form.getByLabel('Phone number').fill('+442071838750');
    await form.getByRole('button', { name: 'Create session' }).click();
    await expect.poll(() => heading(page)).toBe('Sales phone');
    sessionId = Number(new URL(page.url()).hash.split('/')[2]);
    await expect.poll(() => text(page, '[data-testid=session-status]')).toBe('Disconnected');
    await expect.poll(() => text(page, '.facts')).toContain('Live');

    await region('Connection').getByRole('button', { name: 'Connect', exact: true }).click();
    await expect.poll(() => page.locator('canvas.qr').count()).toBe(1);
    await expect.poll(() => text(page, '[data-testid=session-status]')).toBe('Waiting for scan');
    expect(await decodeQr()).toBe('wharf-pairing-1');

    // The network rotates the code: the page follows (qrcode.updated over the live stream).
    pairingQr = 'wharf-pairing-2';
    await host.qrUpdated(sessionId, pairingQr);
    await expect.poll(() => page.locator('canvas.qr').getAttribute('data-qr')).toBe('wharf-pairing-2');
    expect(await decodeQr()).toBe('wharf-pairing-2');

    // Scanned: connected, and the code goes away.
    await host.setStatus(sessionId, 'connected', 'paired');
    await expect.poll(() => text(page, '[data-testid=session-status]')).toBe('Connected');
    await expect.poll(() => page.locator('canvas.qr').count()).toBe(0);
  }, 120_000);

  it('updates the sessions list live when a status changes', async () => {
    await nav('Messaging').click();
    const cell = page.locator(`[data-session-status="${sessionId}"]`);
    await expect.poll(() => inner(cell)).toBe('Connected');
    await expect.poll(() => text(page, '#main')).toContain('Live');
    host.setStatus(sessionId, 'logged_out', 'the phone unlinked this device');
    await expect.poll(() => inner(cell)).toBe('Logged out');
    // The reason beside it, live, and still there after a reload (the server keeps it).
    const reason = page.locator(`[data-session-reason="${sessionId}"]`);
    await expect.poll(() => inner(reason)).toBe('the phone unlinked this device');
    await page.reload();
    await expect.poll(() => inner(cell)).toBe('Logged out');
    await expect.poll(() => inner(reason)).toBe('the phone unlinked this device');
    await shot(page, '13-sessions');
  }, 60_000);
});

describe('the dashboard, tokens and organizations', () => {
  it('creates a personal access token, shown once, that works until revoked', async () => {
    await nav('Access tokens').click();
    const form = region('Create a token');
    await form.getByLabel('Name').fill('deploy script');
    await form.getByRole('button', { name: 'Create token' }).click();
    const shown = page.getByTestId('shown-once');
    await expect.poll(() => inner(shown)).toMatch(/^wpat_[A-Za-z0-9_-]{43}$/);
    const pat = await inner(shown);
    expect((await app.request('GET', '/api/whatsapp-sessions', { headers: { authorization: `Bearer ${pat}` } })).status).toBe(200);
    await expect.poll(() => text(page, 'table')).toContain(`…${pat.slice(-4)}`);
    await shot(page, '14-access-tokens');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('button', { name: 'Revoke deploy script' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => text(page, '#main')).toContain('No tokens yet.');
    expect((await app.request('GET', '/api/whatsapp-sessions', { headers: { authorization: `Bearer ${pat}` } })).status).toBe(401);
  }, 60_000);

  it('invites a member, accepts an invitation sent to the user, creates and switches organizations', async () => {
    // Someone else invites Ada to their organization.
    const charles = await signIn(app, { name: 'Charles Babbage', orgName: 'Babbage and Co' });
    const invited = await app.request('POST', `/api/orgs/${charles.orgId}/invitations`, { body: { email: EMAIL, role: 'admin' }, headers: charles.headers });
    expect(invited.status).toBe(202);

    await nav('Organization').click();
    await expect.poll(() => text(page, '#main')).toContain('Invitations for you');
    expect(await text(page, '#main')).toMatch(/Ada Lovelace \(you\)\s+ada@example\.test\s+owner/);
    const invite = region('Invitations');
    await invite.getByLabel('Email').fill('mary@example.test');
    await invite.getByLabel('Role').selectOption('admin');
    await invite.getByRole('button', { name: 'Invite' }).click();
    await expect.poll(() => text(page, '#main')).toContain('Invitation for mary@example.test recorded.');
    const pending = (await api('GET', `/api/orgs/${orgId}/invitations`)).body.invitations;
    expect(pending).toMatchObject([{ email: 'mary@example.test', role: 'admin' }]);
    // What works after the quick start (npx wharf, or ./wharf for the binary), and the slug as long as the server allows.
    expect(await text(page, '#main')).toContain(`npx wharf login --instance ${app.url}`);
    expect(await text(page, '#main')).toContain(`./wharf login --instance ${app.url}`);
    expect(await page.locator('input[name=org-slug]').getAttribute('maxlength')).toBe(String(ORG_SLUG_MAX));
    const longSlug = await api('POST', '/api/orgs', { name: 'Slugs', slug: 's'.repeat(ORG_SLUG_MAX + 1) });
    expect(longSlug.status).toBe(400);
    await shot(page, '15-organization');

    // Accepting joins and switches to it.
    await region('Invitations for you').getByRole('button', { name: 'Accept' }).click();
    await expect.poll(async () => (await api('GET', '/auth/session')).body.activeOrgId).toBe(charles.orgId);
    await expect.poll(() => page.locator('.org-switch select').inputValue()).toBe(charles.orgId);

    // A new organization, switched to at once.
    const create = region('Your organizations');
    await create.getByLabel('Name').fill('Difference Engines');
    await create.getByRole('button', { name: 'Create and switch' }).click();
    const fresh = await eventually(async () => (await api('GET', '/auth/session')).body.orgs.find((o: { name: string }) => o.name === 'Difference Engines'));
    await expect.poll(async () => (await api('GET', '/auth/session')).body.activeOrgId).toBe(fresh.id);
    await expect.poll(() => page.locator('.org-switch select').inputValue()).toBe(fresh.id);
    await nav('Apps').click();
    await expect.poll(() => text(page, '#main')).toContain('No apps yet');

    // Back to the first one from the header: its apps again.
    await page.locator('.org-switch select').selectOption({ label: 'Analytical Engines' });
    await expect.poll(async () => (await api('GET', '/auth/session')).body.activeOrgId).toBe(orgId);
    await expect.poll(() => text(page, '#main')).toContain('Photos');
  }, 60_000);
});

describe('the dashboard, overview, keyboard, phone, sign-out', () => {
  it('lists an abandoned delivery on the overview', async () => {
    receiver.behaviour = answer(503, 'down for maintenance');
    const sessions = (await api('GET', '/api/whatsapp-sessions')).body.data;
    const sandbox = sessions.find((s: { type: string }) => s.type === 'sandbox');
    const res = await app.request('POST', '/api/sandbox/receive', {
      body: { from: '+14155550142', text: 'anyone there?' },
      headers: { authorization: `Bearer ${sandbox.api_key}` },
    });
    expect(res.status).toBe(200);
    await eventually(async () => (await api('GET', '/api/dispatches?status=abandoned')).body.data.total === 1, 20_000, 'an abandoned dispatch');
    // A second app with a longer name: the usage bars still start at one x.
    const other = (await api('POST', '/api/apps', { name: 'Archive of the engine drawings', storageLimit: null })).body;
    await nav('Overview').click();
    await expect.poll(() => page.locator('.usage-rows meter').count()).toBe(2);
    const xs = await page.locator('.usage-rows meter').evaluateAll((meters) => meters.map((m) => Math.round(m.getBoundingClientRect().x)));
    expect(new Set(xs).size).toBe(1);
    expect((await api('DELETE', '/api/apps', { appId: other.id })).status).toBe(200);
    await expect.poll(() => text(page, '#main')).toMatch(/1\s+abandoned delivery\b/);
    expect(await text(page, '#main')).toMatch(/messages\.received\s+Abandoned\s+Support line\s+HTTP 503/);
    await shot(page, '16-overview');
  }, 60_000);

  it('links to the device approval page, which knows the signed-in user', async () => {
    await nav('Approve a device').click();
    await page.waitForURL(/\/device$/);
    expect(await text(page, 'body')).toContain(`Signed in as ${EMAIL}`);
    await shot(page, '16b-device');
    await page.getByRole('link', { name: '← Back to the dashboard' }).click();
    await expect.poll(() => heading(page)).toBe('Analytical Engines');
  }, 60_000);

  it('works from the keyboard: skip link, a form submitted with Enter, a typed confirmation, visible focus', async () => {
    await page.goto(`${app.url}/#/apps`);
    await page.reload();
    await expect.poll(() => heading(page)).toBe('Apps');
    const focused = () =>
      page.evaluate(
        'document.activeElement ? (document.activeElement.tagName === "MAIN" ? "main" : (document.activeElement.getAttribute("aria-label") || document.activeElement.textContent || "").trim()) : ""',
      );
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await focused()).toBe('main');
    await page.keyboard.press('Tab');
    await page.keyboard.type('Keyboard app');
    await page.keyboard.press('Tab');
    await page.keyboard.type('1');
    await page.keyboard.press('Enter');
    await expect.poll(() => heading(page)).toBe('Keyboard app');
    // The new page has the focus: Tab goes on from its top.
    expect(await focused()).toBe('main');
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Apps');
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Rename or change the limit');
    // A dialog shown only while open (the edit form) gives the focus back when it closes too.
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('dialog').isVisible()).toBe(true);
    await page.keyboard.press('Escape');
    await expect.poll(() => page.getByRole('dialog').isVisible()).toBe(false);
    // The focus returns once the dialog has unmounted (a frame after it hides): poll.
    await expect.poll(focused).toBe('Rename or change the limit');
    expect((await api('GET', '/api/apps')).body.apps.find((a: { name: string }) => a.name === 'Keyboard app').storageLimit).toBe(1024 ** 3);

    await page.goto(`${app.url}/#/apps`);
    await expect.poll(() => heading(page)).toBe('Apps');
    for (let i = 0; i < 60 && (await focused()) !== 'Delete Keyboard app'; i++) await page.keyboard.press('Tab');
    expect(await focused()).toBe('Delete Keyboard app');
    const outline = await page.evaluate('getComputedStyle(document.activeElement).outlineStyle + " " + getComputedStyle(document.activeElement).outlineWidth');
    expect(outline).toBe('solid 3px');
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog');
    await expect.poll(() => dialog.isVisible()).toBe(true);
    // Escape closes without deleting, and the focus comes back to the button.
    await page.keyboard.press('Escape');
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect(await focused()).toBe('Delete Keyboard app');
    await page.keyboard.press('Enter');
    await expect.poll(() => dialog.isVisible()).toBe(true);
    const confirm = dialog.getByRole('button', { name: 'Delete the app' });
    expect(await confirm.isDisabled()).toBe(true);
    await page.keyboard.type('Keyboard ap');
    expect(await confirm.isDisabled()).toBe(true);
    await page.keyboard.type('p');
    await shot(page, '17-delete-app-typed');
    await page.keyboard.press('Enter');
    await expect.poll(() => dialog.isVisible()).toBe(false);
    await expect.poll(async () => (await api('GET', '/api/apps')).body.apps.map((a: { name: string }) => a.name)).toEqual(['Photos']);
  }, 60_000);

  it('fits a phone: no sideways scrolling, the menu opens and closes, pages stack', async () => {
    const phone = await context.newPage();
    phone.setDefaultTimeout(10_000);
    phone.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      const width = () => phone.evaluate('document.documentElement.scrollWidth');
      await phone.goto(`${app.url}/`);
      await expect.poll(() => heading(phone)).toBe('Analytical Engines');
      expect(await width()).toBeLessThanOrEqual(390);
      await shot(phone, '18-phone-overview');
      const menu = phone.getByRole('button', { name: 'Menu' });
      const apps = phone.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Apps', exact: true });
      expect(await apps.isVisible()).toBe(false);
      await menu.click();
      expect(await menu.getAttribute('aria-expanded')).toBe('true');
      await apps.click();
      await expect.poll(() => heading(phone)).toBe('Apps');
      await expect.poll(() => apps.isVisible()).toBe(false);
      await phone.getByRole('link', { name: 'Photos', exact: true }).click();
      await expect.poll(() => heading(phone)).toBe('Photos');
      // A short name with a dash stays on one line (it breaks only where it must), and one file is "1 file".
      await phone.getByLabel('Choose files to upload').setInputFiles([{ name: 'f-a.bin', mimeType: 'application/octet-stream', buffer: Buffer.from('f-a') }]);
      const fname = phone.locator('.fname', { hasText: 'f-a.bin' });
      await expect.poll(() => fname.count()).toBe(1);
      expect(await fname.evaluate((e) => e.getClientRects().length)).toBe(1);
      await expect.poll(() => text(phone, '.facts')).toMatch(/\b1 file\b/);
      expect(await width()).toBeLessThanOrEqual(390);
      await shot(phone, '19-phone-app');
      const sessions = (await api('GET', '/api/whatsapp-sessions')).body.data;
      await phone.goto(`${app.url}/#/sessions/${sessions.find((s: { type: string }) => s.type === 'sandbox').id}`);
      await expect.poll(() => heading(phone)).toBe('Support line');
      expect(await width()).toBeLessThanOrEqual(390);
      await shot(phone, '20-phone-session');
      await phone.goto(`${app.url}/#/deliveries`);
      await expect.poll(() => phone.locator('tbody tr').count()).toBeGreaterThan(0);
      expect(await width()).toBeLessThanOrEqual(390);
      await shot(phone, '21-phone-deliveries');
    } finally {
      await phone.close();
    }
  }, 60_000);

  it('signs out: back to /login, and the old cookie no longer works', async () => {
    const before = await asBrowser(context, app);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/login$/);
    expect((await app.request('GET', '/auth/session', { headers: before })).status).toBe(401);
  }, 60_000);

  it('signs in again at /login: a wrong password said in place, then back to the page asked for', async () => {
    await page.goto(`${app.url}/#/apps`);
    await page.waitForURL(/\/login\?next=/);
    await expect.poll(() => page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true);
    await shot(page, '01-login');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => text(page, '[role=alert]')).toContain('Invalid email or password');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/#\/apps$/);
    await expect.poll(() => heading(page)).toBe('Apps');
    expect((await api('GET', '/auth/session')).body.user.email).toBe(EMAIL);
    expect(errors).toEqual([]);
  }, 60_000);

  it('reached nothing but Wharf and its object store in all this: no CDN, no other network', async () => {
    const { endPoint, port } = (await app.request('POST', '/api/tokens/validate', { body: { token: storeToken } })).body.storage;
    expect([...origins].sort()).toEqual([app.url, `http://${endPoint}:${port}`].sort());
  });
});
