/**
 * The embedded endpoint's limits, probed as an attacker would: a declared length over S3's
 * largest object, a client that stops sending (body or headers), a presigned PUT whose body is
 * reframed as aws-chunked to store a size other than the signed one, and a client that aborts an
 * upload (which must not put the URL’s signature in the log), and requests Node’s HTTP parser refuses
 * (answered with S3’s error document, not a bare status line).
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeSha256 } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { type EmbeddedApp, errorCode, outcome, rawRequest, s3Client, startEmbeddedApp } from '../../../helpers/embedded.ts';
import { localFile, requestUploads } from '../../../helpers/storage.ts';

const TIMEOUT_MS = 1000;

let env: EmbeddedApp;
let s3: S3Client;
let bucket: string;

beforeAll(async () => {
  env = await startEmbeddedApp(`[plugins.storage.fs]\nrequest_timeout_ms = ${TIMEOUT_MS}\nheaders_timeout_ms = ${TIMEOUT_MS}\n`, { logLevel: 'debug' });
  s3 = s3Client(env.creds);
  bucket = env.mine.bucketName;
});

afterAll(async () => {
  s3?.destroy();
  await env?.app.close();
});

interface Exchange {
  /** What the server wrote before closing. */
  response: string;
  /** Milliseconds from the first byte sent to the server closing the connection. */
  closedAfterMs: number;
}

/** Writes `head` (and optionally more later) on a raw socket; resolves when the server closes it. */
function exchange(head: string, opts: { more?: Buffer; limitMs?: number } = {}): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(env.creds.port, env.creds.endPoint, () => {
      socket.write(head);
      if (opts.more) socket.write(opts.more);
    });
    const parts: Buffer[] = [];
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open ${opts.limitMs ?? 10_000} ms; it sent: ${Buffer.concat(parts).toString()}`));
    }, opts.limitMs ?? 10_000);
    socket.on('data', (d: Buffer) => parts.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ response: Buffer.concat(parts).toString(), closedAfterMs: Date.now() - started });
    });
  });
}

/** The request line and headers of a presigned PUT URL, as a raw HTTP/1.1 head. */
function headOf(url: string, headers: Record<string, string>): string {
  const u = new URL(url);
  const lines = [`PUT ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

describe('declared length', () => {
  it('a Content-Length over 5 GiB is refused with 400 EntityTooLarge before any of the body is read', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'huge.bin' }), { expiresIn: 60 });
    // 1 TiB declared, 1 KiB sent: an answer now (not after a timeout) means the body was not awaited.
    const res = await exchange(headOf(url, { 'Content-Length': String(1024 ** 4) }), { more: Buffer.alloc(1024), limitMs: TIMEOUT_MS / 2 });
    expect(res.response).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorCode(res.response)).toBe('EntityTooLarge');
    // Exactly 5 GiB is allowed to start (it would then time out, not be refused).
    const limit = await exchange(headOf(url, { 'Content-Length': String(5 * 1024 ** 3 + 1) }), { limitMs: TIMEOUT_MS / 2 });
    expect(errorCode(limit.response)).toBe('EntityTooLarge');
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'huge.bin' })))).status).toBe(404);
  });

  it('an aws-chunked body declaring a decoded length over 5 GiB is refused the same way', async () => {
    const signer = new SignatureV4({
      credentials: { accessKeyId: env.creds.accessKey, secretAccessKey: env.creds.secretKey },
      region: 'us-east-1',
      service: 's3',
      sha256: NodeSha256,
      uriEscapePath: false,
    });
    const host = `${env.creds.endPoint}:${env.creds.port}`;
    const headers = {
      host,
      'content-length': '100',
      'content-encoding': 'aws-chunked',
      'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
      'x-amz-decoded-content-length': String(6 * 1024 ** 3),
    };
    const signed = await signer.sign({
      method: 'PUT',
      protocol: 'http:',
      hostname: env.creds.endPoint,
      port: env.creds.port,
      path: `/${bucket}/huge-chunked.bin`,
      query: {},
      headers,
    });
    const lines = Object.entries(signed.headers).filter(([k]) => k !== 'host');
    const head = `PUT /${bucket}/huge-chunked.bin HTTP/1.1\r\nHost: ${host}\r\n${lines.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
    const res = await exchange(head, { limitMs: TIMEOUT_MS / 2 });
    expect(res.response).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorCode(res.response)).toBe('EntityTooLarge');
  });
});

describe('timeouts', () => {
  it('a request whose body stops arriving is answered 400 RequestTimeout and closed after request_timeout_ms; nothing is stored', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'stalled.bin' }), { expiresIn: 60 });
    const res = await exchange(headOf(url, { 'Content-Length': '1000' }), { more: Buffer.alloc(10), limitMs: TIMEOUT_MS * 5 });
    expect(res.response).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorCode(res.response)).toBe('RequestTimeout');
    expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'stalled.bin' })))).status).toBe(404);
    // The bytes received so far went to a temporary file, removed once the wait for the rest ended.
    const tmp = path.join(env.app.dataDir, 'objects/.wharf/tmp');
    for (let i = 0; i < 40 && fs.readdirSync(tmp).length; i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.readdirSync(tmp)).toEqual([]);
  });

  it('a connection that never finishes its request headers is closed after headers_timeout_ms', async () => {
    const res = await exchange(`GET /${bucket}/x HTTP/1.1\r\nHost: ${env.creds.endPoint}\r\nX-Slow: `, { limitMs: TIMEOUT_MS * 5 });
    expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(res.response).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorCode(res.response)).toBe('RequestTimeout');
  });

  it('a slow but steady upload is not cut: only silence counts', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'steady.bin' }), { expiresIn: 60 });
    const u = new URL(url);
    const http = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, method: 'PUT', headers: { 'content-length': '6' }, agent: false },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      // Six bytes over about 2.4 times the timeout, never silent for long.
      let sent = 0;
      const tick = setInterval(
        () => {
          req.write('x');
          if (++sent === 6) {
            clearInterval(tick);
            req.end();
          }
        },
        (TIMEOUT_MS * 2.4) / 6,
      );
    });
    expect(status).toBe(200);
  });
});

describe('requests the HTTP parser refuses', () => {
  it.each([
    [
      'a raw non-ASCII byte in the key',
      `GET /BUCKET/caf\u00e9.txt HTTP/1.1\r\nHost: h\r\n\r\n`,
      'InvalidRequest',
      /^The request is not valid HTTP: Invalid char in url path \(a URL must be percent-encoded\)\.$/,
    ],
    [
      'a header line with no colon',
      `GET /BUCKET/x HTTP/1.1\r\nHost: h\r\nno colon\r\n\r\n`,
      'InvalidRequest',
      /^The request is not valid HTTP: Invalid header token\.$/,
    ],
    [
      'headers over the size limit',
      `GET /BUCKET/x HTTP/1.1\r\nHost: h\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      'RequestHeaderSectionTooLarge',
      /maximum allowed size/,
    ],
  ])("%s: 400 with S3's error document naming the resource, and the connection closed", async (_what, head, code, message) => {
    const res = await exchange(head.replace('BUCKET', bucket));
    expect(res.response).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(res.response).toMatch(/\r\ncontent-type: application\/xml\r\n/);
    expect(res.response).toMatch(/\r\nx-amz-request-id: [0-9A-F]{16}\r\n/);
    expect(errorCode(res.response)).toBe(code);
    expect(/<Message>([^<]*)<\/Message>/.exec(res.response)?.[1]).toMatch(message);
    expect(/<Resource>([^<]*)<\/Resource>/.exec(res.response)?.[1]).toBe(head.replace('BUCKET', bucket).split(' ')[1]);
  });
});

describe('presigned PUT reframed as aws-chunked', () => {
  it('the stored size equals the signed one: an 11-byte URL cannot store 1 byte', async () => {
    const phase1 = await requestUploads(env.app, env.owner, env.mine.id, [localFile('eleven.bin', 11)]);
    expect(phase1.status).toBe(200);
    const { presignedUrl, key } = phase1.body.uploads[0];
    // 11 bytes, as signed, that aws-chunked decoding would turn into one byte "X".
    const body = Buffer.from('1\r\nX\r\n0\r\n\r\n');
    expect(body.length).toBe(11);
    const res = await rawRequest(presignedUrl, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': '1' },
      body,
    });
    expect(res.status).toBe(400);
    expect(errorCode(res.text)).toBe('InvalidArgument');
    const head = await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
    expect(head.status).toBe(404);
    // The same URL with the body as signed works, and stores 11 bytes.
    const ok = await rawRequest(presignedUrl, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body });
    expect(ok.status).toBe(200);
    expect((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength).toBe(11);
  });
});

describe('a client that aborts an upload', () => {
  it('is logged at debug without a stack, and no log line holds the URL’s signature or credential', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'aborted.bin' }), { expiresIn: 60 });
    const signature = new URL(url).searchParams.get('X-Amz-Signature')!;
    const credential = new URL(url).searchParams.get('X-Amz-Credential')!;
    const before = env.app.logs.length;
    await new Promise<void>((resolve) => {
      const socket = net.connect(env.creds.port, env.creds.endPoint, () => {
        socket.write(headOf(url, { 'Content-Length': '100000' }));
        socket.write(Buffer.alloc(5000));
        // Gone mid-body.
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 100);
      });
      socket.on('error', () => undefined);
    });
    // The server notices and logs.
    const deadline = Date.now() + 3000;
    let lines: Record<string, unknown>[] = [];
    while (Date.now() < deadline) {
      lines = env.app.logs.slice(before);
      if (lines.some((l) => /abort|went away|closed/i.test(String(l.msg)))) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const abort = lines.find((l) => /abort|went away|closed/i.test(String(l.msg)));
    expect(abort, JSON.stringify(lines)).toBeDefined();
    expect(abort!.level).toBe('debug');
    expect(abort!.err).toBeUndefined();
    expect(lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
    const all = JSON.stringify(env.app.logs);
    expect(all).not.toContain(signature);
    expect(all).not.toContain(encodeURIComponent(credential));
    expect(all).not.toContain(credential);
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'aborted.bin' })))).status).toBe(404);
  });
});
