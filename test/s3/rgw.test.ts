// Proves the test S3 server (Ceph RGW via test/s3/ceph-rgw.sh, or $S3_ENDPOINT) works end to end:
// presigned PUT/GET through plain fetch, SDK reads, and signature checking.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ensureS3, s3Client, type S3Target } from '../helpers/s3.ts';

const BUCKET = `wharf-rgw-test-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
const KEY = 'dir/hello world.bin';
const CONTENT_TYPE = 'application/x-wharf-test';
const BODY = randomBytes(64 * 1024 + 7);

let target: S3Target;
let s3: S3Client;
let bucketCreated = false;
let objectPut = false;

function tamper(url: string): string {
  const u = new URL(url);
  const sig = u.searchParams.get('X-Amz-Signature');
  if (!sig) throw new Error(`presigned URL has no X-Amz-Signature: ${url}`);
  const last = sig.at(-1);
  u.searchParams.set('X-Amz-Signature', sig.slice(0, -1) + (last === '0' ? '1' : '0'));
  return u.toString();
}

describe('S3 test server (Ceph RGW)', () => {
  beforeAll(async () => {
    target = await ensureS3();
    s3 = s3Client(target);
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    bucketCreated = true;
  }, 11 * 60_000);

  afterAll(async () => {
    if (!s3) return;
    try {
      if (objectPut) await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: KEY }));
      if (bucketCreated) await s3.send(new DeleteBucketCommand({ Bucket: BUCKET }));
    } finally {
      s3.destroy();
    }
  });

  it('accepts a presigned PUT from fetch and serves the bytes back via GetObject', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: BUCKET, Key: KEY, ContentType: CONTENT_TYPE }), { expiresIn: 300 });
    const put = await fetch(url, { method: 'PUT', headers: { 'content-type': CONTENT_TYPE }, body: BODY });
    expect(put.status, await put.clone().text()).toBe(200);
    objectPut = true;

    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(got.ContentType).toBe(CONTENT_TYPE);
    const bytes = Buffer.from(await got.Body!.transformToByteArray());
    expect(bytes.length).toBe(BODY.length);
    expect(bytes.equals(BODY)).toBe(true);
  });

  it('serves a presigned GET to fetch', async () => {
    expect(objectPut).toBe(true);
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: BUCKET, Key: KEY }), { expiresIn: 300 });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(CONTENT_TYPE);
    expect(Buffer.from(await res.arrayBuffer()).equals(BODY)).toBe(true);
  });

  it('refuses presigned URLs whose signature was tampered with (403)', async () => {
    expect(objectPut).toBe(true);
    const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: BUCKET, Key: KEY }), { expiresIn: 300 });
    const badGet = await fetch(tamper(getUrl));
    const getBody = await badGet.text();
    expect(badGet.status, getBody).toBe(403);
    expect(getBody).toContain('SignatureDoesNotMatch');

    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: BUCKET, Key: KEY, ContentType: CONTENT_TYPE }), { expiresIn: 300 });
    const badPut = await fetch(tamper(putUrl), {
      method: 'PUT',
      headers: { 'content-type': CONTENT_TYPE },
      body: Buffer.from('overwritten'),
    });
    expect(badPut.status, await badPut.text()).toBe(403);

    // the refused PUT changed nothing
    const still = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(Buffer.from(await still.Body!.transformToByteArray()).equals(BODY)).toBe(true);
  });
});
