/**
 * What never reaches a handler. The main API's own timeouts (`[server] headers_timeout_ms`,
 * `request_timeout_ms`): a client that stalls in its headers or in its body gets 408 and a closed
 * connection, instead of holding it for Node's defaults (60 s and 300 s). A request Node's HTTP
 * parser refuses (a raw byte in the URL, a malformed header, headers too large) gets its status
 * with an error body in the envelope of the path it named, not Node's bare status line.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.ts';
import { probePlugin } from '../helpers/plugins.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startApp('[server]\nheaders_timeout_ms = 400\nrequest_timeout_ms = 800\n', { plugins: [probePlugin] });
});
afterAll(() => app?.close());

/** Writes `text` on a raw connection and collects what comes back until the server closes it. */
function stall(text: string | Buffer): Promise<{ answer: string; ms: number }> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(Number(port), hostname, () => socket.write(text));
    let answer = '';
    socket.on('data', (d) => (answer += d));
    socket.on('close', () => resolve({ answer, ms: Date.now() - started }));
    socket.on('error', reject);
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after 10 s; got ${JSON.stringify(answer)}`));
    }, 10_000);
  });
}

describe('[server] timeouts', () => {
  it('closes a request whose headers stall, with 408', async () => {
    const { answer, ms } = await stall('POST /plain/echo HTTP/1.1\r\nHost: x\r\nContent-Type: appl');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(parsed(answer).body).toEqual({ error: 'The request did not arrive in time; the connection is closed' });
    expect(ms).toBeLessThan(3000);
  });

  it('closes a request whose body stalls, with 408', async () => {
    const { answer, ms } = await stall('POST /msg/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    // The request was read, so its path names the envelope: the messaging one here.
    expect(parsed(answer).body).toEqual({ success: false, message: 'The request did not arrive in time; the connection is closed' });
    expect(ms).toBeGreaterThanOrEqual(700);
    expect(ms).toBeLessThan(4000);
  });

  it('still serves a request sent in time', async () => {
    const res = await app.request('POST', '/plain/echo', { body: { a: 1 } });
    expect(res).toMatchObject({ status: 200, body: { got: { a: 1 } } });
  });
});

/** An answer read off a raw connection: status, headers (lower-case names) and the JSON body. */
function parsed(answer: string): { status: number; headers: Record<string, string>; body: unknown } {
  const [head, body] = answer.split('\r\n\r\n', 2) as [string, string];
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  expect(Buffer.byteLength(body)).toBe(Number(headers['content-length']));
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(body) };
}

describe('requests the HTTP parser refuses', () => {
  const cases: { what: string; raw: Buffer; status: number; body: unknown }[] = [
    {
      what: "a raw non-ASCII byte in a plain route's URL",
      raw: Buffer.concat([Buffer.from('GET /plain/'), Buffer.from('é'), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]),
      status: 400,
      body: { error: 'The request is not valid HTTP: Invalid char in url path (a URL must be percent-encoded)' },
    },
    {
      what: "a raw non-ASCII byte in a messaging route's URL",
      raw: Buffer.concat([Buffer.from('POST /msg/'), Buffer.from('ü'), Buffer.from(' HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n')]),
      status: 400,
      body: { success: false, message: 'The request is not valid HTTP: Invalid char in url path (a URL must be percent-encoded)' },
    },
    {
      what: 'a header line with no colon',
      raw: Buffer.from('GET /msg/echo HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n'),
      status: 400,
      body: { success: false, message: 'The request is not valid HTTP: Invalid header token' },
    },
    {
      what: 'a Content-Length that is not a number',
      raw: Buffer.from('POST /plain/echo HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n'),
      status: 400,
      body: { error: 'The request is not valid HTTP: Invalid character in Content-Length' },
    },
    {
      what: 'headers over the size limit',
      raw: Buffer.from(`GET /msg/echo HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
      status: 431,
      body: { success: false, message: 'The request headers are too large' },
    },
    {
      what: 'no request line at all (the plain envelope: no path to read)',
      raw: Buffer.from('GARBAGE\r\n\r\n'),
      status: 400,
      body: { error: 'The request is not valid HTTP: Invalid method encountered' },
    },
  ];

  it.each(cases)('$what: $status in the envelope of its path, with a request id, and the connection closed', async ({ raw, status, body }) => {
    const { answer } = await stall(raw);
    const got = parsed(answer);
    expect(got.status).toBe(status);
    expect(got.body).toEqual(body);
    expect(got.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(got.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(got.headers.connection).toBe('close');
  });

  it('a refusal after a request served on the same connection is a second, whole answer; the server goes on serving', async () => {
    const { hostname, port } = new URL(app.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () =>
        socket.write('POST /plain/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'),
      );
      let got = '';
      socket.on('data', (d) => {
        got += d;
        // The first answer is whole: garbage follows on the same keep-alive connection.
        if (got.endsWith('{"got":{"a":1}}')) socket.write('GARBAGE\r\n\r\n');
      });
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
    });
    const [first, second] = answer.split(/(?=HTTP\/1\.1 )/);
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"got":\{"a":1\}\}$/);
    expect(parsed(second!)).toMatchObject({ status: 400, body: { error: 'The request is not valid HTTP: Invalid method encountered' } });
    const res = await app.request('POST', '/plain/echo', { body: { b: 2 } });
    expect(res).toMatchObject({ status: 200, body: { got: { b: 2 } } });
  });
});
