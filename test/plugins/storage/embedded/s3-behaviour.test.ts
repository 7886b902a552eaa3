/**
 * S3 behaviour as AWS documents it, through @aws-sdk/client-s3 with the key that
 * POST /api/tokens/validate hands out: what an app key may do with buckets, UploadPartCopy,
 * idempotent CompleteMultipartUpload, partNumber reads, presigned URL validity, Content-MD5,
 * Expect headers, GetBucketLocation, Content-Encoding with aws-chunked, re-sent parts.
 * Each answer (status and code) is the one AWS documents or gives for the same request.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  GetBucketLocationCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandaloneStore } from '../../../../plugins/storage/drivers/fs/index.ts';
import { createLogger } from '../../../../core/logger.ts';
import { tempDir } from '../../../helpers/app.ts';
import { type EmbeddedApp, errorCode, outcome, rawRequest, s3Client, startEmbeddedApp } from '../../../helpers/embedded.ts';

const MiB = 1024 * 1024;
const md5 = (b: Buffer | string) => createHash('md5').update(b).digest();
const md5Hex = (b: Buffer | string) => md5(b).toString('hex');

let env: EmbeddedApp;
let s3: S3Client;
let bucket: string;

beforeAll(async () => {
  env = await startEmbeddedApp();
  s3 = s3Client(env.creds);
  bucket = env.mine.bucketName;
});

afterAll(async () => {
  s3?.destroy();
  await env?.app.close();
});

/** Bytes of an object, or the outcome of trying. */
async function bytesOf(key: string, extra: { PartNumber?: number; Range?: string } = {}): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...extra }));
  return Buffer.from(await got.Body!.transformToByteArray());
}

/** A multipart object of `parts` (each its bytes); returns the upload's ETag. */
async function multipart(key: string, parts: Buffer[]): Promise<string> {
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
  const done: { PartNumber: number; ETag: string }[] = [];
  for (const [i, Body] of parts.entries()) {
    const { ETag } = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body }));
    done.push({ PartNumber: i + 1, ETag: ETag! });
  }
  const out = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: done } }));
  return out.ETag!;
}

describe('buckets with an app key', () => {
  it('ListBuckets lists the app’s own bucket, and only it', async () => {
    const out = await s3.send(new ListBucketsCommand({}));
    expect(out.Buckets?.map((b) => b.Name)).toEqual([bucket]);
    expect(out.Buckets?.[0]?.CreationDate).toBeInstanceOf(Date);
  });

  it('CreateBucket of its own bucket: 409 BucketAlreadyOwnedByYou; any other bucket: 403 AccessDenied', async () => {
    expect(await outcome(s3.send(new CreateBucketCommand({ Bucket: bucket })))).toMatchObject({ status: 409, name: 'BucketAlreadyOwnedByYou' });
    expect(await outcome(s3.send(new CreateBucketCommand({ Bucket: env.other.bucketName })))).toMatchObject({ status: 403, name: 'AccessDenied' });
    expect(await outcome(s3.send(new CreateBucketCommand({ Bucket: 'wharf-not-mine-at-all' })))).toMatchObject({ status: 403, name: 'AccessDenied' });
    expect(fs.existsSync(path.join(env.app.dataDir, 'objects', 'wharf-not-mine-at-all'))).toBe(false);
    // Deleting its bucket stays the server's business.
    expect(await outcome(s3.send(new DeleteBucketCommand({ Bucket: bucket })))).toMatchObject({ status: 403, name: 'AccessDenied' });
    expect((await s3.send(new HeadBucketCommand({ Bucket: bucket }))).$metadata.httpStatusCode).toBe(200);
  });

  it('GetBucketLocation answers the configured region (empty for us-east-1, as AWS)', async () => {
    expect((await s3.send(new GetBucketLocationCommand({ Bucket: bucket }))).LocationConstraint ?? '').toBe('');
    const dir = tempDir('wharf-region-');
    const root = { accessKey: 'WROOTREGIONTEST00001', secretKey: 'region-test-secret-key' };
    const store = await startStandaloneStore({ objectsDir: dir, listen: '127.0.0.1:0', region: 'eu-west-3', root, log: createLogger('silent') });
    const admin = s3Client(
      { endPoint: '127.0.0.1', port: Number(new URL(store.url).port), useSSL: false, accessKey: root.accessKey, secretKey: root.secretKey },
      { region: 'eu-west-3' },
    );
    try {
      await admin.send(new CreateBucketCommand({ Bucket: 'located' }));
      expect((await admin.send(new GetBucketLocationCommand({ Bucket: 'located' }))).LocationConstraint).toBe('eu-west-3');
      expect((await admin.send(new HeadBucketCommand({ Bucket: 'located' }))).BucketRegion).toBe('eu-west-3');
    } finally {
      admin.destroy();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('UploadPartCopy', () => {
  it('copies a whole object and a byte range into parts; the completed object is their concatenation', async () => {
    const source = randomBytes(6 * MiB);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy/source.bin', Body: source }));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'copy/joined.bin' }));
    const whole = await s3.send(
      new UploadPartCopyCommand({ Bucket: bucket, Key: 'copy/joined.bin', UploadId, PartNumber: 1, CopySource: `${bucket}/copy/source.bin` }),
    );
    expect(whole.CopyPartResult?.ETag).toBe(`"${md5Hex(source)}"`);
    expect(whole.CopyPartResult?.LastModified).toBeInstanceOf(Date);
    const ranged = await s3.send(
      new UploadPartCopyCommand({
        Bucket: bucket,
        Key: 'copy/joined.bin',
        UploadId,
        PartNumber: 2,
        CopySource: `${bucket}/copy/source.bin`,
        CopySourceRange: 'bytes=100-1099',
      }),
    );
    expect(ranged.CopyPartResult?.ETag).toBe(`"${md5Hex(source.subarray(100, 1100))}"`);
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'copy/joined.bin',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: whole.CopyPartResult!.ETag },
            { PartNumber: 2, ETag: ranged.CopyPartResult!.ETag },
          ],
        },
      }),
    );
    expect((await bytesOf('copy/joined.bin')).equals(Buffer.concat([source, source.subarray(100, 1100)]))).toBe(true);
  });

  it('refuses invalid ranges as S3 does (400 InvalidArgument), a missing source (404 NoSuchKey), another app’s bucket (403)', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy/small.txt', Body: '0123456789' }));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'copy/bad.bin' }));
    const copy = (CopySourceRange: string | undefined, CopySource = `${bucket}/copy/small.txt`) =>
      outcome(s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: 'copy/bad.bin', UploadId, PartNumber: 1, CopySource, CopySourceRange })));
    for (const range of ['bytes=5-', 'bytes=-5', '0-5', 'bytes=5-1', 'bytes=a-b', 'bytes=0-1,3-4', 'items=0-1']) {
      const out = await copy(range);
      expect(out, range).toMatchObject({ status: 400, name: 'InvalidArgument' });
      expect(out.message, range).toMatch(/must be of the form bytes=first-last/);
    }
    for (const range of ['bytes=0-10', 'bytes=10-10', 'bytes=5-100']) {
      const out = await copy(range);
      expect(out, range).toMatchObject({ status: 400, name: 'InvalidArgument' });
      expect(out.message, range).toBe('Range specified is not valid for source object of size: 10');
    }
    expect(await copy(undefined, `${bucket}/copy/none.txt`)).toMatchObject({ status: 404, name: 'NoSuchKey' });
    expect(await copy(undefined, `${env.other.bucketName}/x`)).toMatchObject({ status: 403, name: 'AccessDenied' });
    // Nothing was stored as part 1: the last byte is a valid range and works.
    const last = await s3.send(
      new UploadPartCopyCommand({
        Bucket: bucket,
        Key: 'copy/bad.bin',
        UploadId,
        PartNumber: 1,
        CopySource: `${bucket}/copy/small.txt`,
        CopySourceRange: 'bytes=9-9',
      }),
    );
    expect(last.CopyPartResult?.ETag).toBe(`"${md5Hex('9')}"`);
  });
});

describe('CompleteMultipartUpload', () => {
  it('is idempotent: completing again with the same parts answers 200 with the same ETag; other parts are NoSuchUpload', async () => {
    const parts = [randomBytes(5 * MiB), randomBytes(10)];
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'again.bin' }));
    const etags: string[] = [];
    for (const [i, Body] of parts.entries())
      etags.push((await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'again.bin', UploadId, PartNumber: i + 1, Body }))).ETag!);
    const list = { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) };
    const first = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'again.bin', UploadId, MultipartUpload: list }));
    // The client's first answer was lost: it retries the same request.
    const second = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'again.bin', UploadId, MultipartUpload: list }));
    expect(second.$metadata.httpStatusCode).toBe(200);
    expect(second.ETag).toBe(first.ETag);
    expect(second.Key).toBe('again.bin');
    expect((await bytesOf('again.bin')).equals(Buffer.concat(parts))).toBe(true);
    // A different part list, or another key, is not the same request.
    const other = await outcome(
      s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'again.bin', UploadId, MultipartUpload: { Parts: [list.Parts[0]!] } })),
    );
    expect(other).toMatchObject({ status: 404, name: 'NoSuchUpload' });
    const elsewhere = await outcome(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'elsewhere.bin', UploadId, MultipartUpload: list })));
    expect(elsewhere).toMatchObject({ status: 404, name: 'NoSuchUpload' });
    // Parts of a completed upload cannot be added any more.
    expect(await outcome(s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'again.bin', UploadId, PartNumber: 3, Body: 'x' })))).toMatchObject({
      status: 404,
      name: 'NoSuchUpload',
    });
  });

  it('a part sent twice: the later one wins, and the upload completes with it', async () => {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'resent.bin' }));
    const early = randomBytes(5 * MiB);
    const late = randomBytes(5 * MiB);
    const tail = Buffer.from('tail');
    const e1 = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'resent.bin', UploadId, PartNumber: 1, Body: early }))).ETag!;
    const e1b = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'resent.bin', UploadId, PartNumber: 1, Body: late }))).ETag!;
    const e2 = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'resent.bin', UploadId, PartNumber: 2, Body: tail }))).ETag!;
    expect(e1b).not.toBe(e1);
    // The earlier part's ETag no longer names a part of this upload.
    const stale = await outcome(
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key: 'resent.bin',
          UploadId,
          MultipartUpload: {
            Parts: [
              { PartNumber: 1, ETag: e1 },
              { PartNumber: 2, ETag: e2 },
            ],
          },
        }),
      ),
    );
    expect(stale).toMatchObject({ status: 400, name: 'InvalidPart' });
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'resent.bin',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: e1b },
            { PartNumber: 2, ETag: e2 },
          ],
        },
      }),
    );
    expect(done.ETag).toBe(`"${md5Hex(Buffer.concat([md5(late), md5(tail)]))}-2"`);
    expect((await bytesOf('resent.bin')).equals(Buffer.concat([late, tail]))).toBe(true);
  });
});

describe('GetObject and HeadObject with partNumber', () => {
  const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1234)];
  const total = parts.reduce((n, p) => n + p.length, 0);

  beforeAll(async () => {
    await multipart('parts.bin', parts);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'single.txt', Body: 'one part only' }));
  });

  it('reads each part of a multipart object: 206, its Content-Range, PartsCount', async () => {
    let offset = 0;
    for (const [i, part] of parts.entries()) {
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'parts.bin', PartNumber: i + 1 }));
      expect(got.$metadata.httpStatusCode).toBe(206);
      expect(got.PartsCount).toBe(3);
      expect(got.ContentLength).toBe(part.length);
      expect(got.ContentRange).toBe(`bytes ${offset}-${offset + part.length - 1}/${total}`);
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(part)).toBe(true);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'parts.bin', PartNumber: i + 1 }));
      expect(head).toMatchObject({ PartsCount: 3, ContentLength: part.length, ContentRange: `bytes ${offset}-${offset + part.length - 1}/${total}` });
      offset += part.length;
    }
    // Without partNumber: the whole object, no PartsCount.
    const whole = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'parts.bin' }));
    expect(whole.ContentLength).toBe(total);
    expect(whole.PartsCount).toBeUndefined();
  });

  it('partNumber 1 of a single-part object is the whole object, without PartsCount', async () => {
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'single.txt', PartNumber: 1 }));
    expect(await got.Body!.transformToString()).toBe('one part only');
    expect(got.PartsCount).toBeUndefined();
    expect(got.ContentRange).toBe('bytes 0-12/13');
  });

  it('a part that does not exist: 416 InvalidPartNumber; an invalid number or one with Range: 400', async () => {
    for (const [Key, PartNumber] of [
      ['parts.bin', 4],
      ['parts.bin', 10_000],
      ['single.txt', 2],
    ] as const) {
      expect(await outcome(s3.send(new GetObjectCommand({ Bucket: bucket, Key, PartNumber }))), `${Key} ${PartNumber}`).toMatchObject({
        status: 416,
        name: 'InvalidPartNumber',
      });
      // HEAD has no body: the SDK names the error by its status.
      expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key, PartNumber })))).status, `HEAD ${Key} ${PartNumber}`).toBe(416);
    }
    for (const PartNumber of [0, 10_001, -1]) {
      expect(await outcome(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'parts.bin', PartNumber }))), String(PartNumber)).toMatchObject({
        status: 400,
        name: 'InvalidArgument',
      });
    }
    expect(await outcome(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'parts.bin', PartNumber: 1, Range: 'bytes=0-9' })))).toMatchObject({
      status: 400,
      name: 'InvalidRequest',
    });
    expect(await outcome(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'nothing-here', PartNumber: 1 })))).toMatchObject({
      status: 404,
      name: 'NoSuchKey',
    });
  });
});

describe('presigned URL validity', () => {
  it('X-Amz-Expires outside 1..604800: 400 AuthorizationQueryParametersError, nothing stored', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'presigned/expires.txt' }), { expiresIn: 60 });
    for (const value of ['0', '604801', '-1', '1e3', '', 'sixty']) {
      const res = await fetch(url.replace(/X-Amz-Expires=\d+/, `X-Amz-Expires=${value}`), { method: 'PUT', body: 'x' });
      expect(res.status, value).toBe(400);
      expect(errorCode(await res.text()), value).toBe('AuthorizationQueryParametersError');
    }
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'presigned/expires.txt' })))).status).toBe(404);
  });

  it('an expired and a not-yet-valid presigned PUT: 403 AccessDenied, nothing stored', async () => {
    const put = new PutObjectCommand({ Bucket: bucket, Key: 'presigned/when.txt' });
    const expired = await getSignedUrl(s3, put, { expiresIn: 60, signingDate: new Date(Date.now() - 2 * 3600_000) });
    const early = await getSignedUrl(s3, put, { expiresIn: 3600, signingDate: new Date(Date.now() + 3600_000) });
    const a = await fetch(expired, { method: 'PUT', body: 'late' });
    expect(a.status).toBe(403);
    expect(await a.text()).toMatch(/<Code>AccessDenied<\/Code><Message>Request has expired<\/Message>/);
    const b = await fetch(early, { method: 'PUT', body: 'early' });
    expect(b.status).toBe(403);
    expect(await b.text()).toMatch(/<Code>AccessDenied<\/Code><Message>Request is not valid yet<\/Message>/);
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'presigned/when.txt' })))).status).toBe(404);
    // The same URL signed now works: the refusals were about time only.
    expect((await fetch(await getSignedUrl(s3, put, { expiresIn: 60 }), { method: 'PUT', body: 'now' })).status).toBe(200);
  });
});

describe('Content-MD5', () => {
  it('malformed: 400 InvalidDigest; mismatched: 400 BadDigest; matching: stored; nothing stored on refusal', async () => {
    for (const ContentMD5 of ['not base64!', 'AAAA', Buffer.alloc(17).toString('base64')]) {
      const out = await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'md5/bad.txt', Body: 'hello', ContentMD5 })));
      expect(out, JSON.stringify(ContentMD5)).toMatchObject({ status: 400, name: 'InvalidDigest' });
    }
    const wrong = await outcome(
      s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'md5/bad.txt', Body: 'hello', ContentMD5: md5('HELLO').toString('base64') })),
    );
    expect(wrong).toMatchObject({ status: 400, name: 'BadDigest' });
    expect((await outcome(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'md5/bad.txt' })))).status).toBe(404);
    // On a part too.
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'md5/part.bin' }));
    expect(
      await outcome(s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'md5/part.bin', UploadId, PartNumber: 1, Body: 'abc', ContentMD5: 'AAAA' }))),
    ).toMatchObject({
      status: 400,
      name: 'InvalidDigest',
    });
    expect(
      await outcome(
        s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: 'md5/part.bin', UploadId, PartNumber: 1, Body: 'abc', ContentMD5: md5('abd').toString('base64') }),
        ),
      ),
    ).toMatchObject({
      status: 400,
      name: 'BadDigest',
    });
    const ok = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'md5/good.txt', Body: 'hello', ContentMD5: md5('hello').toString('base64') }));
    expect(ok.ETag).toBe(`"${md5Hex('hello')}"`);
  });
});

describe('x-amz-checksum-* headers (the SDK sends CRC32 by default)', () => {
  const crc32 = (b: string) => {
    const out = Buffer.alloc(4);
    out.writeUInt32BE(zlib.crc32(b) >>> 0);
    return out.toString('base64');
  };
  const digest = (alg: string, b: string) => createHash(alg).update(b).digest('base64');

  it('crc32, sha1, sha256 checked: a mismatch is 400 BadDigest with the previous version intact, a match is stored; on parts too', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'sums/a.txt', Body: 'first' }));
    const wrong = [{ ChecksumCRC32: crc32('HELLO') }, { ChecksumSHA1: digest('sha1', 'HELLO') }, { ChecksumSHA256: digest('sha256', 'HELLO') }];
    for (const sum of wrong) {
      const out = await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'sums/a.txt', Body: 'hello', ...sum })));
      expect(out, JSON.stringify(sum)).toMatchObject({ status: 400, name: 'BadDigest' });
      expect((await bytesOf('sums/a.txt')).toString()).toBe('first');
    }
    const right = [{ ChecksumCRC32: crc32('hello') }, { ChecksumSHA1: digest('sha1', 'hello') }, { ChecksumSHA256: digest('sha256', 'hello') }];
    for (const [i, sum] of right.entries()) {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'sums/a.txt', Body: `hello`, ...sum }));
      expect((await bytesOf('sums/a.txt')).toString(), String(i)).toBe('hello');
    }
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'sums/part.bin' }));
    expect(
      await outcome(
        s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'sums/part.bin', UploadId, PartNumber: 1, Body: 'abc', ChecksumCRC32: crc32('abd') })),
      ),
    ).toMatchObject({ status: 400, name: 'BadDigest' });
    const part = await s3.send(
      new UploadPartCommand({ Bucket: bucket, Key: 'sums/part.bin', UploadId, PartNumber: 1, Body: 'abc', ChecksumCRC32: crc32('abc') }),
    );
    expect(part.ETag).toBe(`"${md5Hex('abc')}"`);
  });

  it('crc32c and crc64nvme (the AWS CLI’s default) checked: known answers for "123456789", a mismatch is BadDigest, and the SDK computing either is stored', async () => {
    // The catalogued check values: CRC-32C (Castagnoli) 0xE3069283, CRC-64/NVME 0xAE8B14860A799888.
    const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
    const known = [{ ChecksumCRC32C: b64('e3069283') }, { ChecksumCRC64NVME: b64('ae8b14860a799888') }];
    for (const sum of known) {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'sums/c.txt', Body: '123456789', ...sum }));
      expect((await bytesOf('sums/c.txt')).toString(), JSON.stringify(sum)).toBe('123456789');
      const out = await outcome(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'sums/c.txt', Body: '123456780', ...sum })));
      expect(out, JSON.stringify(sum)).toMatchObject({ status: 400, name: 'BadDigest' });
      expect((await bytesOf('sums/c.txt')).toString()).toBe('123456789');
    }
    // The SDK computing them itself, as the AWS CLI does by default (CRC64NVME), on a body it streams.
    const sdk = s3Client(env.creds, { requestChecksumCalculation: 'WHEN_SUPPORTED' });
    try {
      for (const ChecksumAlgorithm of ['CRC32C', 'CRC64NVME'] as const) {
        const body = randomBytes(300_000);
        await sdk.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: `sums/${ChecksumAlgorithm}.bin`,
            Body: Readable.from([body]),
            ContentLength: body.length,
            ChecksumAlgorithm,
          }),
        );
        expect((await bytesOf(`sums/${ChecksumAlgorithm}.bin`)).equals(body), ChecksumAlgorithm).toBe(true);
      }
    } finally {
      sdk.destroy();
    }
  });
});

describe('stored checksums (x-amz-checksum-mode: ENABLED)', () => {
  const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('base64');

  it('the checksum a PUT declared is answered by the PUT and by a whole GET or HEAD that asks for it; not without asking, not for a range; kept by a copy', async () => {
    const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept/a.txt', Body: 'hello checksums', ChecksumSHA256: sha256('hello checksums') }));
    expect(put.ChecksumSHA256).toBe(sha256('hello checksums'));
    // A client that does not ask (the SDK's default asks on GetObject: WHEN_SUPPORTED).
    const quiet = s3Client(env.creds, { requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    try {
      const plain = await quiet.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/a.txt' }));
      expect(plain.ChecksumSHA256).toBeUndefined();
      expect(await plain.Body!.transformToString()).toBe('hello checksums');
      // An object PUT without one (the default client would add CRC32) has none.
      await quiet.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept/none.txt', Body: 'no sum' }));
    } finally {
      quiet.destroy();
    }
    const asked = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/a.txt', ChecksumMode: 'ENABLED' }));
    expect([asked.ChecksumSHA256, asked.ChecksumType]).toEqual([sha256('hello checksums'), 'FULL_OBJECT']);
    expect(await asked.Body!.transformToString()).toBe('hello checksums');
    const range = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/a.txt', ChecksumMode: 'ENABLED', Range: 'bytes=0-4' }));
    expect(range.ChecksumSHA256).toBeUndefined();
    expect(await range.Body!.transformToString()).toBe('hello');
    expect((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'kept/a.txt', ChecksumMode: 'ENABLED' }))).ChecksumSHA256).toBe(
      sha256('hello checksums'),
    );
    await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'kept/copy.txt', CopySource: `${bucket}/kept/a.txt` }));
    expect((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'kept/copy.txt', ChecksumMode: 'ENABLED' }))).ChecksumSHA256).toBe(
      sha256('hello checksums'),
    );
    const none = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'kept/none.txt', ChecksumMode: 'ENABLED' }));
    expect([none.ChecksumSHA256, none.ChecksumCRC32, none.ChecksumCRC64NVME]).toEqual([undefined, undefined, undefined]);
  });

  it('with the SDK’s defaults, a download checks what the upload stored: bytes changed on disk fail the read', async () => {
    const sdk = s3Client(env.creds, { requestChecksumCalculation: 'WHEN_SUPPORTED', responseChecksumValidation: 'WHEN_SUPPORTED' });
    try {
      const body = randomBytes(200_000);
      await sdk.send(
        new PutObjectCommand({ Bucket: bucket, Key: 'kept/b.bin', Body: Readable.from([body]), ContentLength: body.length, ChecksumAlgorithm: 'CRC64NVME' }),
      );
      const got = await sdk.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/b.bin' }));
      expect(got.ChecksumCRC64NVME).toMatch(/^[A-Za-z0-9+/]{11}=$/);
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
      // The same bytes on disk, one flipped: the SDK's check of the stored checksum fails the read.
      const file = blobHolding(path.join(env.app.dataDir, 'objects'), body);
      const changed = Buffer.from(body);
      changed[1000]! ^= 0xff;
      fs.writeFileSync(file, changed);
      const bad = await sdk.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/b.bin' }));
      await expect(bad.Body!.transformToByteArray()).rejects.toThrow(/checksum/i);
    } finally {
      sdk.destroy();
    }
  });
});

/** The file under `dir` whose bytes are `body`. */
function blobHolding(dir: string, body: Buffer): string {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    if (fs.statSync(file).size === body.length && fs.readFileSync(file).equals(body)) return file;
  }
  throw new Error('no file holds the body');
}

describe('request headers', () => {
  it('Expect values other than 100-continue are ignored, as S3 does: the object is stored', async () => {
    for (const [i, expect100] of ['200', '', 'something-else'].entries()) {
      const client = s3Client(env.creds);
      // Set after the SDK's own Expect middleware, before signing (Expect is never signed).
      client.middlewareStack.add(
        (next) => async (args) => {
          (args.request as { headers: Record<string, string> }).headers.expect = expect100;
          return next(args);
        },
        { step: 'build', priority: 'low' },
      );
      try {
        const put = await outcome(client.send(new PutObjectCommand({ Bucket: bucket, Key: `expect/${i}.txt`, Body: `expect ${expect100}` })));
        expect(put, JSON.stringify(expect100)).toMatchObject({ status: 200 });
      } finally {
        client.destroy();
      }
      expect((await bytesOf(`expect/${i}.txt`)).toString()).toBe(`expect ${expect100}`);
    }
  });

  it('Expect: 100-continue with a bad signature is refused before the body is sent', async () => {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'expect/continue.txt' }), { expiresIn: 60 });
    const bad = url.replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`);
    const http = await import('node:http');
    const result = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
      let continued = false;
      const req = http.request(bad, { method: 'PUT', headers: { expect: '100-continue', 'content-length': '5' }, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, continued }));
      });
      req.on('continue', () => {
        continued = true;
        req.end('hello');
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(result).toEqual({ status: 403, continued: false });
    // With a good signature the server asks for the body, and stores it.
    const good = await rawRequest(url, { method: 'PUT', headers: { expect: '100-continue' }, body: 'hello' });
    expect(good.status).toBe(200);
  });

  it('Content-Encoding aws-chunked combined with gzip: gzip is stored, aws-chunked stripped', async () => {
    const zipped = (await import('node:zlib')).gzipSync('compressed text');
    // A stream body: the SDK sends it aws-chunked and adds aws-chunked to Content-Encoding.
    await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'enc/gz.txt',
        Body: Readable.from([zipped]),
        ContentLength: zipped.length,
        ContentEncoding: 'gzip',
        ContentType: 'text/plain',
      }),
    );
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'enc/gz.txt' }));
    expect(head.ContentEncoding).toBe('gzip');
    expect(head.ContentLength).toBe(zipped.length);
    // Written by hand, in the other order, as some clients do.
    const url = `${env.endpoint}/${bucket}/enc/order.txt`;
    const signed = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'enc/order.txt', ContentEncoding: 'gzip, aws-chunked' }), {
      expiresIn: 60,
    });
    expect(signed.startsWith(url)).toBe(true);
    const raw = await rawRequest(signed, { method: 'PUT', headers: { 'content-encoding': 'gzip, aws-chunked' }, body: zipped });
    // A presigned URL has no streaming payload: aws-chunked cannot apply, S3 refuses it.
    expect(raw.status).toBe(400);
    expect(errorCode(raw.text)).toBe('InvalidArgument');
  });
});
