/**
 * App API tokens: every row of the spec's Tokens table, the raw token returned once and only its
 * SHA-256 kept, validation answering the public endpoint's details, lastUsedAt, the token as a
 * Bearer credential (file list, /api/cli/me) and revocation.
 */
import { createHash } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { type SignedIn, signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import { bearer, closeStorageApp, createApp, createToken, localFile, putTo, requestUploads, startStorageApp, uniquePrefix } from '../../helpers/storage.ts';

const prefix = uniquePrefix('tok');
const OTHER = '00000000-0000-4000-8000-000000000000';
const TOKEN = /^svc_live_[A-Za-z0-9_-]{43}$/;

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let owner: SignedIn;
let stranger: SignedIn;
let mine: any;
let publicPort: string;

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  publicPort = new URL(target.endpoint).port;
  // The server reaches the store on 127.0.0.1; clients are told "localhost".
  app = await startStorageApp(target, {
    prefix,
    s3: `public_endpoint = "http://localhost:${publicPort}"\npublic_access_key = "${target.accessKeyId}"\npublic_secret_key = "${target.secretAccessKey}"`,
  });
  owner = await signIn(app);
  stranger = await signIn(app);
  mine = await createApp(app, owner, 'mine');
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

const list = async (appId: string) => (await app.request('GET', `/api/tokens?appId=${appId}`, { headers: owner.headers })).body.tokens as any[];
const validate = (token: unknown) => app.request('POST', '/api/tokens/validate', { body: { token } });

describe('creating, listing and revoking', () => {
  it('POST answers 201 {token} once; only its SHA-256 is stored; GET lists newest first without it', async () => {
    const first = await app.request('POST', '/api/tokens', { headers: owner.headers, body: { appId: mine.id, name: 'ci' } });
    expect(first.status).toBe(201);
    expect(Object.keys(first.body)).toEqual(['token']);
    expect(first.body.token).toMatch(TOKEN);
    const second = await createToken(app, owner, mine.id, 'backend');
    expect(second).not.toBe(first.body.token);

    const tokens = await list(mine.id);
    expect(tokens.map((t) => t.name).slice(0, 2)).toEqual(['backend', 'ci']);
    expect(tokens[1]).toStrictEqual({
      id: expect.any(String),
      name: 'ci',
      tokenPrefix: first.body.token.slice(0, 16),
      lastUsedAt: null,
      createdAt: expect.any(String),
    });
    const rows = await app.running.data.all('SELECT * FROM tokens_app_tokens WHERE app_id = ?', [mine.id]);
    const hash = createHash('sha256').update(first.body.token).digest('hex');
    expect(rows.some((r) => r.token_hash === hash)).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(first.body.token);
    expect(JSON.stringify(rows)).not.toContain(first.body.token.slice(16));
  });

  it('DELETE revokes: validation, Bearer use and /api/cli/me then answer 401', async () => {
    const token = await createToken(app, owner, mine.id, 'short-lived');
    expect((await validate(token)).status).toBe(200);
    const id = (await list(mine.id)).find((t) => t.name === 'short-lived').id;
    const res = await app.request('DELETE', '/api/tokens', { headers: owner.headers, body: { tokenId: id } });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ success: true });
    expect((await validate(token)).status).toBe(401);
    expect((await app.request('GET', '/api/files', { headers: bearer(token) })).status).toBe(401);
    expect((await app.request('GET', '/api/cli/me', { headers: bearer(token) })).status).toBe(401);
    expect((await list(mine.id)).some((t) => t.id === id)).toBe(false);
    expect((await app.request('DELETE', '/api/tokens', { headers: owner.headers, body: { tokenId: id } })).status).toBe(404);
  });
});

describe('validation', () => {
  it('the s3 driver (explicitly): answers the app, its bucket and the public endpoint with the public key; the presigned URLs name it too', async () => {
    // The s3 driver has one shared public key (public_access_key) and a public endpoint: this
    // case is about that driver, whichever store the run targets (under WHARF_TEST_STORE=embedded
    // the s3 driver talks to the embedded endpoint with its root key).
    const s3App = await startStorageApp(target, {
      prefix,
      endpoint: target.endpoint,
      storage: 'driver = "s3"',
      s3: `public_endpoint = "http://localhost:${publicPort}"\npublic_access_key = "${target.accessKeyId}"\npublic_secret_key = "${target.secretAccessKey}"`,
    });
    try {
      const who = await signIn(s3App);
      const created = await createApp(s3App, who, 's3-driver');
      const token = await createToken(s3App, who, created.id);
      const res = await s3App.request('POST', '/api/tokens/validate', { body: { token } });
      expect(res.status).toBe(200);
      expect(res.body).toStrictEqual({
        valid: true,
        appId: created.id,
        bucketName: created.bucketName,
        storage: { endPoint: 'localhost', port: Number(publicPort), useSSL: false, accessKey: target.accessKeyId, secretKey: target.secretAccessKey },
      });
      const file = localFile('via-public.bin', 32);
      const [u] = (await requestUploads(s3App, who, created.id, [file])).body.uploads;
      expect(new URL(u.presignedUrl).host).toBe(`localhost:${publicPort}`);
      expect((await putTo(u.presignedUrl, file)).status).toBe(200);
    } finally {
      await s3App.close();
    }
  });

  it("the driver of this run answers the app, its bucket and the store its clients reach: the shared public key (s3) or the app's own key (fs)", async () => {
    const token = await createToken(app, owner, mine.id);
    const res = await validate(token);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ valid: true, appId: mine.id, bucketName: mine.bucketName });
    const storage = res.body.storage;
    const file = localFile('via-validated.bin', 32);
    const [u] = (await requestUploads(app, owner, mine.id, [file])).body.uploads;
    if (target.embedded) {
      // fs: the embedded endpoint's public URL, and a per-app key that is not the root key.
      const endpoint = new URL(target.endpoint);
      expect(storage).toMatchObject({ endPoint: endpoint.hostname, port: Number(endpoint.port), useSSL: false });
      expect(storage.accessKey).toMatch(/^WAPP[A-Z0-9]{16}$/);
      expect(storage.accessKey).not.toBe(target.accessKeyId);
      expect(storage.secretKey).not.toBe(target.secretAccessKey);
      expect(new URL(u.presignedUrl).host).toBe(endpoint.host);
    } else {
      expect(storage).toStrictEqual({
        endPoint: 'localhost',
        port: Number(publicPort),
        useSSL: false,
        accessKey: target.accessKeyId,
        secretKey: target.secretAccessKey,
      });
      expect(new URL(u.presignedUrl).host).toBe(`localhost:${publicPort}`);
    }
    expect((await putTo(u.presignedUrl, file)).status).toBe(200);
  });

  it('sets lastUsedAt on every validation and Bearer use; a read never sees it stale', async () => {
    const token = await createToken(app, owner, mine.id, 'usage');
    const entry = async () => (await list(mine.id)).find((t) => t.name === 'usage');
    expect((await entry()).lastUsedAt).toBeNull();
    const t0 = new Date().toISOString();
    expect((await validate(token)).status).toBe(200);
    const first = (await entry()).lastUsedAt;
    expect(first >= t0).toBe(true);
    await new Promise((r) => setTimeout(r, 20));
    expect((await app.request('GET', '/api/files', { headers: bearer(token) })).status).toBe(200);
    const second = (await entry()).lastUsedAt;
    expect(second > first).toBe(true);
    // Without any read, the batch reaches the database within a second.
    await new Promise((r) => setTimeout(r, 20));
    const t1 = new Date().toISOString();
    expect((await validate(token)).status).toBe(200);
    const deadline = Date.now() + 1000;
    let stored = '';
    while (Date.now() < deadline) {
      stored = (await app.running.data.value<string>("SELECT last_used_at FROM tokens_app_tokens WHERE name = 'usage'"))!;
      if (stored >= t1) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(stored >= t1).toBe(true);
  });

  it('a token whose app no longer exists: 404', async () => {
    const token = 'svc_live_orphanorphanorphanorphanorphanorphanorp';
    await app.running.data.run(
      "INSERT INTO tokens_app_tokens (id, app_id, name, token_hash, token_prefix, created_at) VALUES (?, ?, 'orphan', ?, 'svc_live_orphan', ?)",
      [crypto.randomUUID(), OTHER, createHash('sha256').update(token).digest('hex'), new Date().toISOString()],
    );
    const res = await validate(token);
    expect(res.status).toBe(404);
    expect(res.body).toStrictEqual({ error: 'App not found' });
    // As a credential it is simply invalid.
    expect((await app.request('GET', '/api/files', { headers: bearer(token) })).status).toBe(401);
  });
});

describe('an app token as a Bearer credential', () => {
  it('GET /api/cli/me answers {kind: "appToken", appId}', async () => {
    const token = await createToken(app, owner, mine.id);
    const me = await app.request('GET', '/api/cli/me', { headers: bearer(token) });
    expect(me.status).toBe(200);
    expect(me.body).toStrictEqual({ kind: 'appToken', appId: mine.id });
    const bad = await app.request('GET', '/api/cli/me', { headers: bearer('svc_live_nope') });
    expect(bad.status).toBe(401);
    expect(bad.body).toStrictEqual({ error: 'Invalid or expired credential' });
  });

  it("GET /api/files lists the token's app, ignoring appId", async () => {
    const token = await createToken(app, owner, mine.id);
    const other = await createApp(app, stranger, 'theirs');
    const res = await app.request('GET', `/api/files?appId=${other.id}`, { headers: bearer(token) });
    expect(res.status).toBe(200);
    expect(res.body.pagination).toMatchObject({ page: 1, pageSize: 10 });
    expect(res.body.files.every((f: { appId: string }) => f.appId === mine.id)).toBe(true);
  });
});

describe('the Tokens table, error rows', () => {
  // label, who, method, path, body, status, error
  const rows: [string, string, string, string, unknown, number, string | RegExp][] = [
    ['validate: token missing', 'nobody', 'POST', '/api/tokens/validate', {}, 400, 'token is required'],
    ['validate: token empty', 'nobody', 'POST', '/api/tokens/validate', { token: '' }, 400, 'token: must not be empty'],
    ['validate: token not text', 'nobody', 'POST', '/api/tokens/validate', { token: 42 }, 400, 'token must be a string'],
    ['validate: no body', 'nobody', 'POST', '/api/tokens/validate', undefined, 400, 'token is required'],
    [
      'validate: unknown token',
      'nobody',
      'POST',
      '/api/tokens/validate',
      { token: 'svc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' },
      401,
      'Invalid API token',
    ],
    ['validate: not a token', 'nobody', 'POST', '/api/tokens/validate', { token: 'hunter2' }, 401, 'Invalid API token'],
    ['list: appId missing', 'owner', 'GET', '/api/tokens', undefined, 400, 'appId is required'],
    ['list: malformed appId', 'owner', 'GET', '/api/tokens?appId=1', undefined, 400, 'appId: must be a UUID'],
    ['list: unknown app', 'owner', 'GET', `/api/tokens?appId=${OTHER}`, undefined, 404, 'App not found'],
    ['list: no credential', 'nobody', 'GET', '/api/tokens?appId=APP', undefined, 401, 'Authentication required'],
    ['list: app token is not a session', 'token', 'GET', '/api/tokens?appId=APP', undefined, 403, 'This operation requires a dashboard session'],
    ['create: appId missing', 'owner', 'POST', '/api/tokens', { name: 'x' }, 400, 'appId is required'],
    ['create: name missing', 'owner', 'POST', '/api/tokens', { appId: 'APP' }, 400, 'name is required'],
    ['create: name empty', 'owner', 'POST', '/api/tokens', { appId: 'APP', name: ' ' }, 400, 'name: must not be empty'],
    ['create: unknown app', 'owner', 'POST', '/api/tokens', { appId: OTHER, name: 'x' }, 404, 'App not found'],
    ['create: no credential', 'nobody', 'POST', '/api/tokens', { appId: 'APP', name: 'x' }, 401, 'Authentication required'],
    ['delete: tokenId missing', 'owner', 'DELETE', '/api/tokens', {}, 400, 'tokenId is required'],
    ['delete: malformed tokenId', 'owner', 'DELETE', '/api/tokens', { tokenId: 'x' }, 400, 'tokenId: must be a UUID'],
    ['delete: unknown token', 'owner', 'DELETE', '/api/tokens', { tokenId: OTHER }, 404, 'Token not found'],
    ['delete: no credential', 'nobody', 'DELETE', '/api/tokens', { tokenId: OTHER }, 401, 'Authentication required'],
    // Another organization's app and tokens: 404, never 200.
    ['stranger: list', 'stranger', 'GET', '/api/tokens?appId=APP', undefined, 404, 'App not found'],
    ['stranger: create', 'stranger', 'POST', '/api/tokens', { appId: 'APP', name: 'mine now' }, 404, 'App not found'],
    ['stranger: delete', 'stranger', 'DELETE', '/api/tokens', { tokenId: 'TOKENID' }, 404, 'Token not found'],
  ];

  let token: string;
  let tokenId: string;
  beforeAll(async () => {
    token = await createToken(app, owner, mine.id, 'table');
    tokenId = (await list(mine.id)).find((t) => t.name === 'table').id;
  });

  it.each(rows)('%s: %s %s %s -> %i', async (_label, who, method, path, body, status, error) => {
    const headers = ({ owner: owner.headers, stranger: stranger.headers, token: bearer(token), nobody: {} } as Record<string, Record<string, string>>)[who]!;
    const fill = (text: string) => text.replaceAll('APP', mine.id).replaceAll('TOKENID', tokenId);
    const res = await app.request(method, fill(path), { headers, ...(body === undefined ? {} : { body: JSON.parse(fill(JSON.stringify(body))) }) });
    expect(res.status, res.text).toBe(status);
    expect(Object.keys(res.body)).toEqual(['error']);
    if (typeof error === 'string') expect(res.body.error).toBe(error);
    else expect(res.body.error).toMatch(error);
  });

  it('the stranger revoked nothing', async () => {
    expect((await validate(token)).status).toBe(200);
  });
});
