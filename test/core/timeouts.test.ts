/**
 * The main API's own timeouts (`[server] headers_timeout_ms`, `request_timeout_ms`): a client that
 * stalls in its headers or in its body gets 408 and a closed connection, instead of holding it
 * for Node's defaults (60 s and 300 s).
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
function stall(text: string): Promise<{ answer: string; ms: number }> {
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
    expect(ms).toBeLessThan(3000);
  });

  it('closes a request whose body stalls, with 408', async () => {
    const { answer, ms } = await stall('POST /plain/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(ms).toBeGreaterThanOrEqual(700);
    expect(ms).toBeLessThan(4000);
  });

  it('still serves a request sent in time', async () => {
    const res = await app.request('POST', '/plain/echo', { body: { a: 1 } });
    expect(res).toMatchObject({ status: 200, body: { got: { a: 1 } } });
  });
});
