/**
 * Signed streaming uploads (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`, with and without a trailer)
 * against the embedded endpoint. The requests are built here: the seed signature with
 * @smithy/signature-v4 over the request headers, each chunk signature with its signString
 * (`signer.sign(stringToSign)`); that construction is first checked against the worked example
 * in AWS's documentation ("Signature Calculations for the Authorization Header: Transferring
 * Payload in Multiple Chunks"), so the live requests are what AWS itself would accept.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkSigner, EMPTY_SHA256, NodeSha256 } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { startApp, type TestApp } from '../../../helpers/app.ts';
import { signIn } from '../../../helpers/identity.ts';
import { createApp, createToken } from '../../../helpers/storage.ts';

const amzDate = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
const sha256Hex = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

function signerFor(accessKeyId: string, secretAccessKey: string): SignatureV4 {
  return new SignatureV4({ credentials: { accessKeyId, secretAccessKey }, region: 'us-east-1', service: 's3', sha256: NodeSha256, uriEscapePath: false });
}

/** The chunk signatures of `chunks` (the last one empty) chained from `seed`. */
async function chunkSignatures(signer: SignatureV4, date: Date, seed: string, chunks: Buffer[]): Promise<string[]> {
  const scope = `${amzDate(date).slice(0, 8)}/us-east-1/s3/aws4_request`;
  const out: string[] = [];
  let previous = seed;
  for (const chunk of chunks) {
    previous = await signer.sign(['AWS4-HMAC-SHA256-PAYLOAD', amzDate(date), scope, previous, EMPTY_SHA256, sha256Hex(chunk)].join('\n'), {
      signingDate: date,
    });
    out.push(previous);
  }
  return out;
}

describe("the chunk signing used here agrees with AWS's documented example", () => {
  // Access key, secret, request and expected signatures from the AWS S3 documentation.
  const signer = signerFor('AKIAIOSFODNN7EXAMPLE', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY');
  const date = new Date(Date.UTC(2013, 4, 24));
  const chunks = [Buffer.alloc(65536, 'a'), Buffer.alloc(1024, 'a'), Buffer.alloc(0)];
  const expected = [
    'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648',
    '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497',
    'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9',
  ];
  const seed = '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';

  it('seed and chunk signatures; the endpoint’s ChunkSigner accepts them and refuses a changed one', async () => {
    const signed = await signer.sign(
      {
        method: 'PUT',
        protocol: 'https:',
        hostname: 's3.amazonaws.com',
        path: '/examplebucket/chunkObject.txt',
        query: {},
        headers: {
          host: 's3.amazonaws.com',
          'x-amz-storage-class': 'REDUCED_REDUNDANCY',
          'content-encoding': 'aws-chunked',
          'x-amz-decoded-content-length': '66560',
          'content-length': '66824',
          'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
        },
      },
      { signingDate: date },
    );
    expect(String(signed.headers.authorization)).toMatch(new RegExp(`Signature=${seed}$`));
    expect(await chunkSignatures(signer, date, seed, chunks)).toEqual(expected);
    const verifier = new ChunkSigner(signer, date, '20130524/us-east-1/s3/aws4_request', seed);
    for (const [i, chunk] of chunks.entries()) await verifier.chunk(sha256Hex(chunk), expected[i]!);
    const again = new ChunkSigner(signer, date, '20130524/us-east-1/s3/aws4_request', seed);
    await expect(again.chunk(sha256Hex(Buffer.alloc(65536, 'b')), expected[0]!)).rejects.toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
  });
});

let app: TestApp;
let mine: any;
let creds: { endPoint: string; port: number; accessKey: string; secretKey: string };
let signer: SignatureV4;

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  const owner = await signIn(app);
  mine = await createApp(app, owner, 'streaming');
  creds = (await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, mine.id) } })).body.storage;
  signer = signerFor(creds.accessKey, creds.secretKey);
});

afterAll(async () => {
  await app?.close();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function send(method: string, pathname: string, headers: Record<string, string>, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: creds.endPoint, port: creds.port, method, path: pathname, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A plain signed request (GET/HEAD) with an empty payload. */
async function plain(method: 'GET' | 'HEAD', key: string): Promise<Answer> {
  const host = `${creds.endPoint}:${creds.port}`;
  const p = `/${mine.bucketName}/${key}`;
  const signed = await signer.sign({
    method,
    protocol: 'http:',
    hostname: creds.endPoint,
    port: creds.port,
    path: p,
    query: {},
    headers: { host, 'x-amz-content-sha256': EMPTY_SHA256 },
  });
  return send(method, p, signed.headers as Record<string, string>);
}

interface StreamingOptions {
  /** Send a CRC32 trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER). */
  trailer?: boolean;
  /** Change one hex digit of this chunk's signature. */
  tamperChunk?: number;
  /** Change one hex digit of the trailer signature. */
  tamperTrailer?: boolean;
  /** The trailer's checksum line instead of the data's CRC32 (signed all the same). */
  trailerLine?: string;
  /** x-amz-trailer instead of x-amz-checksum-crc32. */
  announce?: string;
}

/** PUTs `data` as a signed aws-chunked body in chunks of `chunkSize`. */
async function putStreaming(key: string, data: Buffer, chunkSize: number, opts: StreamingOptions = {}): Promise<Answer> {
  const date = new Date();
  const payload = opts.trailer ? 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER' : 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
  const chunks: Buffer[] = [];
  for (let at = 0; at < data.length; at += chunkSize) chunks.push(data.subarray(at, at + chunkSize));
  chunks.push(Buffer.alloc(0));
  const flip = (sig: string) => `${sig[0] === '0' ? '1' : '0'}${sig.slice(1)}`;
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(data) >>> 0);
  const trailerText = `${opts.trailerLine ?? `x-amz-checksum-crc32:${crc.toString('base64')}`}\n`;

  // The body's length must be known before the seed signature, which signs Content-Length:
  // build the framing with placeholder signatures of the right length, then fill them in.
  const frame = (sigs: string[], trailerSig: string) =>
    Buffer.concat([
      ...chunks.flatMap((c, i) => [Buffer.from(`${c.length.toString(16)};chunk-signature=${sigs[i]}\r\n`), c, ...(c.length ? [Buffer.from('\r\n')] : [])]),
      ...(opts.trailer ? [Buffer.from(`${trailerText.replace(/\n$/, '\r\n')}x-amz-trailer-signature:${trailerSig}\r\n\r\n`)] : [Buffer.from('\r\n')]),
    ]);
  const length = frame(
    chunks.map(() => '0'.repeat(64)),
    '0'.repeat(64),
  ).length;

  const host = `${creds.endPoint}:${creds.port}`;
  const p = `/${mine.bucketName}/${key}`;
  const headers: Record<string, string> = {
    host,
    'content-encoding': 'aws-chunked',
    'content-type': 'application/x-streamed',
    'content-length': String(length),
    'x-amz-decoded-content-length': String(data.length),
    'x-amz-content-sha256': payload,
    ...(opts.trailer ? { 'x-amz-trailer': opts.announce ?? 'x-amz-checksum-crc32' } : {}),
  };
  const signed = await signer.sign(
    { method: 'PUT', protocol: 'http:', hostname: creds.endPoint, port: creds.port, path: p, query: {}, headers },
    { signingDate: date },
  );
  const seed = /Signature=([0-9a-f]{64})/.exec(String(signed.headers.authorization))![1]!;
  const sigs = await chunkSignatures(signer, date, seed, chunks);
  let trailerSig = '';
  if (opts.trailer) {
    const scope = `${amzDate(date).slice(0, 8)}/us-east-1/s3/aws4_request`;
    trailerSig = await signer.sign(['AWS4-HMAC-SHA256-TRAILER', amzDate(date), scope, sigs[sigs.length - 1], sha256Hex(trailerText)].join('\n'), {
      signingDate: date,
    });
  }
  if (opts.tamperChunk !== undefined) sigs[opts.tamperChunk] = flip(sigs[opts.tamperChunk]!);
  if (opts.tamperTrailer) trailerSig = flip(trailerSig);
  const body = frame(sigs, trailerSig || '0'.repeat(64));
  expect(body.length).toBe(length);
  return send('PUT', p, signed.headers as Record<string, string>, body);
}

function leftovers(): string[] {
  return fs.readdirSync(path.join(app.dataDir, 'objects/.wharf/tmp'));
}

describe('signed streaming uploads to the embedded endpoint', () => {
  it('STREAMING-AWS4-HMAC-SHA256-PAYLOAD: the decoded bytes are stored, ETag their MD5', async () => {
    const data = randomBytes(200_000);
    const put = await putStreaming('signed.bin', data, 64 * 1024);
    expect(put.status, put.text).toBe(200);
    expect(put.headers.etag).toBe(`"${createHash('md5').update(data).digest('hex')}"`);
    const head = await plain('HEAD', 'signed.bin');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(data.length));
    expect(head.headers['content-type']).toBe('application/x-streamed');
    // aws-chunked was the transfer's framing, not the object's encoding.
    expect(head.headers['content-encoding']).toBeUndefined();
    expect((await getBytes('signed.bin')).equals(data)).toBe(true);
  });

  it('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER with a CRC32 trailer: stored; a wrong trailer signature is refused', async () => {
    const data = randomBytes(150_001);
    const put = await putStreaming('trailer.bin', data, 50_000, { trailer: true });
    expect(put.status, put.text).toBe(200);
    expect((await getBytes('trailer.bin')).equals(data)).toBe(true);

    const bad = await putStreaming('trailer-bad.bin', randomBytes(1000), 400, { trailer: true, tamperTrailer: true });
    expect(bad.status).toBe(403);
    expect(bad.text).toMatch(/<Code>SignatureDoesNotMatch<\/Code>/);
    expect((await plain('HEAD', 'trailer-bad.bin')).status).toBe(404);
  });

  it('trailing checksums: a wrong one is 400 BadDigest, one x-amz-trailer did not announce is refused, an announced SHA-256 is checked', async () => {
    const data = randomBytes(120_000);
    const sha256 = createHash('sha256').update(data).digest('base64');
    const wrong = await putStreaming('sum-bad.bin', data, 50_000, { trailer: true, trailerLine: `x-amz-checksum-crc32:${Buffer.alloc(4).toString('base64')}` });
    expect(wrong.status, wrong.text).toBe(400);
    expect(wrong.text).toMatch(/<Code>BadDigest<\/Code>/);
    const unannounced = await putStreaming('sum-bad.bin', data, 50_000, { trailer: true, trailerLine: `x-amz-checksum-sha256:${sha256}` });
    expect(unannounced.status, unannounced.text).toBe(400);
    expect(unannounced.text).toMatch(/<Code>InvalidRequest<\/Code>.*not announced in x-amz-trailer/);
    expect((await plain('HEAD', 'sum-bad.bin')).status).toBe(404);
    const wrongSha = await putStreaming('sum.bin', data, 50_000, {
      trailer: true,
      announce: 'x-amz-checksum-sha256',
      trailerLine: `x-amz-checksum-sha256:${createHash('sha256').update('other').digest('base64')}`,
    });
    expect(wrongSha.text).toMatch(/<Code>BadDigest<\/Code>/);
    const good = await putStreaming('sum.bin', data, 50_000, {
      trailer: true,
      announce: 'x-amz-checksum-sha256',
      trailerLine: `x-amz-checksum-sha256:${sha256}`,
    });
    expect(good.status, good.text).toBe(200);
    expect((await getBytes('sum.bin')).equals(data)).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it('a tampered chunk signature: 403 SignatureDoesNotMatch, no object, the previous version intact, no temporary file', async () => {
    const first = randomBytes(100_000);
    expect((await putStreaming('kept.bin', first, 32 * 1024)).status).toBe(200);
    for (const [key, chunk] of [
      ['kept.bin', 1],
      ['never.bin', 0],
      ['never.bin', 3], // the final, empty chunk: every byte arrived, still refused
    ] as const) {
      const res = await putStreaming(key, randomBytes(100_000), 32 * 1024, { tamperChunk: chunk });
      expect(res.status, `${key} chunk ${chunk}`).toBe(403);
      expect(res.text).toMatch(/<Code>SignatureDoesNotMatch<\/Code>/);
    }
    expect((await plain('HEAD', 'never.bin')).status).toBe(404);
    expect((await getBytes('kept.bin')).equals(first)).toBe(true);
    expect(leftovers()).toEqual([]);
  });
});

/** GETs an object's bytes with a signed request. */
async function getBytes(key: string): Promise<Buffer> {
  const host = `${creds.endPoint}:${creds.port}`;
  const p = `/${mine.bucketName}/${key}`;
  const signed = await signer.sign({
    method: 'GET',
    protocol: 'http:',
    hostname: creds.endPoint,
    port: creds.port,
    path: p,
    query: {},
    headers: { host, 'x-amz-content-sha256': EMPTY_SHA256 },
  });
  return new Promise((resolve, reject) => {
    http
      .get({ host: creds.endPoint, port: creds.port, path: p, headers: signed.headers as Record<string, string> }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(Buffer.concat(parts)) : reject(new Error(`GET ${key}: ${res.statusCode} ${Buffer.concat(parts).toString()}`)),
        );
      })
      .on('error', reject);
  });
}
