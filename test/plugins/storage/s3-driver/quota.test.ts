/**
 * The storage limit on the `s3` driver, against a real Ceph RGW: the store takes whatever the key
 * sends it, so Wharf enforces the limit on its own paths (phase 1, register, complete) against
 * recorded bytes, reservations and what the periodic reconciliation (ListObjectsV2) found in the
 * bucket; the reconciliation also gives records of objects overwritten through S3 their real
 * size. Always the s3 driver, whichever store the run uses.
 */
import { randomBytes } from 'node:crypto';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../../helpers/app.ts';
import { type SignedIn, signIn } from '../../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../../helpers/s3.ts';
import { bearer, closeStorageApp, createApp, createToken, localFile, putTo, requestUploads, startStorageApp, uniquePrefix } from '../../../helpers/storage.ts';

const prefix = uniquePrefix('quota');

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let owner: SignedIn;

async function appItem(id: string): Promise<any> {
  const res = await app.request('GET', `/api/apps?appId=${id}`, { headers: owner.headers });
  expect(res.status).toBe(200);
  return res.body.app;
}

/** Polls GET /api/apps until a reconciliation that started after `since` (ms) has run; returns the app. */
async function reconciledAfter(id: string, since: number): Promise<any> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const item = await appItem(id);
    if (item.usageCheckedAt !== null && Date.parse(item.usageCheckedAt) >= since) return item;
    if (Date.now() > deadline) throw new Error(`no reconciliation since ${new Date(since).toISOString()}: ${JSON.stringify(item)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function register(token: string, files: { key: string; size: number }[]) {
  return app.request('POST', '/api/files', { body: { token, files: files.map((f) => ({ ...f, name: f.key, type: 'application/octet-stream' })) } });
}

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  // endpoint given: the s3 driver even when the run's store is the embedded one.
  app = await startStorageApp(target, { prefix, endpoint: target.endpoint, storage: 'usage_interval_seconds = 1' });
  owner = await signIn(app);
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe('the s3 driver: enforced on Wharf paths, reconciled from the bucket', () => {
  it('objects written straight to the store count once reconciled; register, phase 1 and complete answer 413 past the limit', async () => {
    const made = await createApp(app, owner, 'limited', 1000);
    const token = await createToken(app, owner, made.id);
    const bucket = made.bucketName;
    expect(await appItem(made.id)).toMatchObject({ storedBytes: 0, fileCount: 0, unregisteredBytes: 0, unregisteredCount: 0, usedBytes: 0 });

    // The store takes 300 bytes it cannot refuse; the next reconciliation finds them.
    // The time after the write (a loaded store may take seconds): a listing started a second after it
    // has seen the object, and counts it by its whole-second Last-Modified.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'stray', Body: randomBytes(300) }));
    const written = Date.now();
    expect(await reconciledAfter(made.id, written + 1000)).toMatchObject({
      storedBytes: 0,
      fileCount: 0,
      unregisteredBytes: 300,
      unregisteredCount: 1,
      usedBytes: 300,
    });

    // Phase 1 counts them.
    const over = await requestUploads(app, owner, made.id, [localFile('big', 701)]);
    expect(over.status).toBe(413);
    expect(over.body).toStrictEqual({
      error: 'Storage limit exceeded: 300 bytes stored, 0 reserved by unfinished uploads and 701 requested, over the limit of 1000',
    });
    const file = localFile('fits', 700);
    const phase1 = await requestUploads(app, owner, made.id, [file]);
    expect(phase1.status).toBe(200);
    expect(await appItem(made.id)).toMatchObject({ usedBytes: 1000 });

    // Registering the stray object moves its bytes from unregistered to stored: 1000, not 1300.
    const recorded = await register(token, [{ key: 'stray', size: 300 }]);
    expect(recorded.status, recorded.text).toBe(200);
    expect(await appItem(made.id)).toMatchObject({ storedBytes: 300, fileCount: 1, unregisteredBytes: 0, unregisteredCount: 0, usedBytes: 1000 });

    // The reserved upload completes: it was counted all along.
    const [u] = phase1.body.uploads;
    expect((await putTo(u.presignedUrl, file)).status).toBe(200);
    const done = await app.request('POST', '/api/files/upload', {
      headers: owner.headers,
      body: { appId: made.id, action: 'complete', files: [{ key: u.key, name: u.name, size: 700, type: u.type }] },
    });
    expect(done.status, done.text).toBe(200);
    expect(await appItem(made.id)).toMatchObject({ storedBytes: 1000, fileCount: 2, usedBytes: 1000 });

    // Full: recording 10 more bytes the store took is refused, nothing recorded.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'extra', Body: randomBytes(10) }));
    const refused = await register(token, [{ key: 'extra', size: 10 }]);
    expect(refused.status).toBe(413);
    // 1010, or 1020 when a reconciliation listed the object in between (counted until the next run).
    expect(refused.body).toStrictEqual({
      error: expect.stringMatching(
        /^Storage limit exceeded: recording these files would bring the app to 10[12]0 bytes, over its limit of 1000; nothing was recorded$/,
      ),
    });
    expect(await appItem(made.id)).toMatchObject({ storedBytes: 1000, fileCount: 2 });
  });

  it('a recorded object overwritten through S3 gets its real size at the next reconciliation', async () => {
    const made = await createApp(app, owner, 'overwritten', 10_000);
    const token = await createToken(app, owner, made.id);
    await s3.send(new PutObjectCommand({ Bucket: made.bucketName, Key: 'doc', Body: randomBytes(500) }));
    expect((await register(token, [{ key: 'doc', size: 500 }])).status).toBe(200);
    // Give the record a second to age past the listing, then overwrite the object.
    await new Promise((r) => setTimeout(r, 1100));
    await s3.send(new PutObjectCommand({ Bucket: made.bucketName, Key: 'doc', Body: randomBytes(2000) }));
    const written = Date.now();
    expect(await reconciledAfter(made.id, written)).toMatchObject({ storedBytes: 2000, fileCount: 1, unregisteredBytes: 0, usedBytes: 2000 });
    const files = await app.request('GET', '/api/files', { headers: bearer(token) });
    expect(files.body.files.map((f: any) => [f.key, f.size])).toEqual([['doc', 2000]]);
  });

  it('lowering storageLimit below the usage is allowed; phase 1 and register are then refused', async () => {
    const made = await createApp(app, owner, 'lowered', 10_000);
    const token = await createToken(app, owner, made.id);
    await s3.send(new PutObjectCommand({ Bucket: made.bucketName, Key: 'a', Body: randomBytes(600) }));
    await s3.send(new PutObjectCommand({ Bucket: made.bucketName, Key: 'b', Body: randomBytes(10) }));
    expect((await register(token, [{ key: 'a', size: 600 }])).status).toBe(200);
    const lowered = await app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: made.id, storageLimit: 500 } });
    expect(lowered.status).toBe(200);
    expect(lowered.body.storageLimit).toBe(500);
    expect((await requestUploads(app, owner, made.id, [localFile('n', 1)])).status).toBe(413);
    expect((await register(token, [{ key: 'b', size: 10 }])).status).toBe(413);
    // Deleting brings it back under the limit (once a reconciliation has seen the bucket without it:
    // until then an earlier run may still count the deleted object as unregistered).
    expect((await app.request('DELETE', '/api/files', { headers: bearer(token), body: { keys: ['a'] } })).status).toBe(200);
    const deleted = Date.now();
    expect(await reconciledAfter(made.id, deleted)).toMatchObject({ storedBytes: 0, unregisteredBytes: 10, unregisteredCount: 1 });
    expect((await register(token, [{ key: 'b', size: 10 }])).status).toBe(200);
  });
});
