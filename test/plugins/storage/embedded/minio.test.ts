/**
 * The embedded object store through the `minio` npm client (its own SigV4 signer, its own XML
 * parsing), with the credentials POST /api/tokens/validate returns: put, stat, get (with a
 * range), list, delete, a multipart upload (a stream larger than the 5 MiB part size), and
 * another app's bucket refused.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as Minio from 'minio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../../helpers/app.ts';
import { signIn } from '../../../helpers/identity.ts';
import { createApp, createToken } from '../../../helpers/storage.ts';

const PART = 5 * 1024 * 1024;

let app: TestApp;
let mine: any;
let other: any;
let client: Minio.Client;

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(parts);
}

async function listAll(prefix: string, recursive: boolean): Promise<Minio.BucketItem[]> {
  const out: Minio.BucketItem[] = [];
  for await (const item of client.listObjectsV2(mine.bucketName, prefix, recursive)) out.push(item as Minio.BucketItem);
  return out;
}

async function errorOf(p: Promise<unknown>): Promise<{ code: string | undefined }> {
  try {
    await p;
    return { code: undefined };
  } catch (err) {
    return { code: (err as { code?: string }).code };
  }
}

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  const owner = await signIn(app);
  mine = await createApp(app, owner, 'minio');
  other = await createApp(app, owner, 'minio-other');
  const res = await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, mine.id) } });
  expect(res.status).toBe(200);
  const c = res.body.storage;
  // Exactly the StorageConfig fields, as a backend would pass them; the region saves the
  // client's GetBucketLocation round trip.
  client = new Minio.Client({
    endPoint: c.endPoint,
    port: c.port,
    useSSL: c.useSSL,
    accessKey: c.accessKey,
    secretKey: c.secretKey,
    region: 'us-east-1',
    partSize: PART,
  });
});

afterAll(async () => {
  await app?.close();
});

describe('minio npm client with the validated credentials', () => {
  it('put, stat, get (whole and a range), list, delete', async () => {
    const body = randomBytes(150_000);
    const put = await client.putObject(mine.bucketName, 'docs/a.bin', body, body.length, { 'Content-Type': 'application/x-minio', 'X-Amz-Meta-Colour': 'red' });
    expect(put.etag).toBe(createHash('md5').update(body).digest('hex'));
    await client.putObject(mine.bucketName, 'docs/sub/b.txt', 'hello minio');
    await client.putObject(mine.bucketName, 'top.txt', Buffer.from('top'));

    const stat = await client.statObject(mine.bucketName, 'docs/a.bin');
    expect(stat.size).toBe(body.length);
    expect(stat.etag).toBe(put.etag);
    expect(stat.metaData).toMatchObject({ 'content-type': 'application/x-minio', colour: 'red' });

    expect((await readAll(await client.getObject(mine.bucketName, 'docs/a.bin'))).equals(body)).toBe(true);
    expect((await readAll(await client.getPartialObject(mine.bucketName, 'docs/a.bin', 1000, 50))).equals(body.subarray(1000, 1050))).toBe(true);
    expect((await readAll(await client.getObject(mine.bucketName, 'docs/sub/b.txt'))).toString()).toBe('hello minio');

    const shallow = await listAll('docs/', false);
    expect(shallow.map((i) => i.name ?? i.prefix)).toEqual(['docs/a.bin', 'docs/sub/']);
    const deep = await listAll('', true);
    expect(deep.map((i) => [i.name, i.size])).toEqual([
      ['docs/a.bin', body.length],
      ['docs/sub/b.txt', 11],
      ['top.txt', 3],
    ]);

    await client.removeObject(mine.bucketName, 'top.txt');
    // removeObjects is DeleteObjects (POST ?delete) underneath.
    const failed = await client.removeObjects(mine.bucketName, ['docs/a.bin', 'docs/sub/b.txt']);
    expect(failed.filter((r: any) => r.Code || r.code)).toEqual([]);
    expect(await listAll('', true)).toEqual([]);
    expect(await errorOf(client.statObject(mine.bucketName, 'docs/a.bin'))).toMatchObject({ code: 'NotFound' });
  });

  it('multipart: a 12 MiB stream goes up in 5 MiB parts and reads back whole', async () => {
    const body = randomBytes(12 * 1024 * 1024);
    // A stream (not a Buffer) longer than partSize: the client uses a multipart upload.
    const source = Readable.from(
      (function* () {
        for (let at = 0; at < body.length; at += 1 << 20) yield body.subarray(at, at + (1 << 20));
      })(),
    );
    const put = await client.putObject(mine.bucketName, 'big.bin', source, body.length, { 'Content-Type': 'video/mp4' });
    expect(put.etag).toMatch(/^[0-9a-f]{32}-3$/);
    const stat = await client.statObject(mine.bucketName, 'big.bin');
    expect(stat).toMatchObject({ size: body.length, etag: put.etag, metaData: expect.objectContaining({ 'content-type': 'video/mp4' }) });
    const back = await readAll(await client.getObject(mine.bucketName, 'big.bin'));
    expect(createHash('sha256').update(back).digest('hex')).toBe(createHash('sha256').update(body).digest('hex'));
    // Nothing left of the upload: no open upload, no part files.
    const open: unknown[] = [];
    for await (const u of client.listIncompleteUploads(mine.bucketName, '', true)) open.push(u);
    expect(open).toEqual([]);
    expect(fs.readdirSync(path.join(app.dataDir, 'objects/.wharf/multipart'))).toEqual([]);
    await client.removeObject(mine.bucketName, 'big.bin');
  });

  it("another app's bucket: AccessDenied, and nothing written there", async () => {
    expect(await errorOf(client.putObject(other.bucketName, 'x', Buffer.from('x')))).toEqual({ code: 'AccessDenied' });
    expect(await errorOf(client.getObject(other.bucketName, 'x'))).toEqual({ code: 'AccessDenied' });
    expect(await errorOf(client.removeObject(other.bucketName, 'x'))).toEqual({ code: 'AccessDenied' });
    // Listing buckets shows the key's own bucket, not the other app's.
    expect((await client.listBuckets()).map((b) => b.name)).toEqual([mine.bucketName]);
    expect(fs.readdirSync(path.join(app.dataDir, 'objects', other.bucketName))).toEqual([]);
  });
});
