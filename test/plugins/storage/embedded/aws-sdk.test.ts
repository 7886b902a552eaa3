/**
 * The embedded object store (`fs` driver, the default) through @aws-sdk/client-s3 with its
 * default settings (CRC32 checksums, aws-chunked bodies with trailers), using the credentials
 * POST /api/tokens/validate returns; plus the bad input the store must refuse clearly.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeSha256 } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { startApp, type TestApp } from '../../../helpers/app.ts';
import { type SignedIn, signIn } from '../../../helpers/identity.ts';
import { createApp, createToken, localFile, uploadFiles } from '../../../helpers/storage.ts';

let app: TestApp;
let owner: SignedIn;
let mine: any;
let other: any;
let creds: any;
let otherCreds: any;
let s3: S3Client;

function client(c: { endPoint: string; port: number; useSSL: boolean; accessKey: string; secretKey: string }, extra: Record<string, unknown> = {}): S3Client {
  return new S3Client({
    endpoint: `${c.useSSL ? 'https' : 'http'}://${c.endPoint}:${c.port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: c.accessKey, secretAccessKey: c.secretKey },
    maxAttempts: 1,
    ...extra,
  });
}

async function statusOf(p: Promise<unknown>): Promise<{ status: number | undefined; name: string | undefined }> {
  try {
    await p;
    return { status: 200, name: undefined };
  } catch (err) {
    const e = err as { $metadata?: { httpStatusCode?: number }; name?: string };
    return { status: e.$metadata?.httpStatusCode, name: e.name };
  }
}

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  owner = await signIn(app);
  mine = await createApp(app, owner, 'mine');
  other = await createApp(app, owner, 'other');
  const validate = async (appId: string) => (await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, appId) } })).body;
  creds = (await validate(mine.id)).storage;
  otherCreds = (await validate(other.id)).storage;
  s3 = client(creds);
});

afterAll(async () => {
  s3?.destroy();
  await app?.close();
});

describe('a server with no storage config', () => {
  it('uses the embedded store: ready, apps creatable, per-app keys handed out', async () => {
    const ready = await app.fetch('/readyz');
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as any).checks.storage).toBe(true);
    expect(fs.existsSync(path.join(app.dataDir, 'objects', mine.bucketName))).toBe(true);
    expect(creds).toMatchObject({ endPoint: '127.0.0.1', useSSL: false, port: expect.any(Number) });
    expect(creds.accessKey).not.toBe(otherCreds.accessKey);
    // The root key is in the data dir and never handed out.
    const root = JSON.parse(fs.readFileSync(path.join(app.dataDir, 'keys/s3-root.json'), 'utf8'));
    expect(creds.accessKey).not.toBe(root.accessKey);
    // The per-app secret is stored encrypted.
    const index = fs.readFileSync(path.join(app.dataDir, 'objects/.wharf/index.db'));
    expect(index.includes(Buffer.from(creds.secretKey))).toBe(false);
  });
});

describe('@aws-sdk/client-s3 with the validated credentials (default checksums: aws-chunked with trailers)', () => {
  it('put, head, get (with Range), list, copy, delete', async () => {
    const body = randomBytes(100_000);
    const put = await s3.send(
      new PutObjectCommand({ Bucket: mine.bucketName, Key: 'dir/a.bin', Body: body, ContentType: 'application/x-test', Metadata: { colour: 'blue' } }),
    );
    expect(put.ETag).toBe(`"${createHash('md5').update(body).digest('hex')}"`);
    const head = await s3.send(new HeadObjectCommand({ Bucket: mine.bucketName, Key: 'dir/a.bin' }));
    expect(head).toMatchObject({ ContentLength: body.length, ContentType: 'application/x-test', Metadata: { colour: 'blue' }, ETag: put.ETag });
    const got = await s3.send(new GetObjectCommand({ Bucket: mine.bucketName, Key: 'dir/a.bin' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    const range = await s3.send(new GetObjectCommand({ Bucket: mine.bucketName, Key: 'dir/a.bin', Range: 'bytes=10-19' }));
    expect(range.ContentRange).toBe(`bytes 10-19/${body.length}`);
    expect(Buffer.from(await range.Body!.transformToByteArray()).equals(body.subarray(10, 20))).toBe(true);
    // A stream body: the SDK sends it aws-chunked, STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer.
    const { Readable } = await import('node:stream');
    await s3.send(
      new PutObjectCommand({ Bucket: mine.bucketName, Key: 'dir/b.txt', Body: Readable.from([Buffer.from('hel'), Buffer.from('lo')]), ContentLength: 5 }),
    );
    expect(await (await s3.send(new GetObjectCommand({ Bucket: mine.bucketName, Key: 'dir/b.txt' }))).Body!.transformToString()).toBe('hello');
    await s3.send(new CopyObjectCommand({ Bucket: mine.bucketName, Key: 'copy/a.bin', CopySource: `${mine.bucketName}/dir/a.bin` }));
    const list = await s3.send(new ListObjectsV2Command({ Bucket: mine.bucketName, Delimiter: '/' }));
    expect(list.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['copy/', 'dir/']);
    const inDir = await s3.send(new ListObjectsV2Command({ Bucket: mine.bucketName, Prefix: 'dir/' }));
    expect(inDir.Contents?.map((c) => [c.Key, c.Size])).toEqual([
      ['dir/a.bin', body.length],
      ['dir/b.txt', 5],
    ]);
    await s3.send(new DeleteObjectCommand({ Bucket: mine.bucketName, Key: 'dir/b.txt' }));
    const del = await s3.send(
      new DeleteObjectsCommand({ Bucket: mine.bucketName, Delete: { Objects: [{ Key: 'dir/a.bin' }, { Key: 'copy/a.bin' }, { Key: 'never' }] } }),
    );
    expect(del.Deleted?.map((d) => d.Key).sort()).toEqual(['copy/a.bin', 'dir/a.bin', 'never']);
    expect((await s3.send(new ListObjectsV2Command({ Bucket: mine.bucketName }))).KeyCount).toBe(0);
  });

  it('pages ListObjectsV2 with max-keys and continuation tokens, prefixes rolled up', async () => {
    const keys = ['a/1', 'a/2', 'b', 'c/x/1', 'c/y', 'd'];
    for (const Key of keys) await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key, Body: 'x' }));
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page: ListObjectsV2CommandOutput = await s3.send(
        new ListObjectsV2Command({ Bucket: mine.bucketName, Delimiter: '/', MaxKeys: 2, ContinuationToken: token }),
      );
      seen.push(...(page.Contents ?? []).map((c) => c.Key!), ...(page.CommonPrefixes ?? []).map((p) => p.Prefix!));
      token = page.NextContinuationToken;
      expect((page.KeyCount ?? 0) <= 2).toBe(true);
    } while (token);
    expect(seen.sort()).toEqual(['a/', 'b', 'c/', 'd']);
    const all: string[] = [];
    token = undefined;
    do {
      const page: ListObjectsV2CommandOutput = await s3.send(new ListObjectsV2Command({ Bucket: mine.bucketName, MaxKeys: 4, ContinuationToken: token }));
      all.push(...(page.Contents ?? []).map((c) => c.Key!));
      token = page.NextContinuationToken;
    } while (token);
    expect(all).toEqual(keys);
    await s3.send(new DeleteObjectsCommand({ Bucket: mine.bucketName, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }));
  });

  it('multipart: create, upload parts, list parts, complete; abort', async () => {
    const part1 = randomBytes(5 * 1024 * 1024);
    const part2 = randomBytes(1234);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: mine.bucketName, Key: 'big.bin', ContentType: 'video/mp4' }));
    const e1 = (await s3.send(new UploadPartCommand({ Bucket: mine.bucketName, Key: 'big.bin', UploadId, PartNumber: 1, Body: part1 }))).ETag!;
    const e2 = (await s3.send(new UploadPartCommand({ Bucket: mine.bucketName, Key: 'big.bin', UploadId, PartNumber: 2, Body: part2 }))).ETag!;
    const parts = await s3.send(new ListPartsCommand({ Bucket: mine.bucketName, Key: 'big.bin', UploadId }));
    expect(parts.Parts?.map((p) => [p.PartNumber, p.Size])).toEqual([
      [1, part1.length],
      [2, part2.length],
    ]);
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: mine.bucketName,
        Key: 'big.bin',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: e1 },
            { PartNumber: 2, ETag: e2 },
          ],
        },
      }),
    );
    expect(done.ETag).toMatch(/-2"$/);
    const got = await s3.send(new GetObjectCommand({ Bucket: mine.bucketName, Key: 'big.bin' }));
    expect(got.ContentType).toBe('video/mp4');
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat([part1, part2]))).toBe(true);
    const second = await s3.send(new CreateMultipartUploadCommand({ Bucket: mine.bucketName, Key: 'never.bin' }));
    await s3.send(new AbortMultipartUploadCommand({ Bucket: mine.bucketName, Key: 'never.bin', UploadId: second.UploadId }));
    expect((await statusOf(s3.send(new ListPartsCommand({ Bucket: mine.bucketName, Key: 'never.bin', UploadId: second.UploadId })))).name).toBe('NoSuchUpload');
    await s3.send(new DeleteObjectCommand({ Bucket: mine.bucketName, Key: 'big.bin' }));
  });

  it('stream bodies without checksums (UNSIGNED-PAYLOAD), as configured for RGW and Garage', async () => {
    const quiet = client(creds, { requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    try {
      const { Readable } = await import('node:stream');
      const body = randomBytes(200_000);
      await quiet.send(
        new PutObjectCommand({
          Bucket: mine.bucketName,
          Key: 'stream.bin',
          Body: Readable.from([body.subarray(0, 70_000), body.subarray(70_000)]),
          ContentLength: body.length,
        }),
      );
      const got = await quiet.send(new GetObjectCommand({ Bucket: mine.bucketName, Key: 'stream.bin' }));
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    } finally {
      quiet.destroy();
    }
  });
});

describe('keys and buckets', () => {
  it("app A's key cannot touch app B's bucket: 403 AccessDenied", async () => {
    for (const p of [
      () => s3.send(new PutObjectCommand({ Bucket: other.bucketName, Key: 'x', Body: 'x' })),
      () => s3.send(new ListObjectsV2Command({ Bucket: other.bucketName })),
      () => s3.send(new GetObjectCommand({ Bucket: other.bucketName, Key: 'x' })),
      () => s3.send(new DeleteObjectsCommand({ Bucket: other.bucketName, Delete: { Objects: [{ Key: 'x' }] } })),
      () => s3.send(new CopyObjectCommand({ Bucket: mine.bucketName, Key: 'stolen', CopySource: `${other.bucketName}/x` })),
      () => s3.send(new CreateBucketCommand({ Bucket: 'wharf-mine-now' })),
      () => s3.send(new CreateBucketCommand({ Bucket: other.bucketName })),
    ]) {
      expect(await statusOf(p())).toEqual({ status: 403, name: 'AccessDenied' });
    }
    // ListBuckets shows the key's own bucket only (s3-behaviour.test.ts has the rest).
    expect((await s3.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name)).toEqual([mine.bucketName]);
  });

  it('a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId (403)', async () => {
    const wrong = client({ ...creds, secretKey: `${creds.secretKey}x` });
    const unknown = client({ ...creds, accessKey: 'WAPPNOSUCHKEY0000000' });
    expect(await statusOf(wrong.send(new HeadBucketCommand({ Bucket: mine.bucketName })))).toMatchObject({ status: 403 });
    expect(await statusOf(wrong.send(new ListObjectsV2Command({ Bucket: mine.bucketName })))).toEqual({ status: 403, name: 'SignatureDoesNotMatch' });
    expect(await statusOf(unknown.send(new ListObjectsV2Command({ Bucket: mine.bucketName })))).toEqual({ status: 403, name: 'InvalidAccessKeyId' });
    wrong.destroy();
    unknown.destroy();
  });

  it('the root key lists, creates and deletes buckets', async () => {
    const root = JSON.parse(fs.readFileSync(path.join(app.dataDir, 'keys/s3-root.json'), 'utf8'));
    const admin = client({ ...creds, accessKey: root.accessKey, secretKey: root.secretKey });
    await admin.send(new CreateBucketCommand({ Bucket: 'admin-made' }));
    const names = (await admin.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name);
    expect(names).toEqual(expect.arrayContaining([mine.bucketName, other.bucketName, 'admin-made']));
    const { DeleteBucketCommand } = await import('@aws-sdk/client-s3');
    await admin.send(new DeleteBucketCommand({ Bucket: 'admin-made' }));
    admin.destroy();
  });
});

describe('presigned URLs', () => {
  it('the upload round trip of the file API works against the embedded store', async () => {
    const [file] = await uploadFiles(app, owner, mine.id, [localFile('hello.txt', 33, 'text/plain')]);
    expect(file).toMatchObject({ name: 'hello.txt', size: 33 });
    const dl = await app.request('GET', `/api/files/download?fileId=${file.id}`, { headers: owner.headers });
    const res = await fetch(dl.body.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(/hello\.txt/);
    expect((await res.arrayBuffer()).byteLength).toBe(33);
  });

  it('a tampered signature is 403 SignatureDoesNotMatch; an expired URL is 403 AccessDenied', async () => {
    await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'p.txt', Body: 'presigned' }));
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: mine.bucketName, Key: 'p.txt' }), { expiresIn: 60 });
    expect(await (await fetch(url)).text()).toBe('presigned');
    const tampered = url.replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`);
    const bad = await fetch(tampered);
    expect(bad.status).toBe(403);
    expect(await bad.text()).toMatch(/<Code>SignatureDoesNotMatch<\/Code>/);
    const otherKey = url.replace(/p\.txt/, 'q.txt');
    expect((await fetch(otherKey)).status).toBe(403);
    const old = await getSignedUrl(s3, new GetObjectCommand({ Bucket: mine.bucketName, Key: 'p.txt' }), {
      expiresIn: 1,
      signingDate: new Date(Date.now() - 10_000),
    });
    const expired = await fetch(old);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toMatch(/<Code>AccessDenied<\/Code><Message>Request has expired<\/Message>/);
  });

  it('answers CORS preflights for browser PUTs to presigned URLs', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: mine.bucketName, Key: 'browser.txt' }), { expiresIn: 60 });
    const pre = await fetch(url, {
      method: 'OPTIONS',
      headers: { origin: 'http://example.test', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type' },
    });
    expect(pre.status).toBe(200);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-methods')).toMatch(/PUT/);
    const put = await fetch(url, { method: 'PUT', body: 'from a browser', headers: { origin: 'http://example.test' } });
    expect(put.status).toBe(200);
    expect(put.headers.get('access-control-expose-headers')).toMatch(/ETag/);
  });
});

describe('bad input', () => {
  it('malformed XML in CompleteMultipartUpload and DeleteObjects: 400 MalformedXML', async () => {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: mine.bucketName, Key: 'm.bin' }));
    const post = async (query: string, xml: string) => {
      // Sign a raw POST with the SDK's own signer.
      const signer = new SignatureV4({
        credentials: { accessKeyId: creds.accessKey, secretAccessKey: creds.secretKey },
        region: 'us-east-1',
        service: 's3',
        sha256: NodeSha256,
        uriEscapePath: false,
      });
      const [pathPart, q] = query.split('?');
      const params = Object.fromEntries(new URLSearchParams(q));
      const signed = (await signer.sign({
        method: 'POST',
        protocol: 'http:',
        hostname: creds.endPoint,
        port: creds.port,
        path: pathPart!,
        query: params,
        headers: {
          host: `${creds.endPoint}:${creds.port}`,
          'x-amz-content-sha256': createHash('sha256').update(xml).digest('hex'),
          'content-type': 'application/xml',
        },
        body: xml,
      } as never)) as unknown as { headers: Record<string, string> };
      return fetch(`http://${creds.endPoint}:${creds.port}${query}`, { method: 'POST', headers: signed.headers, body: xml });
    };
    for (const [query, xml] of [
      [`/${mine.bucketName}/m.bin?uploadId=${UploadId}`, '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>'],
      [`/${mine.bucketName}/m.bin?uploadId=${UploadId}`, 'not xml at all'],
      [`/${mine.bucketName}?delete=`, '<Delete><Object><Key>a</Key></Object>'],
      [`/${mine.bucketName}?delete=`, '<Delete><Object><Key>a</Key></Objekt></Delete>'],
    ] as const) {
      const res = await post(query, xml);
      expect(res.status, xml).toBe(400);
      expect(await res.text()).toMatch(/<Code>MalformedXML<\/Code>/);
    }
  });

  it('keys that try to leave the bucket directory stay keys inside the bucket', async () => {
    const objects = path.join(app.dataDir, 'objects');
    const before = fs.readdirSync(objects).sort();
    for (const Key of ['../escape', '../../../../etc/wharf-escape', '%2e%2e/%2e%2e/x', '..\\..\\win', '/absolute/path', 'a/../../b', '..']) {
      await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key, Body: Key }));
      const got = await s3.send(new GetObjectCommand({ Bucket: mine.bucketName, Key }));
      expect(await got.Body!.transformToString()).toBe(Key);
    }
    // Nothing appeared outside the bucket's own directory.
    expect(fs.readdirSync(objects).sort()).toEqual(before);
    expect(fs.existsSync('/etc/wharf-escape')).toBe(false);
    expect(fs.existsSync(path.join(app.dataDir, 'escape'))).toBe(false);
    // NUL is refused.
    const nul = await statusOf(s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'a\0b', Body: 'x' })));
    expect(nul.status).toBe(400);
  });
});
