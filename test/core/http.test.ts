import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import example from '../../plugins/example/index.ts';
import { quoted } from '../../core/logger.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { probePlugin } from '../helpers/plugins.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startApp('[server]\nbody_limit_bytes = 2048\n[plugins.example]\nenabled = true\n', {
    plugins: [example, probePlugin],
  });
});
afterAll(() => app.close());

describe('errors answer in the route group envelope', () => {
  it.each([
    // method, path, raw body, status, body
    ['POST', '/plain/echo', '{"a":', 400, { error: expect.stringMatching(/^Malformed JSON body/) }],
    ['POST', '/msg/echo', '{"a":', 400, { success: false, message: expect.stringMatching(/^Malformed JSON body/) }],
    // Nesting past 64 levels is refused before anything walks it (a value 5,000 deep overflows JSON.stringify).
    ['POST', '/plain/echo', `${'['.repeat(65)}${']'.repeat(65)}`, 400, { error: 'Malformed JSON body: nested deeper than 64 levels' }],
    ['POST', '/plain/echo', `{"s":"${'['.repeat(100)}","a":${'['.repeat(63)}${']'.repeat(63)}}`, 200, { got: expect.any(Object) }],
    ['GET', '/plain/nowhere', undefined, 404, { error: 'Not found' }],
    ['GET', '/msg/nowhere', undefined, 404, { success: false, error: 'Not found', message: 'Not found' }],
    ['GET', '/MSG/Nowhere', undefined, 404, { success: false, error: 'Not found', message: 'Not found' }],
    ['DELETE', '/plain/echo', undefined, 405, { error: 'Method DELETE is not allowed here (allowed: POST)' }],
    ['DELETE', '/msg/echo', undefined, 405, { success: false, message: 'Method DELETE is not allowed here (allowed: POST)' }],
    ['GET', '/plain/missing', undefined, 404, { error: 'Session not found' }],
    ['GET', '/msg/missing', undefined, 404, { success: false, error: 'Session not found', message: 'Session not found' }],
    ['GET', '/msg/invalid', undefined, 422, { success: false, message: 'The given data was invalid.', errors: { to: ['The to field is required.'] } }],
    ['GET', '/plain/limited', undefined, 429, { message: 'Too many requests', retry_after: 7 }],
    ['GET', '/msg/limited', undefined, 429, { message: 'Too many requests', retry_after: 7 }],
  ])('%s %s', async (method, path, raw, status, body) => {
    const res = await app.request(method, path, raw === undefined ? {} : { raw, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(status);
    expect(res.body).toStrictEqual(body);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers 413 in the envelope for a body over the limit, before reading it all', async () => {
    const big = JSON.stringify({ pad: 'x'.repeat(4096) });
    const plain = await app.request('POST', '/plain/echo', { raw: big, headers: { 'content-type': 'application/json' } });
    expect(plain.status).toBe(413);
    expect(plain.body).toEqual({ error: 'Request body is too large' });
    const msg = await app.request('POST', '/msg/echo', { raw: big, headers: { 'content-type': 'application/json' } });
    expect(msg.status).toBe(413);
    expect(msg.body).toEqual({ success: false, message: 'Request body is too large' });
  });

  it('parses JSON and form bodies and leaves others alone', async () => {
    expect((await app.request('POST', '/plain/echo', { body: { a: [1, 2] } })).body).toEqual({ got: { a: [1, 2] } });
    const form = await app.request('POST', '/plain/echo', { raw: 'a=1&b=two', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.body).toEqual({ got: { a: '1', b: 'two' } });
    const text = await app.request('POST', '/plain/echo', { raw: 'hello', headers: { 'content-type': 'text/plain' } });
    expect(text.body).toEqual({ got: null });
  });

  it('hides internal messages on a 500 and names the request id, which the log line carries too', async () => {
    const res = await app.request('GET', '/plain/boom');
    expect(res.status).toBe(500);
    const id = res.headers.get('x-request-id');
    expect(res.body).toEqual({ error: `Internal server error (request id ${id})` });
    expect(res.text).not.toContain('hunter2');
    const msg = await app.request('GET', '/msg/boom');
    expect(msg.body).toEqual({
      success: false,
      error: `Internal server error (request id ${msg.headers.get('x-request-id')})`,
      message: `Internal server error (request id ${msg.headers.get('x-request-id')})`,
    });
    const failure = app.logs.find((l) => l.msg === 'request failed' && l.request_id === id);
    expect(failure).toBeDefined();
    expect(JSON.stringify(failure)).toContain('hunter2'); // the operator sees the cause, the caller does not
  });

  it('keeps a caller-safe message on a 503 with the request id and Retry-After', async () => {
    const res = await app.request('GET', '/plain/unavailable');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body).toEqual({ error: `Storage is unreachable (request id ${res.headers.get('x-request-id')})` });
    // Expected from time to time: a warning in one line, not an error with a stack.
    const line = app.logs.find((l) => l.request_id === res.headers.get('x-request-id') && l.msg !== 'request');
    expect(line).toMatchObject({ level: 'warn', msg: 'request answered unavailable', code: 'unavailable', message: 'Storage is unreachable' });
    expect(JSON.stringify(line)).not.toContain('stack');
  });

  it('keeps a sane incoming X-Request-Id and replaces a bad one', async () => {
    const kept = await app.fetch('/healthz', { headers: { 'x-request-id': 'edge-123.abc' } });
    expect(kept.headers.get('x-request-id')).toBe('edge-123.abc');
    const replaced = await app.fetch('/healthz', { headers: { 'x-request-id': 'bad id <script>' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('request log, health and metrics', () => {
  it('writes one line per request with method, path, status, duration and id, and never the credentials', async () => {
    const res = await app.fetch('/example/hello?name=Ada', { headers: { authorization: 'Bearer svc_live_SECRET', cookie: '__session=SECRETCOOKIE' } });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-request-id');
    const lines = app.logs.filter((l) => l.request_id === id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: 'request', method: 'GET', path: '/example/hello', status: 200 });
    expect(typeof lines[0]!.duration_ms).toBe('number');
    expect(JSON.stringify(app.logs)).not.toMatch(/SECRET/);
  });

  it('writes a valid JSON line for any path', async () => {
    const res = await app.fetch('/plain/we"ird\\path%00\u00e9');
    const id = res.headers.get('x-request-id');
    await new Promise((r) => setTimeout(r, 20));
    const line = app.logs.find((l) => l.request_id === id);
    expect(line).toMatchObject({ level: 'info', service: 'wharf', status: 404, msg: 'request' });
    expect(String(line!.path)).toContain('we');
  });

  it("quotes the line's strings exactly as JSON.stringify does, on any characters", () => {
    const alphabet = ['a', 'Z', '/', '-', '.', '%', ' ', '"', '\\', '\u0000', '\u001f', '\u007f', 'é', '✓', '\u2028', '\ud834', '\udd1e', '𝄞'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 2000; i++) {
      const text = Array.from({ length: next() % 12 }, () => alphabet[next() % alphabet.length]).join('');
      expect(quoted(text)).toBe(JSON.stringify(text));
    }
  });

  it('redacts credentials that code passes to the logger', () => {
    const before = app.logs.length;
    app.running.log.info({ headers: { authorization: 'Bearer abc', cookie: 'x=1' }, token: 'svc_live_x', user: { password: 'pw' } }, 'probe');
    app.running.log.flush();
    return new Promise<void>((resolve) =>
      setTimeout(() => {
        const line = app.logs.slice(before).find((l) => l.msg === 'probe');
        expect(line).toMatchObject({ headers: { authorization: '[redacted]', cookie: '[redacted]' }, token: '[redacted]', user: { password: '[redacted]' } });
        resolve();
      }, 50),
    );
  });

  it('answers /healthz, /readyz and /metrics', async () => {
    expect(await (await app.fetch('/healthz')).json()).toEqual({ status: 'ok' });
    const ready = await app.fetch('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: true } });
    const metrics = await (await app.fetch('/metrics')).text();
    expect(metrics).toMatch(/wharf_http_requests_total\{method="GET",route="\/example\/hello",status="200"\} \d+/);
    expect(metrics).toMatch(/wharf_http_request_duration_seconds_bucket/);
    expect(metrics).toMatch(/wharf_process_resident_memory_bytes/);
  });
});

describe('behind a reverse proxy', () => {
  it('believes only the address the proxy appended to X-Forwarded-For', async () => {
    const proxied = await startApp('[server]\ntrust_proxy = true\n', { plugins: [probePlugin] });
    const direct = await startApp('', { plugins: [probePlugin] });
    try {
      const ipOf = (koa: typeof proxied.running.app) =>
        koa.createContext(
          { headers: { 'x-forwarded-for': '6.6.6.6, 10.0.0.7' }, socket: { remoteAddress: '127.0.0.1' }, url: '/', method: 'GET' } as never,
          { getHeader() {}, setHeader() {}, removeHeader() {} } as never,
        ).ip;
      // The client wrote 6.6.6.6; the proxy appended 10.0.0.7, the address it saw.
      expect(ipOf(proxied.running.app)).toBe('10.0.0.7');
      expect(ipOf(direct.running.app)).toBe('127.0.0.1');
    } finally {
      await proxied.close();
      await direct.close();
    }
  });
});
