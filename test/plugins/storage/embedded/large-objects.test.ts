/**
 * Large objects through the embedded endpoint (issue 16 part 7): a body received in 1 MiB writes
 * with the next MiB hashed while the last is written, and read back in 1 MiB reads with the next
 * read in flight while the socket takes the last. Through the AWS SDK (payloads signed, as it
 * signs them over HTTP): the bytes and ETags are the body's, Range and partNumber reads across the
 * reads' boundaries, multipart; a body that does not match its signed SHA-256 is an S3 XML error
 * and stores nothing; a client that goes away mid-GET, or a blob shorter than its row, leaves no
 * file open and the endpoint serving.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../core/logger.ts';
import { NodeSha256 } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { startStandaloneStore } from '../../../../plugins/storage/drivers/fs/index.ts';
import { tempDir } from '../../../helpers/app.ts';
import { errorCode, outcome, rawRequest } from '../../../helpers/embedded.ts';

const MiB = 1024 * 1024;
const md5Hex = (b: Buffer) => createHash('md5').update(b).digest('hex');
const bucket = 'large';
const root = { accessKey: 'large-root', secretKey: 'large-secret' };

let dir: string;
let store: { url: string; close(): Promise<void> };
let s3: S3Client;

beforeAll(async () => {
  dir = tempDir('wharf-large-');
  store = await startStandaloneStore({ objectsDir: dir, listen: '127.0.0.1:0', region: 'us-east-1', root, log: createLogger('silent') });
  s3 = new S3Client({
    endpoint: store.url,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: root.accessKey, secretAccessKey: root.secretKey },
    maxAttempts: 1,
  });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
});

afterAll(async () => {
  s3?.destroy();
  await store?.close();
});

async function bytesOf(key: string, extra: { Range?: string; PartNumber?: number } = {}): Promise<{ body: Buffer; range?: string; etag?: string }> {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...extra }));
  return { body: Buffer.from(await got.Body!.transformToByteArray()), range: got.ContentRange, etag: got.ETag };
}

/** SigV4 headers (the SDK's signer) for a request to `key`, its payload hash as given. */
async function signedHeaders(method: 'GET' | 'PUT', key: string, headers: Record<string, string>): Promise<{ url: URL; headers: Record<string, string> }> {
  const url = new URL(`${store.url}/${bucket}/${key}`);
  const signer = new SignatureV4({
    credentials: { accessKeyId: root.accessKey, secretAccessKey: root.secretKey },
    region: 'us-east-1',
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
  });
  const signed = await signer.sign({
    method,
    protocol: 'http:',
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    query: {},
    headers: { host: url.host, ...headers },
  });
  return { url, headers: signed.headers };
}

/** Files of this process open under the bucket's directory (blobs being read). */
function openBlobs(): string[] {
  const under = path.join(fs.realpathSync(dir), bucket) + path.sep;
  return fs
    .readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    })
    .filter((target) => target.startsWith(under));
}

async function noBlobOpen(): Promise<void> {
  for (let i = 0; i < 100 && openBlobs().length; i++) await new Promise((r) => setTimeout(r, 20));
  expect(openBlobs()).toEqual([]);
}

// 5 MiB and 3 bytes: five full reads and a short one; received in 1 MiB writes.
const big = randomBytes(5 * MiB + 3);

describe('a 5 MiB object through the AWS SDK', () => {
  beforeAll(async () => {
    const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'big.bin', Body: big }));
    expect(put.ETag).toBe(`"${md5Hex(big)}"`);
  });

  it('is read back whole: the same bytes, its MD5 as ETag, no file left open', async () => {
    const got = await bytesOf('big.bin');
    expect(got.body.equals(big)).toBe(true);
    expect(got.etag).toBe(`"${md5Hex(big)}"`);
    await noBlobOpen();
  });

  it.each([
    ['within the first read', 'bytes=10-19', 10, 19],
    ['across the first 1 MiB boundary', `bytes=${MiB - 5}-${MiB + 4}`, MiB - 5, MiB + 4],
    ['exactly the second MiB', `bytes=${MiB}-${2 * MiB - 1}`, MiB, 2 * MiB - 1],
    ['across three reads', `bytes=${MiB / 2}-${3 * MiB}`, MiB / 2, 3 * MiB],
    ['from inside the last full read to the end', `bytes=${5 * MiB - 7}-`, 5 * MiB - 7, 5 * MiB + 2],
    ['a suffix of 2 MiB and 1 byte', `bytes=-${2 * MiB + 1}`, 3 * MiB + 2, 5 * MiB + 2],
    ['an end past the object', `bytes=${4 * MiB}-${9 * MiB}`, 4 * MiB, 5 * MiB + 2],
  ])('Range %s: 206 with its Content-Range and exactly those bytes', async (_, Range, start, end) => {
    const got = await bytesOf('big.bin', { Range });
    expect(got.range).toBe(`bytes ${start}-${end}/${big.length}`);
    expect(got.body.equals(big.subarray(start, end + 1))).toBe(true);
  });

  it('a Range past the end: 416 InvalidRange', async () => {
    expect(await outcome(bytesOf('big.bin', { Range: `bytes=${big.length}-` }))).toMatchObject({ status: 416, name: 'InvalidRange' });
  });
});

describe('a multipart object of 5 MiB and 1.5 MiB parts', () => {
  const parts = [randomBytes(5 * MiB), randomBytes(1.5 * MiB)];

  it('whole and by part: the parts’ bytes, the multipart ETag', async () => {
    const key = 'multi.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const done: { PartNumber: number; ETag: string }[] = [];
    for (const [i, Body] of parts.entries()) {
      const { ETag } = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body }));
      expect(ETag).toBe(`"${md5Hex(Body)}"`);
      done.push({ PartNumber: i + 1, ETag: ETag! });
    }
    const out = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: done } }));
    const etag = `"${createHash('md5')
      .update(Buffer.concat(parts.map((p) => createHash('md5').update(p).digest())))
      .digest('hex')}-2"`;
    expect(out.ETag).toBe(etag);
    const whole = await bytesOf(key);
    expect(whole.body.equals(Buffer.concat(parts))).toBe(true);
    expect(whole.etag).toBe(etag);
    const second = await bytesOf(key, { PartNumber: 2 });
    expect(second.range).toBe(`bytes ${5 * MiB}-${6.5 * MiB - 1}/${6.5 * MiB}`);
    expect(second.body.equals(parts[1]!)).toBe(true);
  });
});

describe('bad bodies', () => {
  it('3 MiB that do not match their signed x-amz-content-sha256: 400 XAmzContentSHA256Mismatch, nothing stored, the previous version intact', async () => {
    const key = 'checked.bin';
    const before = randomBytes(1000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: before }));
    const body = randomBytes(3 * MiB);
    const other = createHash('sha256').update(randomBytes(16)).digest('hex');
    const { url, headers } = await signedHeaders('PUT', key, { 'x-amz-content-sha256': other, 'content-length': String(body.length) });
    const res = await rawRequest(url.href, { method: 'PUT', headers, body });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/xml');
    expect(errorCode(res.text)).toBe('XAmzContentSHA256Mismatch');
    const now = await bytesOf(key);
    expect(now.body.equals(before)).toBe(true);
    expect(fs.readdirSync(path.join(dir, '.wharf', 'tmp'))).toEqual([]);
  });

  it('a client that goes away half-way through a 4 MiB body: nothing stored, no temporary file', async () => {
    const key = 'abandoned.bin';
    const { url, headers } = await signedHeaders('PUT', key, { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'content-length': String(4 * MiB) });
    await new Promise<void>((resolve) => {
      const req = http.request(url, { method: 'PUT', headers, agent: false });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(randomBytes(2 * MiB), () => setTimeout(() => req.destroy(), 100));
    });
    expect(await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })))).toMatchObject({ status: 404, name: 'NotFound' });
    for (let i = 0; i < 100 && fs.readdirSync(path.join(dir, '.wharf', 'tmp')).length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(fs.readdirSync(path.join(dir, '.wharf', 'tmp'))).toEqual([]);
  });
});

describe('GETs that end early', () => {
  it('a client that goes away after the first bytes: no file left open, the next GET whole', async () => {
    const { url, headers } = await signedHeaders('GET', 'big.bin', { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' });
    const first = await new Promise<number>((resolve, reject) => {
      const req = http.request(url, { headers, agent: false }, (res) => {
        res.once('data', (chunk: Buffer) => {
          resolve(res.statusCode === 200 ? chunk.length : -1);
          req.destroy();
        });
      });
      req.on('error', () => undefined);
      req.on('close', () => reject(new Error('closed before any byte')));
      req.end();
    });
    expect(first).toBeGreaterThan(0);
    await noBlobOpen();
    expect((await bytesOf('big.bin')).body.equals(big)).toBe(true);
  });

  it('a blob shorter than its row (damaged on disk): the connection is dropped before the declared length, no file left open', async () => {
    const key = 'damaged.bin';
    const data = randomBytes(3 * MiB);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: data }));
    // The one blob written for it: the newest file under the bucket.
    const blobs = fs
      .readdirSync(path.join(dir, bucket), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.join(e.parentPath, e.name));
    const blob = blobs.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0]!;
    expect(fs.statSync(blob).size).toBe(data.length);
    fs.truncateSync(blob, 1.5 * MiB);
    const got = await outcome(bytesOf(key));
    expect(got.status).not.toBe(200);
    await noBlobOpen();
    expect((await bytesOf('big.bin')).body.equals(big)).toBe(true);
  });
});
