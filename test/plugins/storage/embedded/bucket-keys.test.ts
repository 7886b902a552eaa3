/**
 * The fs driver keeps decrypted bucket secrets and the parsed public URL between requests
 * (POST /api/tokens/validate, the endpoint's signature checks). A bucket key that was deleted,
 * re-created or replaced in the index must never be answered or accepted from that cache.
 */
import path from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKeys } from '../../../../core/keys.ts';
import { createLogger } from '../../../../core/logger.ts';
import { storageConfig } from '../../../../plugins/storage/config.ts';
import { createFsDriver, type FsDriver } from '../../../../plugins/storage/drivers/fs/index.ts';
import type { StorageConnection } from '../../../../plugins/storage/drivers/types.ts';
import { tempDir } from '../../../helpers/app.ts';

let driver: FsDriver;
let dataDir: string;

beforeAll(async () => {
  dataDir = tempDir('wharf-bucket-keys-');
  const config = storageConfig.parse({ fs: { listen: '127.0.0.1:0' } }).fs;
  driver = createFsDriver(config, { dataDir, keys: loadKeys(dataDir), log: createLogger('silent') });
  await driver.start();
});

afterAll(() => driver?.close());

/** Lists the bucket with the given connection details: 200 or the S3 error's status. */
async function list(conn: StorageConnection, bucket: string): Promise<number> {
  const client = new S3Client({
    endpoint: `http://${conn.endPoint}:${conn.port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: conn.accessKey, secretAccessKey: conn.secretKey },
  });
  try {
    return (await client.send(new ListObjectsV2Command({ Bucket: bucket }))).$metadata.httpStatusCode ?? 0;
  } catch (err) {
    return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? -1;
  } finally {
    client.destroy();
  }
}

describe('cached bucket keys', () => {
  it('answers the same key while it is stored, and its secret works at the endpoint', async () => {
    await driver.createBucket('kept');
    const first = driver.connectionFor('kept');
    expect(driver.connectionFor('kept')).toStrictEqual(first);
    expect(first).toMatchObject({ endPoint: '127.0.0.1', port: Number(new URL(driver.publicUrl).port), useSSL: false });
    expect(await list(first, 'kept')).toBe(200);
  });

  it('a deleted and re-created bucket gets a new key; the old one is refused and never answered', async () => {
    await driver.createBucket('again');
    const old = driver.connectionFor('again');
    expect(await list(old, 'again')).toBe(200); // the old secret is now cached by the endpoint too
    await driver.deleteBucket('again');
    expect(await list(old, 'again')).toBe(403);
    await driver.createBucket('again');
    const fresh = driver.connectionFor('again');
    expect(fresh.accessKey).not.toBe(old.accessKey);
    expect(fresh.secretKey).not.toBe(old.secretKey);
    expect(await list(fresh, 'again')).toBe(200);
    expect(await list(old, 'again')).toBe(403);
  });

  it('a key replaced in the index by another process (same access key, new secret) is answered and checked anew', async () => {
    await driver.createBucket('replaced');
    const before = driver.connectionFor('replaced');
    expect(await list(before, 'replaced')).toBe(200);
    // Another bucket's stored (encrypted) secret, moved under this access key: as if rotated.
    await driver.createBucket('donor');
    const donor = driver.connectionFor('donor');
    const db = new Database(path.join(dataDir, 'objects', '.wharf', 'index.db'));
    try {
      const secret = db.prepare('SELECT secret FROM bucket_keys WHERE bucket = ?').pluck().get('donor');
      db.prepare('UPDATE bucket_keys SET secret = ? WHERE bucket = ?').run(secret, 'replaced');
    } finally {
      db.close();
    }
    // The ciphertext is bound to its own access key: it no longer decrypts under this one, so
    // neither the stale secret nor a wrong one may come out.
    expect(() => driver.connectionFor('replaced')).toThrow();
    expect(await list(before, 'replaced')).toBe(403);
    expect(await list(donor, 'donor')).toBe(200);
  });
});
