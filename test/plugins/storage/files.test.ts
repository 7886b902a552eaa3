/**
 * Files and uploads against a real Ceph RGW: every row of the spec's Files and Uploads tables,
 * presigned PUT and GET with fetch, tampered and expired URLs refused by the store, the storage
 * limit, the checks at `complete`, objects deleted with their records, the reaper, and another
 * organization's app and files answering 404 on every route.
 */
import { HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { type SignedIn, signIn } from '../../helpers/identity.ts';
import { ensureS3, s3Client, type S3Target } from '../../helpers/s3.ts';
import {
  bearer,
  closeStorageApp,
  createApp,
  createToken,
  type LocalFile,
  localFile,
  putTo,
  removeBuckets,
  requestUploads,
  startStorageApp,
  uniquePrefix,
  uploadFiles,
} from '../../helpers/storage.ts';

const prefix = uniquePrefix('files');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const OTHER = '00000000-0000-4000-8000-000000000000';

let target: S3Target;
let s3: S3Client;
let app: TestApp;
let owner: SignedIn;
let stranger: SignedIn;
let mine: any;
let token: string;
let strangerToken: string;
let seeded: any[];

async function objectSize(bucket: string, key: string): Promise<number | undefined> {
  try {
    return (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength;
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined;
    throw err;
  }
}

function tamper(url: string): string {
  const u = new URL(url);
  const sig = u.searchParams.get('X-Amz-Signature')!;
  u.searchParams.set('X-Amz-Signature', sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0'));
  return u.toString();
}

async function countFiles(appId: string): Promise<number> {
  return (await app.running.data.value<number>('SELECT count(*) FROM storage_files WHERE app_id = ?', [appId]))!;
}

beforeAll(async () => {
  target = await ensureS3();
  s3 = s3Client(target);
  app = await startStorageApp(target, { prefix });
  owner = await signIn(app);
  stranger = await signIn(app);
  mine = await createApp(app, owner, 'mine');
  token = await createToken(app, owner, mine.id);
  const theirs = await createApp(app, stranger, 'theirs');
  strangerToken = await createToken(app, stranger, theirs.id);
  seeded = await uploadFiles(app, owner, mine.id, [localFile('seed.txt', 5, 'text/plain')]);
}, 11 * 60_000);

afterAll(() => closeStorageApp(app, s3, prefix));

describe('upload round trip', () => {
  it('phase 1 answers one presigned PUT per file; fetch PUTs the bytes; complete records them; a presigned GET serves them', async () => {
    const files = [localFile('report 2026.pdf', 1000, 'application/pdf'), localFile('photo.jpg', 2048, 'image/jpeg')];
    const phase1 = await requestUploads(app, owner, mine.id, files, 'docs/../2026/');
    expect(phase1.status, phase1.text).toBe(200);
    expect(phase1.body).toStrictEqual({
      uploads: [
        {
          key: expect.stringMatching(/^docs\/2026\/[\w-]{22}\/report_2026\.pdf$/),
          name: 'report 2026.pdf',
          size: 1000,
          type: 'application/pdf',
          presignedUrl: expect.any(String),
        },
        {
          key: expect.stringMatching(/^docs\/2026\/[\w-]{22}\/photo\.jpg$/),
          name: 'photo.jpg',
          size: 2048,
          type: 'image/jpeg',
          presignedUrl: expect.any(String),
        },
      ],
    });
    const uploads = phase1.body.uploads;
    const url = new URL(uploads[0].presignedUrl);
    expect(url.origin).toBe(target.endpoint);
    expect(url.pathname.startsWith(`/${mine.bucketName}/docs/2026/`)).toBe(true);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('3600');
    expect(url.searchParams.get('x-amz-checksum-crc32')).toBeNull();

    for (const [i, u] of uploads.entries()) expect((await putTo(u.presignedUrl, files[i]!)).status).toBe(200);

    const done = await app.request('POST', '/api/files/upload', {
      headers: owner.headers,
      body: { appId: mine.id, action: 'complete', files: uploads.map(({ key, name, size, type }: any) => ({ key, name, size, type })) },
    });
    expect(done.status, done.text).toBe(200);
    expect(done.body.files).toHaveLength(2);
    expect(done.body.files[0]).toStrictEqual({
      id: expect.stringMatching(UUID),
      appId: mine.id,
      key: uploads[0].key,
      name: 'report 2026.pdf',
      size: 1000,
      type: 'application/pdf',
      uploadedAt: expect.any(String),
    });

    const dl = await app.request('GET', `/api/files/download?fileId=${done.body.files[0].id}`, { headers: owner.headers });
    expect(dl.status).toBe(200);
    expect(Object.keys(dl.body)).toEqual(['url']);
    expect(new URL(dl.body.url).searchParams.get('X-Amz-Expires')).toBe('3600');
    const got = await fetch(dl.body.url);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(files[0]!.body)).toBe(true);
    expect(got.headers.get('content-disposition')).toBe('attachment; filename="report 2026.pdf"');
  });

  it('the store refuses a tampered presigned PUT or GET, and a PUT of another size or type (403)', async () => {
    const file = localFile('t.bin', 100, 'application/x-test');
    const [u] = (await requestUploads(app, owner, mine.id, [file])).body.uploads;
    expect((await putTo(tamper(u.presignedUrl), file)).status).toBe(403);
    expect((await putTo(u.presignedUrl, { ...file, body: Buffer.concat([file.body, Buffer.from('x')]) })).status).toBe(403);
    const wrongType = await putTo(u.presignedUrl, { ...file, type: 'text/html' });
    expect(wrongType.status).toBe(403);
    // The embedded store says what the URL signs (S3 stores say only SignatureDoesNotMatch).
    if (target.embedded) expect(await wrongType.text()).toContain('This URL signs content-length, content-type: send exactly the values it was made for.');
    expect(await objectSize(mine.bucketName, u.key)).toBeUndefined();
    expect((await putTo(u.presignedUrl, file)).status).toBe(200);

    const dl = await app.request('GET', `/api/files/download?fileId=${seeded[0].id}`, { headers: owner.headers });
    const bad = await fetch(tamper(dl.body.url));
    expect(bad.status).toBe(403);
    expect(await bad.text()).toContain('SignatureDoesNotMatch');
  });
});

describe('the Files and Uploads tables, error rows', () => {
  const file = { key: 'k', name: 'n', size: 1, type: 'text/plain' };
  // label, who, method, path (APP, FILE, TOKEN replaced), body, status, error
  const rows: [string, string, string, string, unknown, number, string | RegExp][] = [
    ['list: no credential, no appId (401 before 400)', 'nobody', 'GET', '/api/files', undefined, 401, 'Authentication required'],
    ['list: session without appId', 'owner', 'GET', '/api/files', undefined, 400, 'appId is required without a Bearer API token'],
    ['list: appId without a credential', 'nobody', 'GET', '/api/files?appId=APP', undefined, 401, 'Authentication required'],
    ['list: invalid token', 'badToken', 'GET', '/api/files', undefined, 401, 'Invalid API token'],
    ['list: invalid token with appId', 'badToken', 'GET', '/api/files?appId=APP', undefined, 401, 'Invalid API token'],
    ['list: malformed Authorization', 'garbled', 'GET', '/api/files', undefined, 401, 'Invalid API token'],
    ['list: malformed appId', 'owner', 'GET', '/api/files?appId=x', undefined, 400, 'appId: must be a UUID'],
    ['list: unknown app', 'owner', 'GET', `/api/files?appId=${OTHER}`, undefined, 404, 'App not found'],
    ['list: pageSize 0', 'token', 'GET', '/api/files?pageSize=0', undefined, 400, 'pageSize: must be an integer from 1 to 100'],
    ['list: pageSize 101', 'token', 'GET', '/api/files?pageSize=101', undefined, 400, 'pageSize: must be an integer from 1 to 100'],
    ['list: pageSize text', 'token', 'GET', '/api/files?pageSize=ten', undefined, 400, 'pageSize: must be an integer from 1 to 100'],
    ['list: pageSize fraction', 'token', 'GET', '/api/files?pageSize=2.5', undefined, 400, 'pageSize: must be an integer from 1 to 100'],
    ['list: page 0', 'token', 'GET', '/api/files?page=0', undefined, 400, 'page: must be an integer from 1 to 999999999999999'],
    ['list: page negative', 'token', 'GET', '/api/files?page=-1', undefined, 400, 'page: must be an integer from 1 to 999999999999999'],
    ['list: page of 16 digits', 'token', 'GET', '/api/files?page=1000000000000000', undefined, 400, 'page: must be an integer from 1 to 999999999999999'],
    ['list: search not UTF-8', 'token', 'GET', '/api/files?search=%FF', undefined, 400, 'search: must be UTF-8, percent-encoded'],
    ['list: search cut in a character', 'token', 'GET', '/api/files?page=1&search=ab%C3', undefined, 400, 'search: must be UTF-8, percent-encoded'],
    ['list: page twice', 'token', 'GET', '/api/files?page=1&page=2', undefined, 400, 'page must be given once'],
    // NUL cut SQLite's full-text query short (500 "unterminated string"); no name holds a control character.
    ['list: search with NUL', 'token', 'GET', '/api/files?search=%00ab', undefined, 400, 'search: must not contain control characters'],
    ['list: search with NUL inside', 'token', 'GET', '/api/files?search=ab%00cd', undefined, 400, 'search: must not contain control characters'],
    ['list: dir sideways', 'token', 'GET', '/api/files?dir=up', undefined, 400, 'dir: must be "asc" or "desc"'],
    ['list: search too long', 'token', 'GET', `/api/files?search=${'x'.repeat(1025)}`, undefined, 400, 'search: must be at most 1024 characters'],
    ['register: token missing', 'nobody', 'POST', '/api/files', { files: [file] }, 400, 'token is required'],
    ['register: files missing', 'nobody', 'POST', '/api/files', { token: 'TOKEN' }, 400, 'files is required'],
    ['register: files not an array', 'nobody', 'POST', '/api/files', { token: 'TOKEN', files: file }, 400, 'files must be an array'],
    ['register: files empty', 'nobody', 'POST', '/api/files', { token: 'TOKEN', files: [] }, 400, 'files: must hold at least one file'],
    ['register: size as text', 'nobody', 'POST', '/api/files', { token: 'TOKEN', files: [{ ...file, size: '1' }] }, 400, 'files.0.size must be a number'],
    ['register: negative size', 'nobody', 'POST', '/api/files', { token: 'TOKEN', files: [{ ...file, size: -1 }] }, 400, 'files.0.size: must not be negative'],
    [
      'register: name with an escape code',
      'nobody',
      'POST',
      '/api/files',
      { token: 'TOKEN', files: [{ ...file, name: 'a\u001b[2Jb' }] },
      400,
      'files.0.name: must not contain control characters',
    ],
    ['register: key missing', 'nobody', 'POST', '/api/files', { token: 'TOKEN', files: [{ name: 'n', size: 1, type: 't' }] }, 400, 'files.0.key is required'],
    ['register: invalid token', 'nobody', 'POST', '/api/files', { token: 'svc_live_nope', files: [file] }, 401, 'Invalid API token'],
    ['register: not a token at all', 'nobody', 'POST', '/api/files', { token: 'hello', files: [file] }, 401, 'Invalid API token'],
    ['delete: nothing named (Bearer)', 'token', 'DELETE', '/api/files', {}, 400, 'keys, fileId or fileIds is required'],
    ['delete: nothing named (session)', 'owner', 'DELETE', '/api/files', {}, 400, 'keys, fileId or fileIds is required'],
    ['delete: keys not an array', 'token', 'DELETE', '/api/files', { keys: 'a' }, 400, 'keys must be an array'],
    ['delete: empty keys', 'token', 'DELETE', '/api/files', { keys: [] }, 400, 'keys: must hold at least one key'],
    ['delete: fileId with a Bearer token', 'token', 'DELETE', '/api/files', { fileId: 'FILE' }, 400, /^keys is required with a Bearer API token/],
    ['delete: keys with a session', 'owner', 'DELETE', '/api/files', { keys: ['a'] }, 400, /^fileId or fileIds is required with a dashboard session/],
    ['delete: malformed fileId', 'owner', 'DELETE', '/api/files', { fileId: 'x' }, 400, 'fileId: must be a UUID'],
    ['delete: invalid token', 'badToken', 'DELETE', '/api/files', { keys: ['a'] }, 401, 'Invalid API token'],
    ['delete: no credential', 'nobody', 'DELETE', '/api/files', { keys: ['a'] }, 401, 'Authentication required'],
    // No credential is 401 before the body is judged (it was 400 "keys, fileId or fileIds is required").
    ['delete: no credential, empty body', 'nobody', 'DELETE', '/api/files', {}, 401, 'Authentication required'],
    ['upload: no credential, empty body', 'nobody', 'POST', '/api/files/upload', {}, 401, 'Authentication required'],
    ['delete: unknown file', 'owner', 'DELETE', '/api/files', { fileId: OTHER }, 404, `File ${OTHER} not found`],
    ['download: fileId missing', 'owner', 'GET', '/api/files/download', undefined, 400, 'fileId is required'],
    ['download: malformed fileId', 'owner', 'GET', '/api/files/download?fileId=1', undefined, 400, 'fileId: must be a UUID'],
    ['download: unknown file', 'owner', 'GET', `/api/files/download?fileId=${OTHER}`, undefined, 404, 'File not found'],
    ['download: Bearer is not a session', 'token', 'GET', '/api/files/download?fileId=FILE', undefined, 403, 'This operation requires a dashboard session'],
    ['download: no credential', 'nobody', 'GET', '/api/files/download?fileId=FILE', undefined, 401, 'Authentication required'],
    ['upload: appId missing', 'owner', 'POST', '/api/files/upload', { files: [{ name: 'n', size: 1, type: 't' }] }, 400, 'appId is required'],
    ['upload: files missing', 'owner', 'POST', '/api/files/upload', { appId: 'APP' }, 400, 'files is required'],
    ['upload: files empty', 'owner', 'POST', '/api/files/upload', { appId: 'APP', files: [] }, 400, 'files: must hold at least one file'],
    ['upload: files not an array', 'owner', 'POST', '/api/files/upload', { appId: 'APP', files: 'x' }, 400, 'files must be an array'],
    [
      'upload: size as text',
      'owner',
      'POST',
      '/api/files/upload',
      { appId: 'APP', files: [{ name: 'n', size: '1', type: 't' }] },
      400,
      'files.0.size must be a number',
    ],
    [
      'upload: negative size',
      'owner',
      'POST',
      '/api/files/upload',
      { appId: 'APP', files: [{ name: 'n', size: -5, type: 't' }] },
      400,
      'files.0.size: must not be negative',
    ],
    [
      'upload: over 5 GiB',
      'owner',
      'POST',
      '/api/files/upload',
      { appId: 'APP', files: [{ name: 'huge', size: 6 * 1024 ** 3, type: 't' }] },
      400,
      /^File "huge" is larger than/,
    ],
    ['upload: unknown action', 'owner', 'POST', '/api/files/upload', { appId: 'APP', action: 'finish', files: [file] }, 400, /^action: must be "complete"/],
    ['upload: unknown app', 'owner', 'POST', '/api/files/upload', { appId: OTHER, files: [{ name: 'n', size: 1, type: 't' }] }, 404, 'App not found'],
    [
      'upload: no credential',
      'nobody',
      'POST',
      '/api/files/upload',
      { appId: 'APP', files: [{ name: 'n', size: 1, type: 't' }] },
      401,
      'Authentication required',
    ],
    [
      'upload: Bearer is not a session',
      'token',
      'POST',
      '/api/files/upload',
      { appId: 'APP', files: [{ name: 'n', size: 1, type: 't' }] },
      403,
      'This operation requires a dashboard session',
    ],
    ['complete: appId missing', 'owner', 'POST', '/api/files/upload', { action: 'complete', files: [file] }, 400, 'appId is required'],
    ['complete: files missing', 'owner', 'POST', '/api/files/upload', { appId: 'APP', action: 'complete' }, 400, 'files is required'],
    ['complete: files empty', 'owner', 'POST', '/api/files/upload', { appId: 'APP', action: 'complete', files: [] }, 400, 'files: must hold at least one file'],
    ['complete: unknown app', 'owner', 'POST', '/api/files/upload', { appId: OTHER, action: 'complete', files: [file] }, 404, 'App not found'],
    [
      'complete: key never issued',
      'owner',
      'POST',
      '/api/files/upload',
      { appId: 'APP', action: 'complete', files: [file] },
      400,
      /^Key "k" is not an unfinished upload of this app/,
    ],
    // Another organization's app and files: 404 on every route, never 200.
    ['stranger: list', 'stranger', 'GET', '/api/files?appId=APP', undefined, 404, 'App not found'],
    ['stranger: delete', 'stranger', 'DELETE', '/api/files', { fileId: 'FILE' }, 404, /^File [\w-]+ not found$/],
    ['stranger: delete among own', 'stranger', 'DELETE', '/api/files', { fileIds: ['FILE'] }, 404, /^File [\w-]+ not found$/],
    ['stranger: download', 'stranger', 'GET', '/api/files/download?fileId=FILE', undefined, 404, 'File not found'],
    ['stranger: upload', 'stranger', 'POST', '/api/files/upload', { appId: 'APP', files: [{ name: 'n', size: 1, type: 't' }] }, 404, 'App not found'],
    ['stranger: complete', 'stranger', 'POST', '/api/files/upload', { appId: 'APP', action: 'complete', files: [file] }, 404, 'App not found'],
  ];

  const headersOf = (who: string): Record<string, string> =>
    ({
      owner: owner.headers,
      stranger: stranger.headers,
      token: bearer(token),
      badToken: bearer('svc_live_notarealtoken'),
      garbled: { authorization: 'Bearer' },
      nobody: {},
    })[who]!;
  const fill = (text: string) => text.replaceAll('APP', mine.id).replaceAll('FILE', seeded[0].id).replaceAll('TOKEN', token);

  it.each(rows)('%s: %s %s %s -> %i', async (_label, who, method, path, body, status, error) => {
    const res = await app.request(method, fill(path), {
      headers: headersOf(who),
      ...(body === undefined ? {} : { body: JSON.parse(fill(JSON.stringify(body))) }),
    });
    expect(res.status, res.text).toBe(status);
    expect(Object.keys(res.body)).toEqual(['error']);
    if (typeof error === 'string') expect(res.body.error).toBe(error);
    else expect(res.body.error).toMatch(error);
  });

  it("another organization's token does not reach this app: the list is its own app's, and its deletes touch nothing here", async () => {
    const list = await app.request('GET', `/api/files?appId=${mine.id}`, { headers: bearer(strangerToken) });
    expect(list.status).toBe(200);
    expect(list.body.files.every((f: { appId: string }) => f.appId !== mine.id)).toBe(true);
    const del = await app.request('DELETE', '/api/files', { headers: bearer(strangerToken), body: { keys: [seeded[0].key] } });
    expect(del.status).toBe(200);
    expect(await objectSize(mine.bucketName, seeded[0].key)).toBe(5);
    const reg = await app.request('POST', '/api/files', { body: { token: strangerToken, files: [{ key: seeded[0].key, name: 'x', size: 5, type: 't' }] } });
    expect(reg.status).toBe(400);
    expect(reg.body.error).toMatch(/does not exist in the app's bucket/);
  });
});

describe('the storage limit', () => {
  it('phase 1 answers 413 when stored + reserved + requested bytes exceed the limit', async () => {
    const limited = await createApp(app, owner, 'limited', 100);
    const first = [localFile('a.bin', 60)];
    const phase1 = await requestUploads(app, owner, limited.id, first);
    expect(phase1.status).toBe(200);
    // 60 reserved, 50 more would be 110.
    const over = await requestUploads(app, owner, limited.id, [localFile('b.bin', 50)]);
    expect(over.status).toBe(413);
    expect(over.body).toStrictEqual({
      error: 'Storage limit exceeded: 0 bytes stored, 60 reserved by unfinished uploads and 50 requested, over the limit of 100',
    });
    // Several files count together.
    expect((await requestUploads(app, owner, limited.id, [localFile('c', 20), localFile('d', 21)])).status).toBe(413);
    // Completing turns the reservation into stored bytes; 40 more fit exactly.
    const [u] = phase1.body.uploads;
    expect((await putTo(u.presignedUrl, first[0]!)).status).toBe(200);
    const done = await app.request('POST', '/api/files/upload', {
      headers: owner.headers,
      body: { appId: limited.id, action: 'complete', files: [{ key: u.key, name: u.name, size: 60, type: u.type }] },
    });
    expect(done.status).toBe(200);
    expect((await requestUploads(app, owner, limited.id, [localFile('e', 40)])).status).toBe(200);
    const full = await requestUploads(app, owner, limited.id, [localFile('f', 1)]);
    expect(full.status).toBe(413);
    expect(full.body.error).toBe('Storage limit exceeded: 60 bytes stored, 40 reserved by unfinished uploads and 1 requested, over the limit of 100');
    // Raising the limit lets it through; deleting files frees their bytes.
    await app.request('PATCH', '/api/apps', { headers: owner.headers, body: { appId: limited.id, storageLimit: 101 } });
    expect((await requestUploads(app, owner, limited.id, [localFile('g', 1)])).status).toBe(200);
    await app.request('DELETE', '/api/files', { headers: owner.headers, body: { fileId: done.body.files[0].id } });
    expect((await requestUploads(app, owner, limited.id, [localFile('h', 60)])).status).toBe(200);
    // A limit of 0 refuses everything but empty files.
    const zero = await createApp(app, owner, 'zero', 0);
    expect((await requestUploads(app, owner, zero.id, [localFile('i', 1)])).status).toBe(413);
    expect((await requestUploads(app, owner, zero.id, [localFile('j', 0)])).status).toBe(200);
  });

  it('concurrent phase 1 requests reserve exactly up to the limit, with distinct keys the store accepts', async () => {
    const limited = await createApp(app, owner, 'raced', 1000);
    // 30 requests of 10 files x 10 bytes under one prefix, all at once: 10 fit, 20 do not.
    const batches = Array.from({ length: 30 }, (_, r) => Array.from({ length: 10 }, (_, i) => localFile(`r${r}-${i}.bin`, 10)));
    const answers = await Promise.all(batches.map((files) => requestUploads(app, owner, limited.id, files, 'race')));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(10);
    for (const a of answers.filter((x) => x.status !== 200)) {
      expect(a.status).toBe(413);
      expect(a.body.error).toMatch(/^Storage limit exceeded: 0 bytes stored, (\d+) reserved by unfinished uploads and 100 requested, over the limit of 1000$/);
    }
    const keys = ok.flatMap((a) => a.body.uploads.map((u: any) => u.key as string));
    expect(new Set(keys).size).toBe(100);
    for (const key of keys) expect(key).toMatch(/^race\/[\w-]{22}\/r\d+-\d\.bin$/);
    const reserved = await app.running.data.value<number>("SELECT sum(size) FROM storage_uploads WHERE app_id = ? AND state = 'pending'", [limited.id]);
    expect(Number(reserved)).toBe(1000);
    // One byte more is refused; the URLs of each answer are accepted by the store, size and type signed.
    expect((await requestUploads(app, owner, limited.id, [localFile('one.bin', 1)])).status).toBe(413);
    for (const a of ok) {
      const u = a.body.uploads[0];
      const file = batches.flat().find((f) => f.name === u.name)!;
      expect((await putTo(u.presignedUrl, file)).status).toBe(200);
      expect(await objectSize(limited.bucketName, u.key)).toBe(10);
    }
    const u = ok[0]!.body.uploads[1];
    expect((await putTo(u.presignedUrl, localFile(u.name, 11))).status).toBe(403);
  });
});

describe('complete checks every object before recording anything', () => {
  async function issue(files: LocalFile[]) {
    const res = await requestUploads(app, owner, mine.id, files);
    expect(res.status).toBe(200);
    return res.body.uploads as { key: string; name: string; size: number; type: string; presignedUrl: string }[];
  }
  const complete = (files: unknown[]) =>
    app.request('POST', '/api/files/upload', { headers: owner.headers, body: { appId: mine.id, action: 'complete', files } });
  const inputs = (uploads: { key: string; name: string; size: number; type: string }[]) =>
    uploads.map(({ key, name, size, type }) => ({ key, name, size, type }));

  it('an object never uploaded: 400 naming its key, the uploaded ones are not recorded either', async () => {
    const files = [localFile('up.bin', 10), localFile('never.bin', 10)];
    const uploads = await issue(files);
    await putTo(uploads[0]!.presignedUrl, files[0]!);
    const before = await countFiles(mine.id);
    const res = await complete(inputs(uploads));
    expect(res.status).toBe(400);
    expect(res.body).toStrictEqual({ error: `Object "${uploads[1]!.key}" does not exist in the app's bucket; nothing was recorded` });
    expect(await countFiles(mine.id)).toBe(before);
    // Once it is there, the same complete succeeds, and a second one finds nothing to complete.
    await putTo(uploads[1]!.presignedUrl, files[1]!);
    expect((await complete(inputs(uploads))).status).toBe(200);
    expect(await countFiles(mine.id)).toBe(before + 2);
    const again = await complete(inputs(uploads));
    expect(again.status).toBe(400);
    expect(again.body.error).toMatch(/is not an unfinished upload of this app/);
  });

  it("an object of another size (put behind the URL's back): 400 naming the key and both sizes", async () => {
    const files = [localFile('odd.bin', 10)];
    const [u] = await issue(files);
    await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: u!.key, Body: Buffer.alloc(7) }));
    const res = await complete(inputs([u!]));
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(`Object "${u!.key}" has 7 bytes, not 10; nothing was recorded`);
  });

  it('a size other than the one issued: 400 before asking the store', async () => {
    const [u] = await issue([localFile('s.bin', 10)]);
    const res = await complete([{ ...inputs([u!])[0], size: 11 }]);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(`Size of "${u!.key}" is 11, but the upload was issued for 10 bytes; nothing was recorded`);
  });

  it('a type other than the one issued (and signed into the URL): 400', async () => {
    const [u] = await issue([localFile('t.txt', 4, 'text/plain')]);
    const res = await complete([{ ...inputs([u!])[0], type: 'text/html' }]);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(`Type of "${u!.key}" is "text/html", but the upload was issued for "text/plain"; nothing was recorded`);
  });

  it('the same key twice, and a key issued to another app: 400', async () => {
    const [u] = await issue([localFile('twice.bin', 3)]);
    const twice = await complete([...inputs([u!]), ...inputs([u!])]);
    expect(twice.status).toBe(400);
    expect(twice.body.error).toBe(`Key "${u!.key}" appears twice`);
    const other = await createApp(app, owner, 'other');
    const res = await app.request('POST', '/api/files/upload', { headers: owner.headers, body: { appId: other.id, action: 'complete', files: inputs([u!]) } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/is not an unfinished upload of this app/);
  });
});

describe('POST /api/files registers objects already in the bucket', () => {
  it('records them after checking each with the store; a missing one or a size mismatch is 400 and nothing is recorded', async () => {
    await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'sdk/one.txt', Body: 'one' }));
    await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'sdk/two.txt', Body: 'two!' }));
    const before = await countFiles(mine.id);
    const missing = await app.request('POST', '/api/files', {
      body: {
        token,
        files: [
          { key: 'sdk/one.txt', name: 'one.txt', size: 3, type: 'text/plain' },
          { key: 'sdk/none.txt', name: 'none.txt', size: 1, type: 'text/plain' },
        ],
      },
    });
    expect(missing.status).toBe(400);
    expect(missing.body).toStrictEqual({ error: `Object "sdk/none.txt" does not exist in the app's bucket; nothing was recorded` });
    const wrong = await app.request('POST', '/api/files', { body: { token, files: [{ key: 'sdk/two.txt', name: 'two.txt', size: 3, type: 'text/plain' }] } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('Object "sdk/two.txt" has 4 bytes, not 3; nothing was recorded');
    expect(await countFiles(mine.id)).toBe(before);

    const ok = await app.request('POST', '/api/files', {
      body: {
        token,
        files: [
          { key: 'sdk/one.txt', name: 'one.txt', size: 3, type: 'text/plain' },
          { key: 'sdk/two.txt', name: 'two.txt', size: 4, type: 'text/plain' },
        ],
      },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.files.map((f: { key: string; appId: string }) => [f.key, f.appId])).toEqual([
      ['sdk/one.txt', mine.id],
      ['sdk/two.txt', mine.id],
    ]);
    expect(await countFiles(mine.id)).toBe(before + 2);
    // Registering a key again updates its record (one record per key).
    await s3.send(new PutObjectCommand({ Bucket: mine.bucketName, Key: 'sdk/one.txt', Body: 'uno!!' }));
    const again = await app.request('POST', '/api/files', { body: { token, files: [{ key: 'sdk/one.txt', name: 'uno.txt', size: 5, type: 'text/plain' }] } });
    expect(again.status).toBe(200);
    expect(again.body.files[0]).toMatchObject({ id: ok.body.files[0].id, name: 'uno.txt', size: 5 });
    expect(await countFiles(mine.id)).toBe(before + 2);
  });
});

describe('DELETE /api/files removes objects, then their records', () => {
  it('with a session: fileId and fileIds', async () => {
    const recorded = await uploadFiles(app, owner, mine.id, [localFile('d1.bin'), localFile('d2.bin'), localFile('d3.bin')]);
    const one = await app.request('DELETE', '/api/files', { headers: owner.headers, body: { fileId: recorded[0].id } });
    expect(one.status).toBe(200);
    expect(one.body).toStrictEqual({ success: true });
    expect(await objectSize(mine.bucketName, recorded[0].key)).toBeUndefined();
    const many = await app.request('DELETE', '/api/files', { headers: owner.headers, body: { fileIds: [recorded[1].id, recorded[2].id] } });
    expect(many.status).toBe(200);
    for (const f of recorded) {
      expect(await objectSize(mine.bucketName, f.key)).toBeUndefined();
      expect((await app.request('GET', `/api/files/download?fileId=${f.id}`, { headers: owner.headers })).status).toBe(404);
    }
  });

  it('with a session: one unknown id among known ones deletes nothing (404)', async () => {
    const [kept] = await uploadFiles(app, owner, mine.id, [localFile('kept.bin')]);
    const res = await app.request('DELETE', '/api/files', { headers: owner.headers, body: { fileIds: [kept.id, OTHER] } });
    expect(res.status).toBe(404);
    expect(await objectSize(mine.bucketName, kept.key)).toBe(16);
    expect((await app.request('GET', `/api/files/download?fileId=${kept.id}`, { headers: owner.headers })).status).toBe(200);
  });

  it('with a Bearer token: keys (unknown keys are no error)', async () => {
    const recorded = await uploadFiles(app, owner, mine.id, [localFile('k1.bin'), localFile('k2.bin')]);
    const before = await countFiles(mine.id);
    const res = await app.request('DELETE', '/api/files', { headers: bearer(token), body: { keys: [recorded[0].key, recorded[1].key, 'no/such/key'] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toStrictEqual({ success: true });
    for (const f of recorded) expect(await objectSize(mine.bucketName, f.key)).toBeUndefined();
    expect(await countFiles(mine.id)).toBe(before - 2);
  });
});

describe('reservations expire', () => {
  let short: TestApp;
  let who: SignedIn;
  let shortApp: any;
  const tag = uniquePrefix('exp');

  beforeAll(async () => {
    short = await startStorageApp(target, { prefix: tag, storage: 'reservation_ttl_seconds = 2\nreaper_interval_seconds = 1' });
    who = await signIn(short);
    shortApp = await createApp(short, who, 'short', 100);
  });
  afterAll(async () => {
    await short?.close();
    if (s3) await removeBuckets(s3, tag);
  });

  it('an expired presigned PUT is refused by the store (403); the reaper deletes objects of uploads never completed and frees their bytes', async () => {
    const late = localFile('late.bin', 10);
    const abandoned = localFile('abandoned.bin', 80);
    const res = await requestUploads(short, who, shortApp.id, [late, abandoned]);
    expect(res.status).toBe(200);
    const [lateUpload, abandonedUpload] = res.body.uploads;
    expect(new URL(lateUpload.presignedUrl).searchParams.get('X-Amz-Expires')).toBe('2');
    expect((await putTo(abandonedUpload.presignedUrl, abandoned)).status).toBe(200);
    expect((await requestUploads(short, who, shortApp.id, [localFile('more', 20)])).status).toBe(413);

    await new Promise((r) => setTimeout(r, 3500));
    const refused = await putTo(lateUpload.presignedUrl, late);
    expect(refused.status).toBe(403);
    expect(await refused.text()).toMatch(/AccessDenied|RequestExpired|expired/i);

    const deadline = Date.now() + 10_000;
    while ((await objectSize(shortApp.bucketName, abandonedUpload.key)) !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await objectSize(shortApp.bucketName, abandonedUpload.key)).toBeUndefined();
    expect(await short.running.data.value('SELECT count(*) FROM storage_uploads')).toBe(0);
    // Completing an expired upload is refused; the freed bytes can be reserved again.
    const done = await short.request('POST', '/api/files/upload', {
      headers: who.headers,
      body: { appId: shortApp.id, action: 'complete', files: [{ key: abandonedUpload.key, name: 'abandoned.bin', size: 80, type: abandoned.type }] },
    });
    expect(done.status).toBe(400);
    expect((await requestUploads(short, who, shortApp.id, [localFile('again', 100)])).status).toBe(200);
  }, 30_000);
});
