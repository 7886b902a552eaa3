/**
 * The store unreachable: the same data served by a second server whose store is a closed port.
 * Every operation that needs the store answers 503 `{error}` and records nothing; what needs
 * only the database still works; back on the real store, everything carries on.
 */
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type TestApp } from '../../helpers/app.ts';
import { login, type SignedIn, signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import {
  bearer,
  closedPort,
  createApp,
  createToken,
  localFile,
  putTo,
  removeBuckets,
  requestUploads,
  startStorageApp,
  uniquePrefix,
  uploadFiles,
} from '../../helpers/storage.ts';

const prefix = uniquePrefix('down');
const dataDir = tempDir('wharf-down-');

let target: S3Target;
let s3: S3Client;
let up: TestApp;
let down: TestApp;
let owner: SignedIn;
let headers: Record<string, string>;
let mine: any;
let token: string;
let recorded: any[];
let pending: any;

const count = (table: string) => down.running.data.value<number>(`SELECT count(*) FROM ${table}`);

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  up = await startStorageApp(target, { prefix, dataDir });
  owner = await signIn(up);
  mine = await createApp(up, owner, 'mine');
  token = await createToken(up, owner, mine.id);
  recorded = await uploadFiles(up, owner, mine.id, [localFile('kept.bin', 10)]);
  const file = localFile('pending.bin', 12);
  [pending] = (await requestUploads(up, owner, mine.id, [file])).body.uploads;
  expect((await putTo(pending.presignedUrl, file)).status).toBe(200);
  await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'sdk/object', Body: 'abc' }));
  await up.close();
  down = await startStorageApp(target, { prefix, dataDir, endpoint: `http://127.0.0.1:${await closedPort()}` });
  // Same database; a session cookie names its server's URL, so sign in again.
  headers = { cookie: await login(down, owner.email, owner.password), origin: down.url };
}, 11 * 60_000);

afterAll(async () => {
  await down?.close();
  if (s3) {
    await removeBuckets(s3, prefix);
    s3.destroy();
  }
});

describe('store unreachable', () => {
  it.each([
    ['POST /api/apps', 'POST', '/api/apps', () => ({ headers, body: { name: 'never' } }), /^Storage is unreachable; the app was not created/],
    ['DELETE /api/apps', 'DELETE', '/api/apps', () => ({ headers, body: { appId: mine.id } }), /^Storage is unreachable; the app was not deleted/],
    [
      'POST /api/files (register)',
      'POST',
      '/api/files',
      () => ({ body: { token, files: [{ key: 'sdk/object', name: 'o', size: 3, type: 't' }] } }),
      /^Storage is unreachable; nothing was recorded/,
    ],
    [
      'upload phase 1',
      'POST',
      '/api/files/upload',
      () => ({ headers, body: { appId: mine.id, files: [{ name: 'n', size: 1, type: 't' }] } }),
      /^Storage is unreachable; no upload was started/,
    ],
    [
      'upload complete',
      'POST',
      '/api/files/upload',
      () => ({ headers, body: { appId: mine.id, action: 'complete', files: [{ key: pending.key, name: pending.name, size: 12, type: pending.type }] } }),
      /^Storage is unreachable; nothing was recorded/,
    ],
    [
      'DELETE /api/files (session)',
      'DELETE',
      '/api/files',
      () => ({ headers, body: { fileId: recorded[0].id } }),
      /^Storage is unreachable; 1 of 1 object\(s\) could not be deleted/,
    ],
    [
      'DELETE /api/files (Bearer)',
      'DELETE',
      '/api/files',
      () => ({ headers: bearer(token), body: { keys: [recorded[0].key] } }),
      /^Storage is unreachable; 1 of 1 object\(s\) could not be deleted/,
    ],
  ])('%s: 503 {error}, nothing recorded or removed', async (_label, method, path, options, error) => {
    const before = ['storage_apps', 'storage_files', 'storage_uploads', 'tokens_app_tokens'].map(count);
    const res = await down.request(method, path, options());
    expect(res.status, res.text).toBe(503);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(res.body.error).toMatch(error);
    expect(res.body.error).toMatch(/\(request id [\w-]+\)$/);
    expect(['storage_apps', 'storage_files', 'storage_uploads', 'tokens_app_tokens'].map(count)).toEqual(before);
  });

  it('the app is still there and its files still listed; /readyz says storage is not ready', async () => {
    const apps = await down.request('GET', '/api/apps', { headers });
    expect(apps.body.apps.map((a: { id: string }) => a.id)).toEqual([mine.id]);
    const files = await down.request('GET', '/api/files', { headers: bearer(token) });
    expect(files.body.files.map((f: { id: string }) => f.id)).toEqual([recorded[0].id]);
    expect((await down.request('POST', '/api/tokens/validate', { body: { token } })).status).toBe(200);
    const ready = await down.fetch('/readyz');
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as any).checks.storage).toBe(false);
  });

  it('back on the real store, the pending upload completes and the app deletes cleanly', async () => {
    await down.close();
    down = await startStorageApp(target, { prefix, dataDir });
    headers = { cookie: await login(down, owner.email, owner.password), origin: down.url };
    const done = await down.request('POST', '/api/files/upload', {
      headers,
      body: { appId: mine.id, action: 'complete', files: [{ key: pending.key, name: pending.name, size: 12, type: pending.type }] },
    });
    expect(done.status, done.text).toBe(200);
    const del = await down.request('DELETE', '/api/apps', { headers, body: { appId: mine.id } });
    expect(del.status, del.text).toBe(200);
    expect(await count('storage_files')).toBe(0);
  });
});
