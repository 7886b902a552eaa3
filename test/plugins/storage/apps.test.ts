/**
 * Apps against a real Ceph RGW: every row of the spec's Apps table, provisioning (bucket with
 * the app, nothing left when it fails), deletion (bucket emptied in batches, unfinished
 * multipart uploads aborted, tokens and records removed), organization isolation, and a server
 * with no store configured.
 */
import { CreateMultipartUploadCommand, HeadBucketCommand, ListMultipartUploadsCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { identityOf, login, type SignedIn, signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import {
  bearer,
  bucketsWithPrefix,
  closedPort,
  closeStorageApp,
  createApp,
  createToken,
  localFile,
  removeBuckets,
  startStorageApp,
  uniquePrefix,
  uploadFiles,
} from '../../helpers/storage.ts';

const prefix = uniquePrefix('apps');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let owner: SignedIn;
let stranger: SignedIn;
let noOrg: { headers: Record<string, string> };
let token: string;
let mine: any;

async function bucketExists(name: string): Promise<boolean> {
  try {
    await s3.send(new HeadBucketCommand({ Bucket: name }));
    return true;
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
    throw err;
  }
}

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  app = await startStorageApp(target, { prefix });
  owner = await signIn(app);
  stranger = await signIn(app);
  const identity = identityOf(app);
  await identity.createUser({ email: 'orgless@example.test', password: 'correct horse battery staple' });
  const cookie = await login(app, 'orgless@example.test', 'correct horse battery staple');
  noOrg = { headers: { cookie, origin: app.url } };
  mine = await createApp(app, owner, 'mine', 1_000_000);
  token = await createToken(app, owner, mine.id);
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe('POST /api/apps provisions a bucket', () => {
  it('answers 201 with the App and creates <bucket_prefix><id>', async () => {
    const res = await app.request('POST', '/api/apps', { headers: owner.headers, body: { name: '  Photos  ', storageLimit: null } });
    expect(res.status).toBe(201);
    expect(res.body).toStrictEqual({
      id: expect.stringMatching(UUID),
      teamId: owner.orgId,
      name: 'Photos',
      bucketName: `${prefix}${res.body.id}`,
      storageLimit: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: res.body.createdAt,
      // The usage fields GET /api/apps shows, so a new app reads the same everywhere.
      storedBytes: 0,
      fileCount: 0,
      unregisteredBytes: 0,
      unregisteredCount: 0,
      pendingBytes: process.env.WHARF_TEST_STORE === 'embedded' ? 0 : null,
      usedBytes: 0,
      // The embedded store counts live; the s3 driver has not reconciled a new bucket yet.
      usageCheckedAt: process.env.WHARF_TEST_STORE === 'embedded' ? expect.stringMatching(ISO) : null,
    });
    expect(await bucketExists(res.body.bucketName)).toBe(true);
  });

  it('refuses a body of another type by name (415), rather than as missing fields', async () => {
    const res = await app.request('POST', '/api/apps', { raw: '{"name":"typed"}', headers: { ...owner.headers, 'content-type': 'text/plain' } });
    expect(res.status).toBe(415);
    expect(res.body).toStrictEqual({ error: 'Send the body as application/json (Content-Type was text/plain)' });
  });

  it('defaults storageLimit to null and keeps an integer limit', async () => {
    expect((await createApp(app, owner, 'no limit')).storageLimit).toBeNull();
    expect(mine.storageLimit).toBe(1_000_000);
  });
});

describe('the Apps table, row by row', () => {
  const other = '00000000-0000-4000-8000-000000000000';
  // label, who, method, path (APP = the owner's app id), body, status, expected body
  const rows: [string, string, string, string, unknown, number, unknown][] = [
    ['unknown app', 'owner', 'GET', `/api/apps?appId=${other}`, undefined, 404, { error: 'App not found' }],
    ['malformed appId', 'owner', 'GET', '/api/apps?appId=nope', undefined, 400, { error: 'appId: must be a UUID' }],
    ['no active organization', 'noOrg', 'GET', '/api/apps', undefined, 400, { error: expect.stringMatching(/^No active organization/) }],
    ['no credential', 'nobody', 'GET', '/api/apps', undefined, 401, { error: 'Authentication required' }],
    ['an app token is not a session', 'token', 'GET', '/api/apps', undefined, 403, { error: 'This operation requires a dashboard session' }],
    ['create: name missing', 'owner', 'POST', '/api/apps', {}, 400, { error: 'name is required' }],
    [
      'create: name with an escape code',
      'owner',
      'POST',
      '/api/apps',
      { name: 'evil\u001b]0;pwned\u0007' },
      400,
      { error: 'name: must not contain control characters' },
    ],
    ['create: name empty', 'owner', 'POST', '/api/apps', { name: '   ' }, 400, { error: 'name: must not be empty' }],
    ['create: name not text', 'owner', 'POST', '/api/apps', { name: 5 }, 400, { error: 'name must be a string' }],
    ['create: limit as text', 'owner', 'POST', '/api/apps', { name: 'x', storageLimit: '10' }, 400, { error: expect.stringMatching(/^storageLimit/) }],
    ['create: negative limit', 'owner', 'POST', '/api/apps', { name: 'x', storageLimit: -1 }, 400, { error: 'storageLimit: must not be negative' }],
    ['create: fractional limit', 'owner', 'POST', '/api/apps', { name: 'x', storageLimit: 1.5 }, 400, { error: expect.stringMatching(/^storageLimit/) }],
    ['create: body not an object', 'owner', 'POST', '/api/apps', ['x'], 400, { error: 'body must be an object' }],
    ['create: no active organization', 'noOrg', 'POST', '/api/apps', { name: 'x' }, 400, { error: expect.stringMatching(/^No active organization/) }],
    ['create: no credential', 'nobody', 'POST', '/api/apps', { name: 'x' }, 401, { error: 'Authentication required' }],
    ['patch: appId missing', 'owner', 'PATCH', '/api/apps', { name: 'y' }, 400, { error: 'appId is required' }],
    ['patch: unknown app', 'owner', 'PATCH', '/api/apps', { appId: other, name: 'y' }, 404, { error: 'App not found' }],
    ['patch: bad limit', 'owner', 'PATCH', '/api/apps', { appId: 'APP', storageLimit: 'lots' }, 400, { error: expect.stringMatching(/^storageLimit/) }],
    ['patch: no credential', 'nobody', 'PATCH', '/api/apps', { appId: 'APP' }, 401, { error: 'Authentication required' }],
    ['delete: appId missing', 'owner', 'DELETE', '/api/apps', {}, 400, { error: 'appId is required' }],
    ['delete: unknown app', 'owner', 'DELETE', '/api/apps', { appId: other }, 404, { error: 'App not found' }],
    ['delete: no credential', 'nobody', 'DELETE', '/api/apps', { appId: 'APP' }, 401, { error: 'Authentication required' }],
    // Another organization's app is 404 everywhere, never 200 and never 403.
    ['stranger: get', 'stranger', 'GET', '/api/apps?appId=APP', undefined, 404, { error: 'App not found' }],
    ['stranger: list', 'stranger', 'GET', '/api/apps', undefined, 200, { apps: [] }],
    ['stranger: patch', 'stranger', 'PATCH', '/api/apps', { appId: 'APP', name: 'mine now' }, 404, { error: 'App not found' }],
    ['stranger: delete', 'stranger', 'DELETE', '/api/apps', { appId: 'APP' }, 404, { error: 'App not found' }],
  ];

  const headersOf = (who: string): Record<string, string> =>
    who === 'owner' ? owner.headers : who === 'stranger' ? stranger.headers : who === 'noOrg' ? noOrg.headers : who === 'token' ? bearer(token) : {};
  const withApp = (v: unknown): unknown => (v === undefined ? undefined : JSON.parse(JSON.stringify(v).replaceAll('APP', mine.id)));

  it.each(rows)('%s: %s %s %s -> %i', async (_label, who, method, path, body, status, expected) => {
    const res = await app.request(method, path.replace('APP', mine.id), { headers: headersOf(who), ...(body === undefined ? {} : { body: withApp(body) }) });
    expect(res.status, res.text).toBe(status);
    expect(res.body).toEqual(expected);
  });

  it("GET lists the organization's apps, newest first, and one app by appId", async () => {
    const list = await app.request('GET', '/api/apps', { headers: owner.headers });
    expect(list.status).toBe(200);
    const ids = list.body.apps.map((a: { id: string }) => a.id);
    expect(ids).toContain(mine.id);
    const times = list.body.apps.map((a: { createdAt: string }) => a.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    for (const a of list.body.apps) expect(a.teamId).toBe(owner.orgId);
    const one = await app.request('GET', `/api/apps?appId=${mine.id}`, { headers: owner.headers });
    expect(one.status).toBe(200);
    // The spec's App fields, then the usage (an app with no file yet; the s3 driver has not reconciled yet).
    expect(one.body).toStrictEqual({
      app: {
        ...mine,
        updatedAt: expect.any(String),
        name: expect.any(String),
        storageLimit: expect.anything(),
        storedBytes: 0,
        fileCount: 0,
        unregisteredBytes: 0,
        unregisteredCount: 0,
        pendingBytes: target.embedded ? 0 : null,
        usedBytes: 0,
        usageCheckedAt: target.embedded ? expect.stringMatching(ISO) : null,
      },
    });
  });

  it('PATCH changes name and limit and answers the App; the stranger changed nothing', async () => {
    const res = await app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: mine.id, name: 'renamed', storageLimit: 2_000_000 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: mine.id, name: 'renamed', storageLimit: 2_000_000, createdAt: mine.createdAt });
    expect(res.body.updatedAt >= mine.updatedAt).toBe(true);
    const unlimited = await app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: mine.id, storageLimit: null } });
    expect(unlimited.body).toMatchObject({ name: 'renamed', storageLimit: null });
    const back = await app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: mine.id, name: 'mine', storageLimit: 1_000_000 } });
    expect(back.body).toMatchObject({ name: 'mine', storageLimit: 1_000_000 });
  });
});

describe('DELETE /api/apps', () => {
  it('empties the bucket in batches (over 1000 objects, unfinished multipart uploads), removes it, then the app with its tokens and files', async () => {
    const doomed = await createApp(app, owner, 'doomed');
    const recorded = await uploadFiles(app, owner, doomed.id, [localFile('a.txt'), localFile('b.txt')]);
    const doomedToken = await createToken(app, owner, doomed.id);
    // Objects put behind the service's back, more than one DeleteObjects batch.
    const keys = Array.from({ length: 1010 }, (_, i) => `bulk/${String(i).padStart(4, '0')}`);
    for (let i = 0; i < keys.length; i += 50) {
      await Promise.all(keys.slice(i, i + 50).map((Key) => s3.send(new PutObjectCommand({ Bucket: doomed.bucketName, Key, Body: 'x' }))));
    }
    await s3.send(new CreateMultipartUploadCommand({ Bucket: doomed.bucketName, Key: 'unfinished.bin' }));
    expect((await s3.send(new ListMultipartUploadsCommand({ Bucket: doomed.bucketName }))).Uploads).toHaveLength(1);

    const res = await app.request('DELETE', '/api/apps', { headers: owner.headers, body: { appId: doomed.id } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toStrictEqual({ success: true });

    expect(await bucketExists(doomed.bucketName)).toBe(false);
    expect((await app.request('GET', `/api/apps?appId=${doomed.id}`, { headers: owner.headers })).status).toBe(404);
    expect((await app.request('POST', '/api/tokens/validate', { body: { token: doomedToken } })).status).toBe(401);
    const db = app.running.data;
    expect(await db.value('SELECT count(*) FROM storage_files WHERE app_id = ?', [doomed.id])).toBe(0);
    expect(await db.value('SELECT count(*) FROM storage_uploads WHERE app_id = ?', [doomed.id])).toBe(0);
    expect(await db.value('SELECT count(*) FROM tokens_app_tokens WHERE app_id = ?', [doomed.id])).toBe(0);
    expect((await app.request('GET', `/api/files/download?fileId=${recorded[0].id}`, { headers: owner.headers })).status).toBe(404);
    // Deleting again: the app is gone.
    expect((await app.request('DELETE', '/api/apps', { headers: owner.headers, body: { appId: doomed.id } })).status).toBe(404);
  }, 120_000);

  it('deletes an app whose bucket was already removed from the store', async () => {
    const gone = await createApp(app, owner, 'bucket vanished');
    await removeBuckets(s3, gone.bucketName);
    const res = await app.request('DELETE', '/api/apps', { headers: owner.headers, body: { appId: gone.id } });
    expect(res.status, res.text).toBe(200);
    expect((await app.request('GET', `/api/apps?appId=${gone.id}`, { headers: owner.headers })).status).toBe(404);
  });
});

describe('provisioning that fails leaves nothing behind', () => {
  it('store unreachable: 503 {error}, no app row, no bucket', async () => {
    const tag = uniquePrefix('down');
    const down = await startStorageApp(target, { prefix: tag, endpoint: `http://127.0.0.1:${await closedPort()}` });
    try {
      const who = await signIn(down);
      const res = await down.request('POST', '/api/apps', { headers: who.headers, body: { name: 'never' } });
      expect(res.status).toBe(503);
      expect(res.body).toStrictEqual({ error: expect.stringMatching(/^Storage is unreachable; the app was not created \(request id [\w-]+\)$/) });
      expect(res.headers.get('retry-after')).toBe('5');
      expect((await down.request('GET', '/api/apps', { headers: who.headers })).body).toStrictEqual({ apps: [] });
      expect(await down.running.data.value('SELECT count(*) FROM storage_apps')).toBe(0);
      expect(await bucketsWithPrefix(s3, tag)).toEqual([]);
      expect((await down.fetch('/readyz')).status).toBe(503);
    } finally {
      await down.close();
    }
  });

  it('credentials refused: 503 {error} naming the cause, no app row, no bucket', async () => {
    const tag = uniquePrefix('deny');
    const denied = await startApp(
      `[plugins.identity]\nscrypt_cost = 1024\n[plugins.storage]\nbucket_prefix = "${tag}"\n[plugins.storage.s3]\nendpoint = "${target.endpoint}"\nregion = "${target.region}"\naccess_key = "${target.accessKeyId}"\nsecret_key = "not-the-secret"\nmax_attempts = 1\n`,
    );
    try {
      const who = await signIn(denied);
      const res = await denied.request('POST', '/api/apps', { headers: who.headers, body: { name: 'never' } });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatch(/^Storage refused the server's credentials; the app was not created/);
      expect(await denied.running.data.value('SELECT count(*) FROM storage_apps')).toBe(0);
      expect(await bucketsWithPrefix(s3, tag)).toEqual([]);
      const ready = await denied.fetch('/readyz');
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as any).checks.storage).toBe(false);
    } finally {
      await denied.close();
    }
  });
});

describe('no store configured', () => {
  it('the server starts; /readyz reports storage not ready; creating an app is 503 naming the missing settings', async () => {
    // The s3 driver named with no endpoint (with no storage config at all, the embedded fs driver serves).
    const bare = await startApp('[plugins.identity]\nscrypt_cost = 1024\n[plugins.storage]\ndriver = "s3"\n');
    try {
      expect(bare.running.notices.join('\n')).toMatch(/Storage is not configured: set endpoint, access_key and secret_key in \[plugins\.storage\.s3\]/);
      const ready = await bare.fetch('/readyz');
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ error: 'not ready', checks: { database: true, storage: false } });
      const who = await signIn(bare);
      expect((await bare.request('GET', '/api/apps', { headers: who.headers })).body).toEqual({ apps: [] });
      const res = await bare.request('POST', '/api/apps', { headers: who.headers, body: { name: 'x' } });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatch(/^Storage is not configured: set endpoint, access_key and secret_key in \[plugins\.storage\.s3\]/);
      expect(await bare.running.data.value('SELECT count(*) FROM storage_apps')).toBe(0);
    } finally {
      await bare.close();
    }
  });

  it('a server with a store is ready', async () => {
    const ready = await app.fetch('/readyz');
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as any).checks).toEqual({ database: true, storage: true });
  });
});
