/**
 * `wharf files upload DIR`: a folder tree under --prefix, in parallel (bounded), a progress bar
 * on a terminal and plain lines elsewhere, large files through multipart, and a re-run that
 * continues an unfinished upload (ListMultipartUploads + ListParts) and skips what is already
 * stored. Against the embedded store, behind a real counting proxy, and against Ceph RGW.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, tempDir, type TestApp } from '../helpers/app.ts';
import { cleanEnv, freePort, root, wharfAsync } from '../helpers/cli.ts';
import { signIn } from '../helpers/identity.ts';
import { ensureS3, s3Client } from '../helpers/s3.ts';
import { closeStorageApp, createApp, createToken, startStorageApp, uniquePrefix } from '../helpers/storage.ts';

const MiB = 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The app's bucket with the key validation hands out, as the command sees it. */
async function storeOf(app: TestApp, token: string): Promise<{ s3: S3Client; bucket: string }> {
  const v = (await app.request('POST', '/api/tokens/validate', { body: { token } })).body;
  const s3 = new S3Client({
    endpoint: `${v.storage.useSSL ? 'https' : 'http'}://${v.storage.endPoint}:${v.storage.port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: v.storage.accessKey, secretAccessKey: v.storage.secretKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return { s3, bucket: v.bucketName };
}

async function objectBytes(store: { s3: S3Client; bucket: string }, key: string): Promise<Buffer> {
  const got = await store.s3.send(new GetObjectCommand({ Bucket: store.bucket, Key: key }));
  return Buffer.from(await got.Body!.transformToByteArray());
}

async function unfinished(store: { s3: S3Client; bucket: string }, prefix: string): Promise<string[]> {
  const out = await store.s3.send(new ListMultipartUploadsCommand({ Bucket: store.bucket, Prefix: prefix }));
  return (out.Uploads ?? []).map((u) => u.Key!);
}

/** Starts a multipart upload of `key` and sends the given parts, as an interrupted run leaves it. */
async function interruptedUpload(store: { s3: S3Client; bucket: string }, key: string, parts: Buffer[]): Promise<string> {
  const { UploadId } = await store.s3.send(new CreateMultipartUploadCommand({ Bucket: store.bucket, Key: key, ContentType: 'application/octet-stream' }));
  for (const [i, body] of parts.entries())
    await store.s3.send(new UploadPartCommand({ Bucket: store.bucket, Key: key, UploadId, PartNumber: i + 1, Body: body, ContentLength: body.length }));
  return UploadId!;
}

/** A folder with a tree, a symbolic link (skipped) and an empty folder (nothing to send). */
function siteFolder(): { dir: string; files: Record<string, Buffer> } {
  const dir = path.join(tempDir(), 'site');
  const files: Record<string, Buffer> = {
    'index.html': Buffer.from('<h1>hello</h1>\n'),
    'css/site.css': Buffer.from('h1 { color: teal }\n'),
    'img/logo.png': randomBytes(70_000),
    'img/deep/er/x y.txt': Buffer.from('spaces kept\n'),
  };
  for (const [rel, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), body);
  }
  fs.mkdirSync(path.join(dir, 'empty'));
  fs.symlinkSync('index.html', path.join(dir, 'link.html'));
  return { dir, files };
}

/**
 * The resume scenario on one store: a folder with a large file whose previous upload stopped
 * after two parts (the second one wrong), then a single large file continued under the UUID key
 * of its earlier run, past a newer unfinished upload of another file with the same name.
 */
async function resumes(app: TestApp, token: string): Promise<void> {
  const store = await storeOf(app, token);
  const cwd = tempDir();
  const big = randomBytes(13 * MiB);
  fs.mkdirSync(path.join(cwd, 'media'));
  fs.writeFileSync(path.join(cwd, 'media', 'big.bin'), big);
  fs.writeFileSync(path.join(cwd, 'media', 'small.txt'), 'small\n');
  const flags = ['--multipart-threshold', '5MiB', '--part-size', '5MiB', '--token', token, '--instance', app.url];
  try {
    await interruptedUpload(store, 'vid/big.bin', [big.subarray(0, 5 * MiB), randomBytes(5 * MiB)]);
    const r = await wharfAsync(['files', 'upload', 'media', '--prefix', 'vid', ...flags], { cwd });
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.slice(0, -1).sort()).toEqual([
      'resumed big.bin (13.0 MiB) as vid/big.bin: 1 of 3 parts were already in the store',
      'uploaded small.txt (6 B) as vid/small.txt',
    ]);
    expect(lines.at(-1)).toMatch(/^uploaded 2 files \(13\.0 MiB\) in \d+\.\d s, 0 skipped, 0 failed$/);
    expect(sha256(await objectBytes(store, 'vid/big.bin'))).toBe(sha256(big));
    expect(await unfinished(store, 'vid/')).toEqual([]);

    // Again: nothing to send; the object's multipart ETag is recomputed from the local bytes.
    const again = await wharfAsync(['files', 'upload', 'media', '--prefix', 'vid', ...flags], { cwd });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain('unchanged big.bin (13.0 MiB) as vid/big.bin: already in the store\n');
    expect(again.stdout).toContain('unchanged small.txt (6 B) as vid/small.txt: already in the store\n');
    // Nothing sent: still one summary line, at the end.
    expect(again.stdout).toMatch(/\nuploaded 0 files \(0 B\) in \d+\.\d s, 2 skipped, 0 failed\n$/);

    // A file named on its own gets a UUID key; its earlier run is found by name and checked by bytes.
    const earlier = 'solo/0b6f3c1e-8a4d-4d1e-9f5a-3c2b1a0f9e8d/big.bin';
    await interruptedUpload(store, earlier, [big.subarray(0, 5 * MiB)]);
    await new Promise((r) => setTimeout(r, 1100));
    const other = 'solo/7d2e4f6a-1b3c-4e5d-8f9a-0b1c2d3e4f5a/big.bin';
    const otherId = await interruptedUpload(store, other, [randomBytes(5 * MiB)]);
    const solo = await wharfAsync(['files', 'upload', 'media/big.bin', '--prefix', 'solo', ...flags, '--json'], { cwd });
    expect(solo.status, solo.stderr).toBe(0);
    expect(JSON.parse(solo.stdout)).toEqual({
      files: [expect.objectContaining({ key: earlier, name: 'big.bin', size: 13 * MiB })],
      summary: { uploaded: 1, bytes: 13 * MiB, skipped: 0, failed: 0, seconds: expect.any(Number) },
    });
    expect(sha256(await objectBytes(store, earlier))).toBe(sha256(big));
    expect(await unfinished(store, 'solo/')).toEqual([other]);
    await store.s3.send(new AbortMultipartUploadCommand({ Bucket: store.bucket, Key: other, UploadId: otherId }));

    const listed = JSON.parse((await wharfAsync(['files', 'ls', '--search', 'big', '--token', token, '--instance', app.url, '--json'])).stdout);
    expect(listed.files.map((f: { key: string }) => f.key).sort()).toEqual([earlier, 'vid/big.bin']);
  } finally {
    store.s3.destroy();
  }
}

describe('wharf files upload DIR, on the embedded store behind a counting proxy', () => {
  let app: TestApp;
  let token: string;
  let proxy: http.Server;
  const seen = { inFlight: 0, max: 0, puts: 0, delayMs: 0 };
  /** A PutObject of this key (the SDK adds ?x-id=PutObject to the path). */
  const isPut = (req: http.IncomingMessage, key: string) => req.method === 'PUT' && new URL(req.url!, 'http://proxy').pathname.endsWith(`/${key}`);
  /** A test's own answer to some requests (true: the proxy leaves the request to it). */
  let intercept: ((req: http.IncomingMessage, res: http.ServerResponse) => boolean) | null = null;

  beforeAll(async () => {
    // A real HTTP proxy between the command and the store: it counts requests in flight.
    const storePort = await freePort();
    proxy = http.createServer((req, res) => {
      seen.inFlight++;
      seen.max = Math.max(seen.max, seen.inFlight);
      if (req.method === 'PUT') seen.puts++;
      res.on('close', () => seen.inFlight--);
      if (intercept?.(req, res)) return;
      const up = http.request({ host: '127.0.0.1', port: storePort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        setTimeout(() => {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        }, seen.delayMs);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n', {
      env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: `127.0.0.1:${storePort}`, WHARF_PLUGINS__STORAGE__FS__PUBLIC_URL: proxyUrl },
    });
    const owner = await signIn(app);
    token = await createToken(app, owner, (await createApp(app, owner, 'folders')).id);
  });
  afterAll(async () => {
    await app?.close();
    proxy?.closeAllConnections();
    await new Promise((r) => proxy?.close(r));
  });

  const wharf = (args: string[], cwd?: string) => wharfAsync([...args, '--token', token, '--instance', app.url], { cwd });

  it('uploads the tree with keys relative to the folder, in plain lines, and a re-run sends only what changed', async () => {
    const { dir, files } = siteFolder();
    const r = await wharf(['files', 'upload', dir, '--prefix', 'www']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe(`wharf: skipping 1 entry that is not a regular file (symbolic links and the like; first: ${path.join(dir, 'link.html')})\n`);
    // Not a terminal: no bar, no carriage returns, one line per file in the order they finish.
    expect(r.stdout).not.toContain('\r');
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.slice(0, -1).sort()).toEqual(
      Object.entries(files)
        .map(([rel, b]) => `uploaded ${path.basename(rel)} (${b.length < 1024 ? `${b.length} B` : '68 KiB'}) as www/${rel}`)
        .sort(),
    );
    // The symbolic link counts as skipped.
    expect(lines.at(-1)).toMatch(/^uploaded 4 files \(68 KiB\) in \d+\.\d s, 1 skipped, 0 failed$/);

    const listed = JSON.parse((await wharf(['files', 'ls', '--page-size', '100', '--json'])).stdout);
    expect(listed.files.map((f: { key: string; name: string; type: string }) => [f.key, f.name, f.type]).sort()).toEqual([
      ['www/css/site.css', 'site.css', 'text/css'],
      ['www/img/deep/er/x y.txt', 'x y.txt', 'text/plain'],
      ['www/img/logo.png', 'logo.png', 'image/png'],
      ['www/index.html', 'index.html', 'text/html'],
    ]);
    const out = tempDir();
    for (const [rel, body] of Object.entries(files)) {
      const got = await wharf(['files', 'get', `www/${rel}`, '--out', out]);
      expect(got.status, got.stderr).toBe(0);
      expect(sha256(fs.readFileSync(path.join(out, path.basename(rel))))).toBe(sha256(body));
    }

    fs.writeFileSync(path.join(dir, 'index.html'), '<h1>hello again</h1>\n');
    const putsBefore = seen.puts;
    const again = await wharf(['files', 'upload', dir, '--prefix', 'www', '--json']);
    expect(again.status, again.stderr).toBe(0);
    const { files: recorded, summary } = JSON.parse(again.stdout);
    // One file changed and is sent; the other three are in the store already, and the link is skipped.
    expect(summary).toEqual({ uploaded: 1, bytes: 21, skipped: 4, failed: 0, seconds: expect.any(Number) });
    expect(recorded.map((f: { key: string; size: number }) => [f.key, f.size])).toEqual([
      ['www/css/site.css', 19],
      ['www/img/deep/er/x y.txt', 12],
      ['www/img/logo.png', 70_000],
      ['www/index.html', 21],
    ]);
    expect(seen.puts - putsBefore).toBe(1);
    const got = await wharf(['files', 'get', 'www/index.html', '--out', out, '--force']);
    expect(got.status, got.stderr).toBe(0);
    expect(fs.readFileSync(path.join(out, 'index.html'), 'utf8')).toBe('<h1>hello again</h1>\n');
  }, 90_000);

  it('runs transfers in parallel, never more than --concurrency at once', async () => {
    const dir = path.join(tempDir(), 'many');
    fs.mkdirSync(dir);
    for (let i = 0; i < 12; i++) fs.writeFileSync(path.join(dir, `f${String(i).padStart(2, '0')}.txt`), `file ${i}\n`);
    seen.delayMs = 150;
    seen.max = 0;
    try {
      const r = await wharf(['files', 'upload', dir, '--prefix', 'many', '--concurrency', '3']);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/\nuploaded 12 files \(86 B\) in \d+\.\d s, 0 skipped, 0 failed\n$/);
    } finally {
      seen.delayMs = 0;
    }
    // Every answer waits 150 ms at the proxy: one-at-a-time would show 1, unbounded 12.
    expect(seen.max).toBe(3);
  }, 90_000);

  it('ends every run with one summary line: a failed file is counted, named on stderr, and the exit code is 1', async () => {
    const cwd = tempDir();
    fs.mkdirSync(path.join(cwd, 'part'));
    for (const name of ['a.txt', 'b.txt', 'c.txt']) fs.writeFileSync(path.join(cwd, 'part', name), `${name}\n`);
    // The store refuses the PUT of b.txt (403 is not retried).
    intercept = (req, res) => {
      if (!isPut(req, 'fail/b.txt')) return false;
      res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error><Code>AccessDenied</Code><Message>no</Message></Error>');
      return true;
    };
    try {
      const r = await wharf(['files', 'upload', 'part', '--prefix', 'fail'], cwd);
      expect(r.status).toBe(1);
      expect(r.stdout).toMatch(/\nuploaded 2 files \(12 B\) in \d+\.\d s, 0 skipped, 1 failed\n$/);
      expect(r.stderr).toMatch(/^wharf: part\/b\.txt: AccessDenied: no \(HTTP 403\)\nwharf: 1 of 3 files failed; run the same command again to continue/);
      const json = await wharf(['files', 'upload', 'part', '--prefix', 'fail', '--json'], cwd);
      expect(json.status).toBe(1);
      const { files, summary } = JSON.parse(json.stdout);
      expect(files.map((f: { key: string }) => f.key)).toEqual(['fail/a.txt', 'fail/c.txt']);
      expect(summary).toEqual({ uploaded: 0, bytes: 0, skipped: 2, failed: 1, seconds: expect.any(Number) });
    } finally {
      intercept = null;
    }
  }, 60_000);

  it('stops on Ctrl-C: aborts the transfer in flight, records what finished, says what is left and exits 130', async () => {
    const cwd = tempDir();
    fs.mkdirSync(path.join(cwd, 'batch'));
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'e.txt']) fs.writeFileSync(path.join(cwd, 'batch', name), `${name}\n`);
    // The PUT of c.txt reaches the proxy and gets no answer: only an abort can end it. With
    // --concurrency 1 the files go one after another, so a and b are done by then.
    let arrived!: () => void;
    const held = new Promise<void>((resolve) => (arrived = resolve));
    let closed!: () => void;
    const abandoned = new Promise<void>((resolve) => (closed = resolve));
    intercept = (req, res) => {
      if (!isPut(req, 'ctrlc/c.txt')) return false;
      res.on('close', closed);
      arrived();
      return true;
    };
    let child: ReturnType<typeof spawn> | undefined;
    try {
      child = spawn(
        process.execPath,
        [path.join(root, 'bin/wharf.ts'), 'files', 'upload', 'batch', '--prefix', 'ctrlc', '--concurrency', '1', '--token', token, '--instance', app.url],
        { cwd, env: cleanEnv() },
      );
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d) => (stdout += d));
      child.stderr!.on('data', (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child!.once('exit', resolve));
      await held;
      child.kill('SIGINT');
      await abandoned;
      const code = await exited;
      expect(stderr).toBe('wharf: interrupted: 2 of 5 files uploaded, 3 left\n');
      expect(code).toBe(130);
      expect(stdout).toBe('uploaded a.txt (6 B) as ctrlc/a.txt\nuploaded b.txt (6 B) as ctrlc/b.txt\n');
    } finally {
      intercept = null;
      if (child?.exitCode === null) child.kill('SIGKILL');
    }
    // What finished before Ctrl-C is recorded; the rest is not in the store.
    const listed = JSON.parse((await wharf(['files', 'ls', '--page-size', '100', '--json'])).stdout);
    const keys = listed.files.map((f: { key: string }) => f.key).filter((k: string) => k.startsWith('ctrlc/'));
    expect(keys.sort()).toEqual(['ctrlc/a.txt', 'ctrlc/b.txt']);
    // The next run sends what is left and skips what is there.
    const again = await wharf(['files', 'upload', 'batch', '--prefix', 'ctrlc'], cwd);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/\nuploaded 3 files \(18 B\) in \d+\.\d s, 2 skipped, 0 failed\n$/);
  }, 60_000);

  it('draws a progress bar on a terminal', async () => {
    const cwd = tempDir();
    fs.writeFileSync(path.join(cwd, 'a.bin'), randomBytes(6 * MiB));
    fs.writeFileSync(path.join(cwd, 'b.txt'), 'b\n');
    const command = [
      process.execPath,
      path.join(root, 'bin/wharf.ts'),
      'files',
      'upload',
      'a.bin',
      'b.txt',
      '--prefix',
      'tty',
      '--multipart-threshold',
      '5MiB',
      '--part-size',
      '5MiB',
      '--token',
      token,
      '--instance',
      app.url,
    ]
      .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
      .join(' ');
    // util-linux `script` gives the command a pseudo-terminal, as a person's shell would.
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd, env: { ...cleanEnv(), COLUMNS: '100' } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code, out).toBe(0);
    expect(out).toMatch(/\r\[#+-*\] +\d+% {2}\S+ \S+ of 6\.0 MiB {2}\d\/2 files {2}\S+ \S+\/s/);
    expect(out).toContain('] 100%  6.0 MiB of 6.0 MiB  2/2 files');
    // The bar is cleared (ESC [K) before each file's line.
    expect(out.split('\u001b[K').join('')).toMatch(/\ruploaded a\.bin \(6\.0 MiB\) as tty\/[0-9a-f-]{36}\/a\.bin\r?\n/);
    expect(out).toMatch(/\nuploaded 2 files \(6\.0 MiB\) in \d+\.\d s, 0 skipped, 0 failed\r?\n$/);
  }, 60_000);

  it('continues an interrupted multipart upload and skips what is stored', () => resumes(app, token), 120_000);

  it('answers bad input in one line, before sending anything', async () => {
    const cwd = tempDir();
    fs.mkdirSync(path.join(cwd, 'empty'));
    fs.writeFileSync(path.join(cwd, 'a.txt'), 'a\n');
    const putsBefore = seen.puts;
    expect(await wharf(['files', 'upload', 'a.txt', 'no-such-folder'], cwd)).toMatchObject({
      status: 1,
      stdout: '',
      stderr: 'wharf: no-such-folder: no such file or folder\n',
    });
    expect(await wharf(['files', 'upload', 'empty'], cwd)).toMatchObject({ status: 1, stderr: 'wharf: empty: no files to upload in this folder\n' });
    expect(await wharf(['files', 'upload', 'a.txt', '--part-size', '1MiB'], cwd)).toMatchObject({
      status: 1,
      stderr: "wharf: --part-size must be at least 5MiB (the store's smallest part): 1MiB\n",
    });
    expect(await wharf(['files', 'upload', 'a.txt', '--multipart-threshold', 'lots'], cwd)).toMatchObject({
      status: 1,
      stderr: 'wharf: --multipart-threshold: not a size: lots (for example 8MiB, 512KiB, 1GiB or bytes)\n',
    });
    expect(await wharf(['files', 'upload', 'a.txt', '--concurrency', '0'], cwd)).toMatchObject({
      status: 1,
      stderr: 'wharf: --concurrency must be a whole number from 1 to 32: 0\n',
    });
    // Two local files that would land on one key.
    fs.mkdirSync(path.join(cwd, 'one'));
    fs.mkdirSync(path.join(cwd, 'two'));
    fs.writeFileSync(path.join(cwd, 'one', 'same.txt'), '1');
    fs.writeFileSync(path.join(cwd, 'two', 'same.txt'), '2');
    expect(await wharf(['files', 'upload', 'one', 'two'], cwd)).toMatchObject({
      status: 1,
      stderr: 'wharf: two/same.txt and one/same.txt would both be stored as same.txt; upload them with different --prefix values\n',
    });
    fs.writeFileSync(path.join(cwd, 'one', 'bad\u0001name.txt'), 'x');
    expect((await wharf(['files', 'upload', 'one'], cwd)).stderr).toBe(
      // The control character itself is shown escaped, never sent to the terminal.
      `wharf: ${path.join('one', 'bad\\u0001name.txt')}: the name holds control characters, which S3 keys cannot carry; rename it\n`,
    );
    expect(seen.puts).toBe(putsBefore);
  }, 60_000);
});

describe('wharf files upload DIR, on Ceph RGW', () => {
  const prefix = uniquePrefix('cliup');
  let app: TestApp;
  let token: string;
  let admin: S3Client;

  beforeAll(async () => {
    const target = await ensureS3();
    admin = s3Client(target);
    app = await startStorageApp(target, { prefix });
    const owner = await signIn(app);
    token = await createToken(app, owner, (await createApp(app, owner, 'ceph folders')).id);
  });
  afterAll(() => closeStorageApp(app, admin, prefix));

  it('continues an interrupted multipart upload and skips what is stored', () => resumes(app, token), 180_000);
});
