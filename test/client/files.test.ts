/** `wharf files upload|ls|rm|get` with an app API token, against the embedded store. */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, tempDir, type TestApp } from '../helpers/app.ts';
import { wharfAsync } from '../helpers/cli.ts';
import { signIn } from '../helpers/identity.ts';
import { createApp, createToken } from '../helpers/storage.ts';

let app: TestApp;
let token: string;
let otherToken: string;
let dir: string;

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  const owner = await signIn(app);
  token = await createToken(app, owner, (await createApp(app, owner, 'cli files')).id);
  const stranger = await signIn(app);
  otherToken = await createToken(app, stranger, (await createApp(app, stranger, 'other')).id);
  dir = tempDir();
  fs.writeFileSync(path.join(dir, 'report 2026.pdf'), Buffer.from('%PDF-1.7 not really'));
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello from the command line\n');
});
afterAll(() => app?.close());

const wharf = (args: string[], env: NodeJS.ProcessEnv = {}) => wharfAsync([...args, '--instance', app.url], { cwd: dir, env });

describe('wharf files', () => {
  it('uploads, lists, downloads and removes files with the app token', async () => {
    const up = await wharf(['files', 'upload', 'report 2026.pdf', 'notes.txt', '--prefix', 'docs', '--token', token, '--json']);
    expect(up.status, up.stderr).toBe(0);
    const { files: uploaded, summary } = JSON.parse(up.stdout) as { files: { key: string; name: string; size: number; type: string }[]; summary: unknown };
    expect(summary).toEqual({ uploaded: 2, bytes: 47, skipped: 0, failed: 0, seconds: expect.any(Number) });
    expect(uploaded.map((f) => [f.name, f.size, f.type])).toEqual([
      ['report 2026.pdf', 19, 'application/pdf'],
      ['notes.txt', 28, 'text/plain'],
    ]);
    expect(uploaded[0]!.key).toMatch(/^docs\/[0-9a-f-]{36}\/report_2026\.pdf$/);

    const ls = await wharf(['files', 'ls'], { WHARF_APP_TOKEN: token });
    expect(ls.status, ls.stderr).toBe(0);
    expect(ls.stdout.split('\n')[0]).toMatch(/^NAME\s+KEY\s+SIZE\s+TYPE\s+UPLOADED$/);
    // The NAME column is what --search matches; the key differs from it (prefix, id, safe characters).
    expect(ls.stdout).toMatch(/\nreport 2026\.pdf\s+docs\/\S+\/report_2026\.pdf\s+19 B\s+application\/pdf\s/);
    expect(ls.stdout).toMatch(/\nnotes\.txt\s+d\S+\/notes\.txt\s+28 B\s+text\/plain\s/);
    expect(ls.stdout).toContain('page 1 of 1 (2 files)');
    const search = JSON.parse((await wharf(['files', 'ls', '--search', 'notes', '--token', token, '--json'])).stdout);
    expect(search.files.map((f: { name: string }) => f.name)).toEqual(['notes.txt']);
    // The key's prefix is not the name: --search docs/ finds nothing, and says why.
    expect(await wharf(['files', 'ls', '--search', 'docs/', '--token', token])).toMatchObject({
      status: 0,
      stdout: 'No file name contains "docs/" (--search matches names, not keys).\n',
    });
    expect((await wharf(['files', 'ls', '--help'])).stdout.replace(/\s+/g, ' ')).toContain('Substring of the file name (case-sensitive), not the key');
    // A page past the end says so (the files exist); an empty --search is refused, not a listing of everything.
    expect(await wharf(['files', 'ls', '--search', 'o', '--page', '3', '--page-size', '1', '--token', token])).toMatchObject({
      status: 0,
      stdout: 'Page 3 is past the end: 2 files whose name contains "o" in 2 pages of 1.\n',
    });
    expect(await wharf(['files', 'ls', '--search', '', '--token', token])).toMatchObject({
      status: 1,
      stderr: 'wharf: --search needs a term: a substring of the file name\n',
    });

    const out = path.join(dir, 'copy.txt');
    const got = await wharf(['files', 'get', uploaded[1]!.key, '--out', out, '--token', token]);
    expect(got.status, got.stderr).toBe(0);
    expect(fs.readFileSync(out, 'utf8')).toBe('hello from the command line\n');

    // Another app's token sees none of these files and cannot fetch them.
    expect(JSON.parse((await wharf(['files', 'ls', '--token', otherToken, '--json'])).stdout).files).toEqual([]);
    const foreign = await wharf(['files', 'get', uploaded[1]!.key, '--out', path.join(dir, 'foreign.txt'), '--token', otherToken]);
    expect(foreign.status).toBe(1);
    expect(foreign.stderr).toBe(`wharf: no file with key ${uploaded[1]!.key}\n`);

    const rm = await wharf(['files', 'rm', uploaded[0]!.key, '--token', token]);
    expect(rm).toMatchObject({ status: 0, stdout: 'deleted 1 file\n', stderr: '' });
    const left = JSON.parse((await wharf(['files', 'ls', '--token', token, '--json'])).stdout);
    expect(left.files.map((f: { name: string }) => f.name)).toEqual(['notes.txt']);
    const gone = await wharf(['files', 'get', uploaded[0]!.key, '--token', token]);
    expect(gone.stderr).toBe(`wharf: no file with key ${uploaded[0]!.key}\n`);
  }, 120_000);

  it('answers bad input in one line', async () => {
    expect(await wharf(['files', 'ls'])).toMatchObject({ status: 1, stderr: 'wharf: give the app API token with --token (or WHARF_APP_TOKEN)\n' });
    expect(await wharf(['files', 'ls', '--token', 'svc_live_nope'])).toMatchObject({
      status: 1,
      stderr: expect.stringMatching(/^wharf: .*(invalid|Invalid).*\n$/),
    });
    expect(await wharf(['files', 'upload', 'missing.bin', '--token', token])).toMatchObject({
      status: 1,
      stderr: 'wharf: missing.bin: no such file or folder\n',
    });
  });
});

describe('wharf files rm', () => {
  it('deletes the keys that exist and names the ones that did not, exit 1', async () => {
    const up = JSON.parse((await wharf(['files', 'upload', 'notes.txt', 'report 2026.pdf', '--prefix', 'rm', '--token', token, '--json'])).stdout).files as {
      key: string;
    }[];
    const [a, b] = up.map((f) => f.key);
    const r = await wharf(['files', 'rm', a!, 'rm/never-there.txt', b!, 'nope', '--token', token]);
    expect(r).toMatchObject({ status: 1, stdout: 'deleted 2 files\n', stderr: 'wharf: no file with key rm/never-there.txt\nwharf: no file with key nope\n' });
    const left = JSON.parse((await wharf(['files', 'ls', '--search', '2026', '--token', token, '--json'])).stdout).files.map((f: { key: string }) => f.key);
    expect(left).not.toContain(b);
    // Deleting them again: nothing existed.
    const again = await wharf(['files', 'rm', a!, '--token', token, '--json']);
    expect(again.status).toBe(1);
    expect(JSON.parse(again.stdout)).toEqual({ deleted: [], notFound: [a] });
    expect(again.stderr).toBe(`wharf: no file with key ${a}\n`);
  }, 120_000);
});

describe('wharf files get', () => {
  it('never replaces an existing file without --force, and never leaves half a file', async () => {
    const [f] = JSON.parse((await wharf(['files', 'upload', 'notes.txt', '--prefix', 'get', '--token', token, '--json'])).stdout).files as { key: string }[];
    const out = path.join(dir, 'kept.txt');
    fs.writeFileSync(out, 'mine, do not touch\n');
    const refused = await wharf(['files', 'get', f!.key, '--out', out, '--token', token]);
    expect(refused).toMatchObject({ status: 1, stdout: '', stderr: `wharf: ${out} exists; add --force to replace it, or choose another --out\n` });
    expect(fs.readFileSync(out, 'utf8')).toBe('mine, do not touch\n');
    // The default name (notes.txt) exists in the working directory too.
    expect((await wharf(['files', 'get', f!.key, '--token', token])).stderr).toBe(
      'wharf: notes.txt exists; add --force to replace it, or choose another --out\n',
    );
    expect(fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8')).toBe('hello from the command line\n');

    const forced = await wharf(['files', 'get', f!.key, '--out', out, '--force', '--token', token]);
    expect(forced).toMatchObject({ status: 0, stdout: `wrote 28 B to ${out}\n` });
    expect(fs.readFileSync(out, 'utf8')).toBe('hello from the command line\n');

    // --out a folder: the file goes inside under its own name.
    const folder = fs.mkdtempSync(path.join(dir, 'into-'));
    expect(await wharf(['files', 'get', f!.key, '--out', folder, '--token', token])).toMatchObject({
      status: 0,
      stdout: `wrote 28 B to ${path.join(folder, 'notes.txt')}\n`,
    });
    expect(await wharf(['files', 'get', f!.key, '--out', path.join(dir, 'no/such/dir/x.txt'), '--token', token])).toMatchObject({
      status: 1,
      stderr: expect.stringMatching(/^wharf: cannot write .*no\/such\/dir\/x\.txt: ENOENT/),
    });
    // A missing key leaves no file and no temporary file behind.
    const before = fs.readdirSync(folder);
    expect((await wharf(['files', 'get', 'get/none.txt', '--out', folder, '--token', token])).stderr).toBe('wharf: no file with key get/none.txt\n');
    expect(fs.readdirSync(folder)).toEqual(before);
  }, 120_000);
});

describe('what the command line prints', () => {
  it('shows control characters from the server as \\uXXXX, never sends them to the terminal', async () => {
    // A key with an escape code (S3 allows it), put straight into the bucket and registered.
    const validation = (await app.request('POST', '/api/tokens/validate', { body: { token } })).body;
    const { S3Client, PutObjectCommand } = await import('@aws-sdk/client-s3');
    const s3 = new S3Client({
      endpoint: `http://${validation.storage.endPoint}:${validation.storage.port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: validation.storage.accessKey, secretAccessKey: validation.storage.secretKey },
    });
    const key = 'evil\u001b]0;pwned\u0007\u001b[2J.txt';
    await s3.send(new PutObjectCommand({ Bucket: validation.bucketName, Key: key, Body: 'x' }));
    s3.destroy();
    const registered = await app.request('POST', '/api/files', { body: { token, files: [{ key, name: 'evil.txt', size: 1, type: 'text/plain' }] } });
    expect(registered.status, registered.text).toBe(200);
    const ls = await wharf(['files', 'ls', '--search', 'evil', '--token', token]);
    expect(ls.status, ls.stderr).toBe(0);
    expect([...ls.stdout].filter((c) => c !== '\n' && c.charCodeAt(0) < 0x20)).toEqual([]);
    expect(ls.stdout).toContain('evil\\u001b]0;pwned\\u0007\\u001b[2J.txt');
    // JSON keeps the key exact (JSON escapes it itself).
    const json = JSON.parse((await wharf(['files', 'ls', '--search', 'evil', '--token', token, '--json'])).stdout);
    expect(json.files[0].key).toBe(key);
  });
});
