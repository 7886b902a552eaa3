/**
 * Unfinished multipart uploads on the embedded store expire after
 * `[plugins.storage.fs] abort_incomplete_uploads_after_days` (S3's AbortIncompleteMultipartUpload):
 * their rows and part files go, and their bytes stop counting against the storage limit.
 * Driven through the AWS SDK against the driver's real endpoint.
 */
import fs from 'node:fs';
import path from 'node:path';
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKeys } from '../../../../core/keys.ts';
import { createLogger } from '../../../../core/logger.ts';
import { storageConfig } from '../../../../plugins/storage/config.ts';
import { createFsDriver, type FsDriver } from '../../../../plugins/storage/drivers/fs/index.ts';
import { tempDir } from '../../../helpers/app.ts';

let driver: FsDriver;
let dataDir: string;
let client: S3Client;

beforeAll(async () => {
  dataDir = tempDir('wharf-multipart-expiry-');
  const config = storageConfig.parse({ fs: { listen: '127.0.0.1:0', abort_incomplete_uploads_after_days: 1.5 } }).fs;
  driver = createFsDriver(config, { dataDir, keys: loadKeys(dataDir), log: createLogger('silent') });
  await driver.start();
  await driver.createBucket('bkt');
  const conn = driver.connectionFor('bkt');
  client = new S3Client({
    endpoint: `http://${conn.endPoint}:${conn.port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: conn.accessKey, secretAccessKey: conn.secretKey },
  });
});

afterAll(() => {
  client?.destroy();
  driver?.close();
});

/** Starts an upload of `key` with one 1000-byte part; its id. */
async function unfinished(key: string): Promise<string> {
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'bkt', Key: key }));
  await client.send(new UploadPartCommand({ Bucket: 'bkt', Key: key, UploadId, PartNumber: 1, Body: Buffer.alloc(1000, 1) }));
  return UploadId!;
}

/** Moves an upload's initiation `days` into the past, as another process writing the index would. */
function age(uploadId: string, days: number): void {
  const db = new Database(path.join(dataDir, 'objects', '.wharf', 'index.db'));
  try {
    db.prepare('UPDATE uploads SET initiated = initiated - ? WHERE id = ?').run(days * 86_400_000, uploadId);
  } finally {
    db.close();
  }
}

const pending = () => driver.live!.usage('bkt', new Map()).partBytes;

describe('abort_incomplete_uploads_after_days', () => {
  it('aborts the uploads initiated longer ago than the setting, with their parts, and leaves the younger ones', async () => {
    const old = await unfinished('old');
    const young = await unfinished('young');
    const borderline = await unfinished('borderline');
    age(old, 2);
    age(borderline, 1.4);
    expect(pending()).toBe(3000);

    expect(await driver.expireUploads!()).toBe(1);

    const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: 'bkt' }));
    expect((listed.Uploads ?? []).map((u) => u.UploadId).sort()).toEqual([borderline, young].sort());
    expect(fs.existsSync(path.join(dataDir, 'objects', '.wharf', 'multipart', old))).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'objects', '.wharf', 'multipart', young))).toBe(true);
    expect(pending()).toBe(2000);
    // The aborted upload answers as S3 does for an unknown id.
    await expect(client.send(new UploadPartCommand({ Bucket: 'bkt', Key: 'old', UploadId: old, PartNumber: 2, Body: 'x' }))).rejects.toMatchObject({
      name: 'NoSuchUpload',
    });
    expect(await driver.expireUploads!()).toBe(0);
  });

  it('goes through more expired uploads than one batch', async () => {
    const ids = await Promise.all(Array.from({ length: 130 }, (_, i) => unfinished(`many/${i}`)));
    for (const id of ids) age(id, 3);
    expect(await driver.expireUploads!()).toBe(130);
    expect(pending()).toBe(2000);
  });

  it('is off with 0, and the setting refuses a negative age', () => {
    const off = createFsDriver(storageConfig.parse({ fs: { listen: '127.0.0.1:0', abort_incomplete_uploads_after_days: 0 } }).fs, {
      dataDir: tempDir('wharf-multipart-expiry-off-'),
      keys: loadKeys(dataDir),
      log: createLogger('silent'),
    });
    try {
      expect(off.expireUploads).toBeUndefined();
    } finally {
      off.close();
    }
    expect(storageConfig.parse({ fs: {} }).fs.abort_incomplete_uploads_after_days).toBe(7);
    expect(() => storageConfig.parse({ fs: { abort_incomplete_uploads_after_days: -1 } })).toThrow(/abort_incomplete_uploads_after_days/);
  });
});
