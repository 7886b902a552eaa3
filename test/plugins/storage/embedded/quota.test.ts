/**
 * The storage limit as a quota on the embedded store (`fs` driver): every write path (presigned
 * PUT from phase 1, PutObject with the app key through the AWS SDK, a body of unknown length,
 * multipart, CopyObject, register, complete) and writers racing, each checked against the real
 * bytes in the bucket as the root key lists them (objects and the parts of unfinished multipart
 * uploads), never against the records. Also: the usage fields of GET /api/apps, overwrites
 * through S3 carried into the records, and a limit lowered below the usage.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../../helpers/app.ts';
import { type SignedIn, signIn } from '../../../helpers/identity.ts';
import { bearer, createApp, createToken, localFile, putTo, requestUploads } from '../../../helpers/storage.ts';

const MiB = 1024 * 1024;

interface Creds {
  endPoint: string;
  port: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
}

let app: TestApp;
let owner: SignedIn;
let endpoint: string;
let root: S3Client;

function client(c: { accessKey: string; secretKey: string }): S3Client {
  return new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: c.accessKey, secretAccessKey: c.secretKey },
    maxAttempts: 1,
  });
}

/** What an SDK call ended with: 200, or the error's status and code. */
async function outcome(p: Promise<unknown>): Promise<{ status: number | undefined; code: string | undefined }> {
  try {
    await p;
    return { status: 200, code: undefined };
  } catch (err) {
    const e = err as { $metadata?: { httpStatusCode?: number }; name?: string; Code?: string };
    return { status: e.$metadata?.httpStatusCode, code: e.Code ?? e.name };
  }
}

const REFUSED = { status: 403, code: 'QuotaExceeded' };
const OK = { status: 200, code: undefined };

/** The bytes the bucket really holds, as the root key lists them: objects plus parts of unfinished uploads. */
async function realBytes(bucket: string): Promise<number> {
  let total = 0;
  let token: string | undefined;
  do {
    const page: ListObjectsV2CommandOutput = await root.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
    for (const o of page.Contents ?? []) total += o.Size ?? 0;
    token = page.NextContinuationToken;
  } while (token);
  const uploads = await root.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  for (const u of uploads.Uploads ?? []) {
    const parts = await root.send(new ListPartsCommand({ Bucket: bucket, Key: u.Key, UploadId: u.UploadId }));
    for (const p of parts.Parts ?? []) total += p.Size ?? 0;
  }
  return total;
}

async function keysOf(bucket: string): Promise<string[]> {
  return ((await root.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
}

/** Bytes being received that a refused request left behind (there must be none). */
function leftovers(): string[] {
  return fs.readdirSync(path.join(app.dataDir, 'objects/.wharf/tmp'));
}

/** An app with `limit` bytes, its token and an S3 client with its own key. */
async function limitedApp(limit: number | null): Promise<{ bucket: string; id: string; token: string; s3: S3Client; creds: Creds }> {
  const made = await createApp(app, owner, `quota ${randomBytes(3).toString('hex')}`, limit);
  const token = await createToken(app, owner, made.id);
  const creds = (await app.request('POST', '/api/tokens/validate', { body: { token } })).body.storage as Creds;
  return { bucket: made.bucketName, id: made.id, token, s3: client(creds), creds };
}

async function appItem(id: string): Promise<any> {
  const res = await app.request('GET', `/api/apps?appId=${id}`, { headers: owner.headers });
  expect(res.status).toBe(200);
  return res.body.app;
}

function setLimit(id: string, storageLimit: number | null) {
  return app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: id, storageLimit } });
}

function register(token: string, files: { key: string; size: number }[]) {
  return app.request('POST', '/api/files', {
    body: { token, files: files.map((f) => ({ ...f, name: path.basename(f.key), type: 'application/octet-stream' })) },
  });
}

/** A PUT of a body of unknown length (chunked transfer encoding, no Content-Length) to a presigned URL. */
function putChunked(url: string, chunks: Buffer[]): Promise<Response> {
  const body = new ReadableStream({
    async pull(controller) {
      const next = chunks.shift();
      if (next) controller.enqueue(new Uint8Array(next));
      else controller.close();
    },
  });
  return fetch(url, { method: 'PUT', body, duplex: 'half' } as RequestInit);
}

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  owner = await signIn(app);
  const probe = await limitedApp(null);
  endpoint = `http://${probe.creds.endPoint}:${probe.creds.port}`;
  probe.s3.destroy();
  const key = JSON.parse(fs.readFileSync(path.join(app.dataDir, 'keys/s3-root.json'), 'utf8'));
  root = client(key);
});

afterAll(async () => {
  root?.destroy();
  await app?.close();
});

describe('PutObject with the app key (AWS SDK)', () => {
  it('is refused with 403 QuotaExceeded before the body is stored; an overwrite counts the difference', async () => {
    const { bucket, s3 } = await limitedApp(6 * MiB);
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a.bin', Body: randomBytes(4 * MiB) })))).toEqual(OK);
    // 4 + 3 MiB > 6 MiB: refused, the object never appears and nothing is left on disk.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'b.bin', Body: randomBytes(3 * MiB) })))).toEqual(REFUSED);
    expect(await keysOf(bucket)).toEqual(['a.bin']);
    expect(leftovers()).toEqual([]);
    // Overwriting a.bin (4 MiB) with 5.5 MiB adds 1.5 MiB: fits. With 6.5 MiB it would not.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a.bin', Body: randomBytes(5.5 * MiB) })))).toEqual(OK);
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a.bin', Body: randomBytes(6.5 * MiB) })))).toEqual(REFUSED);
    expect((await root.send(new HeadObjectCommand({ Bucket: bucket, Key: 'a.bin' }))).ContentLength).toBe(5.5 * MiB);
    // Exactly up to the limit is allowed, one byte more is not.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'c.bin', Body: randomBytes(0.5 * MiB) })))).toEqual(OK);
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'd.bin', Body: Buffer.from('x') })))).toEqual(REFUSED);
    expect(await realBytes(bucket)).toBe(6 * MiB);
    // The error is S3's XML, with its code and a message naming the limit.
    const raw = await fetch(await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'd.bin' })), { method: 'PUT', body: 'x' });
    expect(raw.status).toBe(403);
    const xml = await raw.text();
    expect(xml).toMatch(/<Code>QuotaExceeded<\/Code>/);
    expect(xml).toMatch(/storage limit of 6291456 bytes/);
    s3.destroy();
  });

  it('a body of unknown length is counted as it streams and cut when it would exceed; the root key is not limited', async () => {
    const { bucket, s3 } = await limitedApp(3 * MiB);
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'stream.bin' }));
    // 2 MiB in 64 KiB chunks, no Content-Length: fits.
    const fits = await putChunked(
      url,
      Array.from({ length: 32 }, () => randomBytes(64 * 1024)),
    );
    expect(fits.status, await fits.text()).toBe(200);
    // 2 MiB more to another key: refused once past the 1 MiB left; nothing of it is kept.
    const other = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'more.bin' }));
    const cut = await putChunked(
      other,
      Array.from({ length: 32 }, () => randomBytes(64 * 1024)),
    ).catch((err: Error) => err);
    if (cut instanceof Response) {
      expect(cut.status).toBe(403);
      expect(await cut.text()).toMatch(/QuotaExceeded/);
    }
    expect(await keysOf(bucket)).toEqual(['stream.bin']);
    expect(await realBytes(bucket)).toBe(2 * MiB);
    expect(leftovers()).toEqual([]);
    // Administrators are not limited.
    expect(await outcome(root.send(new PutObjectCommand({ Bucket: bucket, Key: 'admin.bin', Body: randomBytes(2 * MiB) })))).toEqual(OK);
    expect(await realBytes(bucket)).toBe(4 * MiB);
    s3.destroy();
  });
});

/** A PUT that waits for `100 Continue` before sending its body: whether the server said to go on, and its answer. */
function putExpecting(url: string, body: Buffer): Promise<{ continued: boolean; status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = http.request(url, { method: 'PUT', headers: { expect: '100-continue', 'content-length': body.length } });
    req.on('continue', () => {
      continued = true;
      req.end(body);
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ continued, status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.flushHeaders();
  });
}

describe('Expect: 100-continue', () => {
  it('a refused upload is answered before the client is told to send its body; an admitted one is told to go on', async () => {
    const { bucket, s3 } = await limitedApp(MiB);
    const url = (key: string) => getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: key }));
    const refused = await putExpecting(await url('big'), randomBytes(MiB + 1));
    expect(refused).toMatchObject({ continued: false, status: 403 });
    expect(refused.text).toMatch(/<Code>QuotaExceeded<\/Code>/);
    expect(await putExpecting(await url('small'), randomBytes(1000))).toMatchObject({ continued: true, status: 200 });
    expect(await keysOf(bucket)).toEqual(['small']);
    s3.destroy();
  });
});

describe('phase 1 and its presigned PUTs', () => {
  it('a reserved upload is admitted against its reservation, which other writers cannot take', async () => {
    const { bucket, id, s3 } = await limitedApp(1000);
    const file = localFile('photo.jpg', 600, 'image/jpeg');
    const phase1 = await requestUploads(app, owner, id, [file]);
    expect(phase1.status).toBe(200);
    const [upload] = phase1.body.uploads;
    // 600 reserved: the app key may add 400, not 401.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'other.bin', Body: randomBytes(401) })))).toEqual(REFUSED);
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'other.bin', Body: randomBytes(400) })))).toEqual(OK);
    // The presigned PUT lands in its reservation.
    expect((await putTo(upload.presignedUrl, file)).status).toBe(200);
    // Writing over the reserved key with the app key counts beyond the reservation only.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: upload.key, Body: randomBytes(601) })))).toEqual(REFUSED);
    const done = await app.request('POST', '/api/files/upload', {
      headers: owner.headers,
      body: { appId: id, action: 'complete', files: [{ key: upload.key, name: upload.name, size: 600, type: 'image/jpeg' }] },
    });
    expect(done.status, done.text).toBe(200);
    expect(await realBytes(bucket)).toBe(1000);
    // Full: phase 1 refuses.
    expect((await requestUploads(app, owner, id, [localFile('more', 1)])).status).toBe(413);
    s3.destroy();
  });

  it('a presigned URL made with the app key is limited like the key', async () => {
    const { bucket, s3 } = await limitedApp(1000);
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'signed.bin' }));
    const res = await fetch(url, { method: 'PUT', body: randomBytes(1001) });
    expect(res.status).toBe(403);
    expect(await res.text()).toMatch(/QuotaExceeded/);
    expect(await realBytes(bucket)).toBe(0);
    s3.destroy();
  });
});

describe('multipart uploads and copies', () => {
  it('parts of an unfinished upload count; a re-sent part counts the difference; complete converts parts to the object', async () => {
    const { bucket, s3 } = await limitedApp(6 * MiB);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }));
    const part = (n: number, body: Buffer) => s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'big.bin', UploadId, PartNumber: n, Body: body }));
    const e1 = (await part(1, randomBytes(5 * MiB))).ETag!;
    expect(await outcome(part(2, randomBytes(1.5 * MiB)))).toEqual(REFUSED);
    expect(await realBytes(bucket)).toBe(5 * MiB);
    await part(2, randomBytes(0.5 * MiB));
    // Part 2 again, 1 MiB: adds 0.5 MiB, exactly the limit.
    const e2 = (await part(2, randomBytes(MiB))).ETag!;
    expect(await realBytes(bucket)).toBe(6 * MiB);
    // The parts fill the bucket: nothing else goes in.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'tiny', Body: 'x' })))).toEqual(REFUSED);
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
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
    expect(await realBytes(bucket)).toBe(6 * MiB);
    expect(await keysOf(bucket)).toEqual(['big.bin']);
    // A copy of it would double it: refused before a byte is copied.
    expect(await outcome(s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy.bin', CopySource: `${bucket}/big.bin` })))).toEqual(REFUSED);
    expect(await keysOf(bucket)).toEqual(['big.bin']);
    expect(leftovers()).toEqual([]);
    s3.destroy();
  });

  it('UploadPartCopy is admitted for the bytes it copies: a range that fits goes, the whole source over the limit is refused', async () => {
    const { bucket, s3 } = await limitedApp(1000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'src', Body: randomBytes(600) }));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'joined' }));
    const copyPart = (n: number, range?: string) =>
      s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: 'joined', UploadId, PartNumber: n, CopySource: `${bucket}/src`, CopySourceRange: range }));
    // 600 + 300 of 1000: fits.
    expect(await outcome(copyPart(1, 'bytes=0-299'))).toEqual(OK);
    // The whole source again would make 1500.
    expect(await outcome(copyPart(2))).toEqual(REFUSED);
    // Part 1 again, 100 bytes: counts the difference (900 -> 700).
    expect(await outcome(copyPart(1, 'bytes=0-99'))).toEqual(OK);
    expect(await realBytes(bucket)).toBe(700);
    expect(leftovers()).toEqual([]);
    s3.destroy();
  });

  it('a copy over an existing object counts the difference', async () => {
    const { bucket, s3 } = await limitedApp(1000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'src', Body: randomBytes(400) }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'dst', Body: randomBytes(300) }));
    // dst 300 -> 400 adds 100: 800 of 1000.
    expect(await outcome(s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'dst', CopySource: `${bucket}/src` })))).toEqual(OK);
    // A new copy of 400 would make 1200.
    expect(await outcome(s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'third', CopySource: `${bucket}/src` })))).toEqual(REFUSED);
    expect(await realBytes(bucket)).toBe(800);
    s3.destroy();
  });
});

describe('writers racing', () => {
  it('concurrent PUTs (app key, presigned URLs, streamed bodies) never take the bucket over the limit', async () => {
    const { bucket, s3 } = await limitedApp(4 * MiB);
    const size = MiB + 1;
    const writers = Array.from({ length: 12 }, async (_, i) => {
      const key = `race/${i}`;
      if (i % 3 === 0) return outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: randomBytes(size) })));
      const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: key }));
      const res =
        i % 3 === 1
          ? await fetch(url, { method: 'PUT', body: randomBytes(size) })
          : await putChunked(url, [randomBytes(MiB), randomBytes(1)]).catch(() => undefined);
      if (!res) return REFUSED;
      const text = await res.text();
      return res.status === 200 ? OK : { status: res.status, code: /<Code>(\w+)<\/Code>/.exec(text)?.[1] };
    });
    const results = await Promise.all(writers);
    for (const r of results) expect([OK, REFUSED]).toContainEqual(r);
    const stored = await keysOf(bucket);
    // Three writers of just over 1 MiB fit in 4 MiB, a fourth does not.
    expect(stored.length).toBeLessThanOrEqual(3);
    expect(stored.length).toBeGreaterThanOrEqual(1);
    expect(results.filter((r) => r.status === 200).length).toBe(stored.length);
    expect(await realBytes(bucket)).toBe(stored.length * size);
    expect(await realBytes(bucket)).toBeLessThanOrEqual(4 * MiB);
    expect(leftovers()).toEqual([]);
    s3.destroy();
  });

  it('concurrent parts of one multipart upload never take the bucket over the limit', async () => {
    const { bucket, s3 } = await limitedApp(12 * MiB);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin' }));
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        outcome(s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'parts.bin', UploadId, PartNumber: i + 1, Body: randomBytes(5 * MiB) }))),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    expect(results.filter((r) => r.code === 'QuotaExceeded')).toHaveLength(2);
    expect(await realBytes(bucket)).toBe(10 * MiB);
    s3.destroy();
  });
});

describe('registering and completing', () => {
  it('POST /api/files refuses (413) records over the limit and records the size the store reports', async () => {
    const { bucket, id, token, s3 } = await limitedApp(1000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'ok.bin', Body: randomBytes(700) }));
    // A wrong size is refused as before (400), nothing recorded.
    const wrong = await register(token, [{ key: 'ok.bin', size: 1 }]);
    expect(wrong.status).toBe(400);
    expect(wrong.body).toStrictEqual({ error: 'Object "ok.bin" has 700 bytes, not 1; nothing was recorded' });
    const ok = await register(token, [{ key: 'ok.bin', size: 700 }]);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.files[0].size).toBe(700);
    // The root key (not limited) writes 500 more: the bucket is over its limit, and recording them is refused.
    await root.send(new PutObjectCommand({ Bucket: bucket, Key: 'admin.bin', Body: randomBytes(500) }));
    const over = await register(token, [{ key: 'admin.bin', size: 500 }]);
    expect(over.status).toBe(413);
    expect(over.body).toStrictEqual({
      error: 'Storage limit exceeded: recording these files would bring the app to 1200 bytes, over its limit of 1000; nothing was recorded',
    });
    expect((await appItem(id)).fileCount).toBe(1);
    s3.destroy();
  });

  it('complete refuses (413) once the limit was lowered below the usage; raising it lets the same upload complete', async () => {
    const { bucket, id } = await limitedApp(1000);
    const file = localFile('late.bin', 800);
    const phase1 = await requestUploads(app, owner, id, [file]);
    const [u] = phase1.body.uploads;
    expect((await putTo(u.presignedUrl, file)).status).toBe(200);
    expect((await setLimit(id, 500)).status).toBe(200);
    const complete = () =>
      app.request('POST', '/api/files/upload', {
        headers: owner.headers,
        body: { appId: id, action: 'complete', files: [{ key: u.key, name: u.name, size: 800, type: u.type }] },
      });
    const refused = await complete();
    expect(refused.status).toBe(413);
    expect(refused.body.error).toMatch(/^Storage limit exceeded: recording these files would bring the app to 800 bytes, over its limit of 500/);
    expect(await realBytes(bucket)).toBe(800);
    expect((await setLimit(id, 800)).status).toBe(200);
    expect((await complete()).status).toBe(200);
  });
});

describe('usage on GET /api/apps', () => {
  it('storedBytes, fileCount, unregistered objects and usedBytes follow the bucket; the spec fields stay', async () => {
    const { bucket, id, token, s3 } = await limitedApp(10_000);
    const empty = await appItem(id);
    expect(empty).toStrictEqual({
      id,
      teamId: owner.orgId,
      name: expect.any(String),
      bucketName: bucket,
      storageLimit: 10_000,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      storedBytes: 0,
      fileCount: 0,
      unregisteredBytes: 0,
      unregisteredCount: 0,
      pendingBytes: 0,
      usedBytes: 0,
      usageCheckedAt: expect.any(String),
    });
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'one', Body: randomBytes(100) }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'two', Body: randomBytes(250) }));
    expect(await appItem(id)).toMatchObject({ storedBytes: 0, fileCount: 0, unregisteredBytes: 350, unregisteredCount: 2, usedBytes: 350 });
    expect((await register(token, [{ key: 'one', size: 100 }])).status).toBe(200);
    // A phase-1 upload: reserved bytes count in usedBytes; its object, once PUT, is awaiting complete, not unregistered.
    const file = localFile('pending.bin', 1000);
    const [u] = (await requestUploads(app, owner, id, [file])).body.uploads;
    expect(await appItem(id)).toMatchObject({ storedBytes: 100, fileCount: 1, unregisteredBytes: 250, unregisteredCount: 1, usedBytes: 1350 });
    expect((await putTo(u.presignedUrl, file)).status).toBe(200);
    expect(await appItem(id)).toMatchObject({ unregisteredBytes: 250, unregisteredCount: 1, usedBytes: 1350 });
    // Overwriting a recorded object through S3 carries its new size into the record at once.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'one', Body: randomBytes(40) }));
    expect(await appItem(id)).toMatchObject({ storedBytes: 40, fileCount: 1, usedBytes: 1290 });
    const files = await app.request('GET', '/api/files', { headers: bearer(token) });
    expect(files.body.files.map((f: any) => [f.key, f.size])).toEqual([['one', 40]]);
    // Deleting it through S3 takes its record too: no record outlives its object.
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'one' }));
    expect(await appItem(id)).toMatchObject({ storedBytes: 0, fileCount: 0, unregisteredBytes: 250, usedBytes: 1250 });
    // The list shows the same figures.
    const list = await app.request('GET', '/api/apps', { headers: owner.headers });
    expect(list.body.apps.find((a: any) => a.id === id)).toMatchObject({ storedBytes: 0, unregisteredBytes: 250, usedBytes: 1250 });
    // Parts of an unfinished multipart upload count against the limit and show apart, until it is aborted.
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }));
    await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'big.bin', UploadId, PartNumber: 1, Body: randomBytes(500) }));
    expect(await appItem(id)).toMatchObject({ unregisteredBytes: 250, unregisteredCount: 1, pendingBytes: 500, usedBytes: 1750 });
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin', UploadId }));
    expect(await appItem(id)).toMatchObject({ unregisteredBytes: 250, pendingBytes: 0, usedBytes: 1250 });
    s3.destroy();
  });

  it('lowering storageLimit below the usage is allowed and blocks every write that adds bytes until usage falls under it', async () => {
    const { bucket, id, token, s3 } = await limitedApp(10_000);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept', Body: randomBytes(3000) }));
    expect((await register(token, [{ key: 'kept', size: 3000 }])).status).toBe(200);
    const lowered = await setLimit(id, 1000);
    expect(lowered.status).toBe(200);
    expect(lowered.body.storageLimit).toBe(1000);
    expect(await appItem(id)).toMatchObject({ storageLimit: 1000, storedBytes: 3000, usedBytes: 3000 });
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'new', Body: 'x' })))).toEqual(REFUSED);
    expect(
      await outcome(
        s3
          .send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'mp' }))
          .then(({ UploadId }) => s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mp', UploadId, PartNumber: 1, Body: 'x' }))),
      ),
    ).toEqual(REFUSED);
    expect((await requestUploads(app, owner, id, [localFile('n', 1)])).status).toBe(413);
    // Shrinking an object is a write that frees bytes: allowed.
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept', Body: randomBytes(2000) })))).toEqual(OK);
    // Deleting brings it under: writes go through again.
    await app.request('DELETE', '/api/files', { headers: bearer(token), body: { keys: ['kept'] } });
    expect(await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'new', Body: randomBytes(1000) })))).toEqual(OK);
    expect(await realBytes(bucket)).toBe(1000);
    s3.destroy();
  });
});
