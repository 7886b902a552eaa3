/**
 * The dashboard plugin's routes over HTTP: the page (never cached, with its security headers),
 * the hashed assets (cached for a year, gzipped when asked, 304 on a matching ETag), unknown
 * assets, and the API around it unchanged (the dashboard owns `/` only for its own routes).
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexFiles } from '../../../plugins/dashboard/assets.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';

let app: TestApp;
let script: string;
let style: string;

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  const page = await app.fetch('/');
  const html = await page.text();
  script = /<script type="module" src="\/assets\/([^"]+)"/.exec(html)?.[1] ?? '';
  style = /<link rel="stylesheet" href="\/assets\/([^"]+)"/.exec(html)?.[1] ?? '';
}, 120_000);
afterAll(() => app?.close());

describe('the dashboard page', () => {
  it.each(['/', '/login'])('GET %s answers the page: no-cache, a strict policy, the hashed script and stylesheet', async (path) => {
    const res = await app.fetch(path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const policy = res.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toContain('unsafe-inline');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const html = await res.text();
    expect(script).toMatch(/^main-[A-Z0-9]{8}\.js$/);
    expect(style).toMatch(/^main-[A-Z0-9]{8}\.css$/);
    expect(html).toContain(`/assets/${script}`);
    // No script but the bundle: nothing inline, nothing from another origin.
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).not.toMatch(/https?:\/\//);
    // Without JavaScript the page says so and points at the page that works without it.
    expect(html).toMatch(/<noscript>.*href="\/device".*<\/noscript>/s);
  });
});

describe('the tab icon', () => {
  it('answers /favicon.ico with an SVG, so no page of this origin logs a 404 for it', async () => {
    const res = await app.fetch('/favicon.ico');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(await res.text()).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(await (await app.fetch('/')).text()).toContain('<link rel="icon" href="/favicon.ico" type="image/svg+xml">');
  });
});

describe('the dashboard assets', () => {
  it('answers the script gzipped when asked, plain otherwise, cached for a year, with an ETag that gives 304', async () => {
    const zipped = await app.fetch(`/assets/${script}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(zipped.status).toBe(200);
    expect(zipped.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(zipped.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(zipped.headers.get('vary')).toBe('Accept-Encoding');
    const plain = await app.fetch(`/assets/${script}`, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.headers.get('content-encoding')).toBeNull();
    const text = await plain.text();
    expect(text.length).toBeGreaterThan(10_000);
    // fetch undoes the gzip itself; the raw length is the compressed one.
    expect(Number(zipped.headers.get('content-length'))).toBeLessThan(text.length / 2);
    expect(await zipped.text()).toBe(text);
    const etag = plain.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    const again = await app.fetch(`/assets/${script}`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    const css = await app.fetch(`/assets/${style}`);
    expect([css.status, css.headers.get('content-type')]).toEqual([200, 'text/css; charset=utf-8']);
  });

  it('answers 404 {error} for any other name, path tricks included', async () => {
    for (const path of [
      '/assets/main-AAAAAAAA.js',
      '/assets/..%2Fpackage.json',
      '/assets/%2e%2e/%2e%2e/etc/passwd',
      '/assets/constructor',
      '/assets/__proto__',
    ]) {
      const res = await app.request('GET', path);
      expect(res.status, path).toBe(404);
      expect(res.body, path).toEqual({ error: res.body.error });
      expect(['No such asset', 'Not found']).toContain(res.body.error);
    }
  });

  it('names each file by its content: another content, another name', () => {
    const a = indexFiles({ 'main-AAAA.js': 'one', 'main-BBBB.css': 'x' });
    const b = indexFiles({ 'main-AAAA.js': 'two', 'main-BBBB.css': 'x' });
    expect(a.script).toBe('main-AAAA.js');
    expect(a.files.get('main-AAAA.js')!.etag).not.toBe(b.files.get('main-AAAA.js')!.etag);
    expect(gunzipSync(a.files.get('main-AAAA.js')!.gzip).toString()).toBe('one');
    expect(() => indexFiles({ 'main-AAAA.js': 'one' })).toThrow('the dashboard build has no stylesheet');
  });
});

describe('the API around the dashboard', () => {
  it('keeps every other path as it was: unknown paths 404 {error}, API prefixes their own envelopes, other methods on / 405', async () => {
    expect(await app.request('GET', '/nowhere')).toMatchObject({ status: 404, body: { error: 'Not found' } });
    expect(await app.request('GET', '/api/nothing-here')).toMatchObject({ status: 404, body: { error: 'Not found' } });
    expect(await app.request('GET', '/api/apps')).toMatchObject({ status: 401, body: { error: 'Authentication required' } });
    expect(await app.request('GET', '/api/whatsapp-sessions')).toMatchObject({ status: 401, body: { success: false, message: 'Authentication required' } });
    const post = await app.request('POST', '/');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect((await app.request('GET', '/device')).text).toContain('Sign in a device');
    expect(await app.request('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
  });
});
