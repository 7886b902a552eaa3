/**
 * The s3 driver keeps a bucket HeadBucket found for BUCKET_CHECK_MS (phase 1 checks its app's
 * bucket on every request), against the test store (Ceph RGW or the embedded store): within the
 * window a bucket removed behind the driver's back still passes, after it the check asks the
 * store again and fails; failures are never kept; a bucket the driver deletes is forgotten at once.
 * The clock is the driver's own, moved by hand: nothing here waits for wall time.
 */
import { CreateBucketCommand, DeleteBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageConfig } from '../../../../plugins/storage/config.ts';
import { BUCKET_CHECK_MS, createS3Driver } from '../../../../plugins/storage/drivers/s3.ts';
import type { StorageDriver } from '../../../../plugins/storage/drivers/types.ts';
import { ensureS3, s3Client } from '../../../helpers/s3.ts';
import { removeBuckets, uniquePrefix } from '../../../helpers/storage.ts';

const prefix = uniquePrefix('check');
let s3: S3Client;
let driver: StorageDriver;
let now = 1_000_000;

beforeAll(async () => {
  const target = await ensureS3();
  s3 = s3Client(target);
  const config = storageConfig.parse({
    s3: { endpoint: target.endpoint, region: target.region, access_key: target.accessKeyId, secret_key: target.secretAccessKey },
  });
  driver = createS3Driver(config.s3, { clock: () => now });
}, 11 * 60_000);

afterAll(async () => {
  driver?.close();
  if (s3) {
    await removeBuckets(s3, prefix);
    s3.destroy();
  }
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'passed',
    (err: { failure?: string }) => err.failure,
  );

describe('checkBucket on the s3 driver', () => {
  it('keeps a found bucket for BUCKET_CHECK_MS, then asks the store again', async () => {
    const bucket = `${prefix}kept`;
    await driver.createBucket(bucket);
    await driver.checkBucket(bucket);
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
    now += BUCKET_CHECK_MS - 1;
    expect(await failure(driver.checkBucket(bucket))).toBe('passed');
    now += 1;
    expect(await failure(driver.checkBucket(bucket))).toBe('not_found');
    // The failure is not kept: the bucket back, the next check passes without moving the clock.
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    expect(await failure(driver.checkBucket(bucket))).toBe('passed');
  });

  it('never keeps a missing bucket, and forgets one it deletes', async () => {
    const bucket = `${prefix}gone`;
    expect(await failure(driver.checkBucket(bucket))).toBe('not_found');
    await driver.createBucket(bucket);
    expect(await failure(driver.checkBucket(bucket))).toBe('passed');
    await driver.deleteBucket(bucket);
    expect(await failure(driver.checkBucket(bucket))).toBe('not_found');
  });
});
