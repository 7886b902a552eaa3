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
    const uploaded = JSON.parse(up.stdout) as { key: string; name: string; size: number; type: string }[];
    expect(uploaded.map((f) => [f.name, f.size, f.type])).toEqual([
      ['report 2026.pdf', 19, 'application/pdf'],
      ['notes.txt', 28, 'text/plain'],
    ]);
    expect(uploaded[0]!.key).toMatch(/^docs\/[0-9a-f-]{36}\/report_2026\.pdf$/);

    const ls = await wharf(['files', 'ls'], { WHARF_APP_TOKEN: token });
    expect(ls.status, ls.stderr).toBe(0);
    expect(ls.stdout.split('\n')[0]).toMatch(/^KEY\s+SIZE\s+TYPE\s+UPLOADED$/);
    expect(ls.stdout).toContain('page 1 of 1 (2 files)');
    const search = JSON.parse((await wharf(['files', 'ls', '--search', 'notes', '--token', token, '--json'])).stdout);
    expect(search.files.map((f: { name: string }) => f.name)).toEqual(['notes.txt']);

    const out = path.join(dir, 'copy.txt');
    const got = await wharf(['files', 'get', uploaded[1]!.key, '--out', out, '--token', token]);
    expect(got.status, got.stderr).toBe(0);
    expect(fs.readFileSync(out, 'utf8')).toBe('hello from the command line\n');

    // Another app's token sees none of these files and cannot fetch them.
    expect(JSON.parse((await wharf(['files', 'ls', '--token', otherToken, '--json'])).stdout).files).toEqual([]);
    const foreign = await wharf(['files', 'get', uploaded[1]!.key, '--token', otherToken]);
    expect(foreign.status).toBe(1);
    expect(foreign.stderr).toBe(`wharf: no file with key ${uploaded[1]!.key}\n`);

    const rm = await wharf(['files', 'rm', uploaded[0]!.key, '--token', token]);
    expect(rm.stdout).toBe('deleted 1 file\n');
    const left = JSON.parse((await wharf(['files', 'ls', '--token', token, '--json'])).stdout);
    expect(left.files.map((f: { name: string }) => f.name)).toEqual(['notes.txt']);
    const gone = await wharf(['files', 'get', uploaded[0]!.key, '--token', token]);
    expect(gone.stderr).toBe(`wharf: no file with key ${uploaded[0]!.key}\n`);
  }, 60_000);

  it('answers bad input in one line', async () => {
    expect(await wharf(['files', 'ls'])).toMatchObject({ status: 1, stderr: 'wharf: give the app API token with --token (or WHARF_APP_TOKEN)\n' });
    expect(await wharf(['files', 'ls', '--token', 'svc_live_nope'])).toMatchObject({
      status: 1,
      stderr: expect.stringMatching(/^wharf: .*(invalid|Invalid).*\n$/),
    });
    expect(await wharf(['files', 'upload', 'missing.bin', '--token', token])).toMatchObject({ status: 1, stderr: 'wharf: missing.bin: no such file\n' });
  });
});
