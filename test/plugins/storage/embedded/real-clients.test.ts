/**
 * Debian's awscli, rclone and s3cmd, each with its defaults, against the embedded endpoint with
 * the key POST /api/tokens/validate hands out: ls (buckets and objects), cp up and down, a
 * 50 MiB multipart upload, sync, rm, and presigned URLs (SigV4 from awscli, SigV2 from s3cmd).
 *
 * "Defaults" means only what a user must give: the endpoint and the key (awscli: environment
 * and --endpoint-url; rclone: a remote of type s3, provider Other, endpoint and keys; s3cmd:
 * host_base/host_bucket, keys, use_https). Nothing else from this machine reaches the tools
 * (a clean environment: PATH and HOME only). The packages are installed with apt-get by the
 * harness when missing (test/helpers/debian.ts).
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../../helpers/app.ts';
import { ensureDebianTool } from '../../../helpers/debian.ts';
import { type EmbeddedApp, s3Client, startEmbeddedApp } from '../../../helpers/embedded.ts';

const AWS = '/usr/bin/aws';
const RCLONE = '/usr/bin/rclone';
const S3CMD = '/usr/bin/s3cmd';
const MiB = 1024 * 1024;
const BIG = 50 * MiB;
/** Each CLI start takes seconds on a busy two-core machine, and a test runs a dozen. */
const TEST_MS = 300_000;

let env: EmbeddedApp;
let s3: S3Client;
let bucket: string;
let work: string;
let big: string;
let bigSha: string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a tool in `work` with a clean environment (PATH, HOME and `extra` only). */
function run(binary: string, args: string[], opts: { extra?: Record<string, string>; stdinFile?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, {
      cwd: work,
      env: { PATH: '/usr/bin:/bin', HOME: work, LANG: 'C.UTF-8', ...opts.extra },
      stdio: [opts.stdinFile ? fs.openSync(opts.stdinFile, 'r') : 'ignore', 'pipe', 'pipe'],
      timeout: 240_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

async function ok(binary: string, args: string[], opts: { extra?: Record<string, string>; stdinFile?: string } = {}): Promise<string> {
  const r = await run(binary, args, opts);
  if (r.code !== 0) throw new Error(`${path.basename(binary)} ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

const sha256 = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** Keys under `prefix` in the bucket, as the server has them. */
async function keysUnder(prefix: string): Promise<string[]> {
  const out = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (out.Contents ?? []).map((c) => c.Key!.slice(prefix.length)).sort();
}

/** The number of parts of a stored object (0 for a single PUT), from its ETag. */
async function partsOf(key: string): Promise<{ parts: number; size: number }> {
  const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
  return { parts: Number(/-(\d+)"$/.exec(head.ETag ?? '')?.[1] ?? 0), size: head.ContentLength ?? -1 };
}

/** A local tree to sync: three files, one in a sub-directory. */
function syncTree(dir: string): void {
  fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'a.txt'), 'first file\n');
  fs.writeFileSync(path.join(dir, 'b.bin'), randomBytes(20_000));
  fs.writeFileSync(path.join(dir, 'sub', 'c.txt'), 'in a sub-directory\n');
}

function sameTree(a: string, b: string): void {
  const list = (d: string): string[] => (fs.readdirSync(d, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(d, f)).isFile()).sort();
  expect(list(b)).toEqual(list(a));
  for (const f of list(a)) expect(sha256(path.join(b, f)), f).toBe(sha256(path.join(a, f)));
}

beforeAll(async () => {
  await ensureDebianTool(AWS, 'awscli');
  await ensureDebianTool(RCLONE, 'rclone');
  await ensureDebianTool(S3CMD, 's3cmd');
  env = await startEmbeddedApp();
  s3 = s3Client(env.creds);
  bucket = env.mine.bucketName;
  work = tempDir('wharf-clients-');
  big = path.join(work, 'big.bin');
  fs.writeFileSync(big, randomBytes(BIG));
  bigSha = sha256(big);
}, 15 * 60_000);

afterAll(async () => {
  s3?.destroy();
  await env?.app.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('awscli (Debian) with its defaults', () => {
  const aws = (...args: string[]) =>
    ok(AWS, ['--endpoint-url', env.endpoint, '--no-cli-pager', ...args], {
      extra: {
        AWS_ACCESS_KEY_ID: env.creds.accessKey,
        AWS_SECRET_ACCESS_KEY: env.creds.secretKey,
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true',
      },
    });

  it(
    'ls lists the app’s bucket; cp up and down; rm; presign makes a working SigV4 URL',
    async () => {
      expect(await aws('s3', 'ls')).toMatch(new RegExp(` ${bucket}\\n`));
      fs.writeFileSync(path.join(work, 'aws-small.txt'), 'from awscli\n');
      await aws('s3', 'cp', 'aws-small.txt', `s3://${bucket}/aws/small.txt`);
      expect(await aws('s3', 'ls', `s3://${bucket}/aws/`)).toMatch(/ 12 small\.txt\n/);
      await aws('s3', 'cp', `s3://${bucket}/aws/small.txt`, 'aws-small-back.txt');
      expect(fs.readFileSync(path.join(work, 'aws-small-back.txt'), 'utf8')).toBe('from awscli\n');
      const url = (await aws('s3', 'presign', `s3://${bucket}/aws/small.txt`)).trim();
      expect(url).toMatch(/X-Amz-Signature=/);
      expect(await (await fetch(url)).text()).toBe('from awscli\n');
      await aws('s3', 'rm', `s3://${bucket}/aws/small.txt`);
      expect(await keysUnder('aws/')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'a 50 MiB cp is a multipart upload (8 MiB parts: 7), read back whole',
    async () => {
      await aws('s3', 'cp', 'big.bin', `s3://${bucket}/aws/big.bin`);
      expect(await partsOf('aws/big.bin')).toEqual({ parts: 7, size: BIG });
      await aws('s3', 'cp', `s3://${bucket}/aws/big.bin`, 'aws-big-back.bin');
      expect(sha256(path.join(work, 'aws-big-back.bin'))).toBe(bigSha);
      fs.rmSync(path.join(work, 'aws-big-back.bin'));
      await aws('s3', 'rm', `s3://${bucket}/aws/big.bin`);
    },
    TEST_MS,
  );

  it(
    'sync up (new and changed files) and down, then rm --recursive',
    async () => {
      const local = path.join(work, 'aws-tree');
      syncTree(local);
      await aws('s3', 'sync', 'aws-tree', `s3://${bucket}/aws-sync/`);
      expect(await keysUnder('aws-sync/')).toEqual(['a.txt', 'b.bin', 'sub/c.txt']);
      fs.writeFileSync(path.join(local, 'a.txt'), 'changed, and longer than before\n');
      fs.writeFileSync(path.join(local, 'd.txt'), 'new\n');
      await aws('s3', 'sync', 'aws-tree', `s3://${bucket}/aws-sync/`);
      expect(await keysUnder('aws-sync/')).toEqual(['a.txt', 'b.bin', 'd.txt', 'sub/c.txt']);
      await aws('s3', 'sync', `s3://${bucket}/aws-sync/`, 'aws-tree-back');
      sameTree(local, path.join(work, 'aws-tree-back'));
      await aws('s3', 'rm', '--recursive', `s3://${bucket}/aws-sync/`);
      expect(await keysUnder('aws-sync/')).toEqual([]);
    },
    TEST_MS,
  );
});

describe('rclone (Debian) with a default remote', () => {
  const rclone = (...args: string[]) => ok(RCLONE, ['--config', path.join(work, 'rclone.conf'), ...args]);

  beforeAll(() => {
    fs.writeFileSync(
      path.join(work, 'rclone.conf'),
      `[wharf]\ntype = s3\nprovider = Other\naccess_key_id = ${env.creds.accessKey}\nsecret_access_key = ${env.creds.secretKey}\nendpoint = ${env.endpoint}\n`,
    );
  });

  it(
    'lsd lists the app’s bucket; copy up (its CreateBucket is answered BucketAlreadyOwnedByYou) and down; ls; deletefile',
    async () => {
      expect(await rclone('lsd', 'wharf:')).toMatch(new RegExp(` ${bucket}\\n`));
      fs.writeFileSync(path.join(work, 'rc-small.txt'), 'from rclone\n');
      await rclone('copy', 'rc-small.txt', `wharf:${bucket}/rc/`);
      expect(await keysUnder('rc/')).toEqual(['rc-small.txt']);
      expect(await rclone('ls', `wharf:${bucket}/rc/`)).toMatch(/^ +12 rc-small\.txt\n/);
      fs.mkdirSync(path.join(work, 'rc-down'));
      await rclone('copy', `wharf:${bucket}/rc/rc-small.txt`, 'rc-down');
      expect(fs.readFileSync(path.join(work, 'rc-down', 'rc-small.txt'), 'utf8')).toBe('from rclone\n');
      await rclone('deletefile', `wharf:${bucket}/rc/rc-small.txt`);
      expect(await keysUnder('rc/')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'a 50 MiB stream (rcat) is a multipart upload (5 MiB parts: 10), read back whole; a 50 MiB copy too',
    async () => {
      await ok(RCLONE, ['--config', path.join(work, 'rclone.conf'), 'rcat', `wharf:${bucket}/rc/big-stream.bin`], { stdinFile: big });
      expect(await partsOf('rc/big-stream.bin')).toEqual({ parts: 10, size: BIG });
      await rclone('copyto', `wharf:${bucket}/rc/big-stream.bin`, 'rc-big-back.bin');
      expect(sha256(path.join(work, 'rc-big-back.bin'))).toBe(bigSha);
      fs.rmSync(path.join(work, 'rc-big-back.bin'));
      // A file under rclone's default upload_cutoff (200 MiB) goes in one PUT, which it also checks.
      await rclone('copyto', 'big.bin', `wharf:${bucket}/rc/big-copy.bin`);
      expect(await partsOf('rc/big-copy.bin')).toEqual({ parts: 0, size: BIG });
      expect((await rclone('md5sum', `wharf:${bucket}/rc/big-copy.bin`)).split(' ')[0]).toBe(createHash('md5').update(fs.readFileSync(big)).digest('hex'));
      await rclone('delete', `wharf:${bucket}/rc/`);
      expect(await keysUnder('rc/')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'sync up (also deleting what is gone locally) and down, then delete',
    async () => {
      const local = path.join(work, 'rc-tree');
      syncTree(local);
      await rclone('sync', 'rc-tree', `wharf:${bucket}/rc-sync`);
      expect(await keysUnder('rc-sync/')).toEqual(['a.txt', 'b.bin', 'sub/c.txt']);
      fs.writeFileSync(path.join(local, 'a.txt'), 'changed, and longer than before\n');
      fs.rmSync(path.join(local, 'b.bin'));
      await rclone('sync', 'rc-tree', `wharf:${bucket}/rc-sync`);
      expect(await keysUnder('rc-sync/')).toEqual(['a.txt', 'sub/c.txt']);
      await rclone('sync', `wharf:${bucket}/rc-sync`, 'rc-tree-back');
      sameTree(local, path.join(work, 'rc-tree-back'));
      await rclone('delete', `wharf:${bucket}/rc-sync`);
      expect(await keysUnder('rc-sync/')).toEqual([]);
    },
    TEST_MS,
  );
});

describe('s3cmd (Debian) with host_base and host_bucket', () => {
  const config = (extra = '') =>
    `[default]\naccess_key = ${env.creds.accessKey}\nsecret_key = ${env.creds.secretKey}\nhost_base = ${env.creds.endPoint}:${env.creds.port}\nhost_bucket = ${env.creds.endPoint}:${env.creds.port}\nuse_https = False\n${extra}`;
  const s3cmd = (...args: string[]) => ok(S3CMD, ['-c', path.join(work, 's3cfg'), ...args]);

  beforeAll(() => {
    fs.writeFileSync(path.join(work, 's3cfg'), config());
    fs.writeFileSync(path.join(work, 's3cfg-v2'), config('signature_v2 = True\n'));
  });

  it(
    'ls lists the app’s bucket; put and get; signurl makes a working SigV2 URL; del',
    async () => {
      expect(await s3cmd('ls')).toMatch(new RegExp(`  s3://${bucket}\\n`));
      fs.writeFileSync(path.join(work, 's3cmd-small.txt'), 'from s3cmd\n');
      await s3cmd('put', 's3cmd-small.txt', `s3://${bucket}/s3cmd/small.txt`);
      expect(await s3cmd('ls', `s3://${bucket}/s3cmd/`)).toMatch(/ 11 +s3:\/\/.*\/s3cmd\/small\.txt\n/);
      await s3cmd('get', `s3://${bucket}/s3cmd/small.txt`, 's3cmd-small-back.txt');
      expect(fs.readFileSync(path.join(work, 's3cmd-small-back.txt'), 'utf8')).toBe('from s3cmd\n');
      const url = (await s3cmd('signurl', `s3://${bucket}/s3cmd/small.txt`, '+600')).trim();
      expect(url).toMatch(/[?&]AWSAccessKeyId=.*&Signature=/);
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('from s3cmd\n');
      await s3cmd('del', `s3://${bucket}/s3cmd/small.txt`);
      expect(await keysUnder('s3cmd/')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'a 50 MiB put is a multipart upload (15 MiB parts: 4), read back whole',
    async () => {
      await s3cmd('put', 'big.bin', `s3://${bucket}/s3cmd/big.bin`);
      expect(await partsOf('s3cmd/big.bin')).toEqual({ parts: 4, size: BIG });
      await s3cmd('get', `s3://${bucket}/s3cmd/big.bin`, 's3cmd-big-back.bin');
      expect(sha256(path.join(work, 's3cmd-big-back.bin'))).toBe(bigSha);
      fs.rmSync(path.join(work, 's3cmd-big-back.bin'));
      await s3cmd('del', `s3://${bucket}/s3cmd/big.bin`);
    },
    TEST_MS,
  );

  it(
    'sync up (new and changed files) and down, then del --recursive',
    async () => {
      const local = path.join(work, 's3cmd-tree');
      syncTree(local);
      await s3cmd('sync', 's3cmd-tree/', `s3://${bucket}/s3cmd-sync/`);
      expect(await keysUnder('s3cmd-sync/')).toEqual(['a.txt', 'b.bin', 'sub/c.txt']);
      fs.writeFileSync(path.join(local, 'a.txt'), 'changed, and longer than before\n');
      fs.writeFileSync(path.join(local, 'd.txt'), 'new\n');
      await s3cmd('sync', 's3cmd-tree/', `s3://${bucket}/s3cmd-sync/`);
      expect(await keysUnder('s3cmd-sync/')).toEqual(['a.txt', 'b.bin', 'd.txt', 'sub/c.txt']);
      fs.mkdirSync(path.join(work, 's3cmd-tree-back'));
      await s3cmd('sync', `s3://${bucket}/s3cmd-sync/`, 's3cmd-tree-back/');
      sameTree(local, path.join(work, 's3cmd-tree-back'));
      await s3cmd('del', '--recursive', '--force', `s3://${bucket}/s3cmd-sync/`);
      expect(await keysUnder('s3cmd-sync/')).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'with signature_v2 = True: ls, put, get and del are signed with SigV2 and work',
    async () => {
      const v2 = (...args: string[]) => ok(S3CMD, ['-c', path.join(work, 's3cfg-v2'), '--debug', ...args]);
      const listed = await run(S3CMD, ['-c', path.join(work, 's3cfg-v2'), '--debug', 'ls']);
      expect(listed.code).toBe(0);
      // s3cmd says which signature it used.
      expect(listed.stderr).toMatch(/Using signature v2/);
      expect(listed.stdout).toMatch(new RegExp(`  s3://${bucket}\\n`));
      fs.writeFileSync(path.join(work, 'v2.txt'), 'signed with v2\n');
      await v2('put', 'v2.txt', `s3://${bucket}/s3cmd-v2/v2.txt`);
      await v2('get', `s3://${bucket}/s3cmd-v2/v2.txt`, 'v2-back.txt');
      expect(fs.readFileSync(path.join(work, 'v2-back.txt'), 'utf8')).toBe('signed with v2\n');
      await v2('del', `s3://${bucket}/s3cmd-v2/v2.txt`);
      expect(await keysUnder('s3cmd-v2/')).toEqual([]);
    },
    TEST_MS,
  );
});
