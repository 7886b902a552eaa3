/**
 * The embedded object store through Debian's awscli (botocore, not the JS SDK), with the
 * credentials POST /api/tokens/validate returns: put, get, list, delete, a multipart upload
 * (`aws s3 cp` splitting a 12 MiB file into 5 MiB parts), and another app's bucket refused.
 * The package is installed by the harness when missing (test/helpers/debian.ts). `aws` on PATH
 * may be something else (a pyenv shim): Debian's is /usr/bin/aws.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, tempDir, type TestApp } from '../../../helpers/app.ts';
import { ensureDebianTool } from '../../../helpers/debian.ts';
import { signIn } from '../../../helpers/identity.ts';
import { createApp, createToken } from '../../../helpers/storage.ts';

const AWS = '/usr/bin/aws';
/** Each `aws` run starts a Python interpreter (2-3 s on a busy two-core machine): room for ten. */
const CLI_TEST_MS = 120_000;

let app: TestApp;
let work: string;
let mine: any;
let other: any;
let creds: { endPoint: string; port: number; useSSL: boolean; accessKey: string; secretKey: string };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs Debian's aws against the embedded endpoint with the validated credentials only. */
function aws(...args: string[]): Promise<Run> {
  const endpoint = `${creds.useSSL ? 'https' : 'http'}://${creds.endPoint}:${creds.port}`;
  return new Promise((resolve) => {
    execFile(
      AWS,
      ['--endpoint-url', endpoint, '--no-cli-pager', ...args],
      {
        cwd: work,
        timeout: 120_000,
        maxBuffer: 64 * 1024 * 1024,
        // Nothing from this machine's own AWS set-up: only the app's key and our config file.
        env: {
          PATH: '/usr/bin:/bin',
          HOME: work,
          AWS_CONFIG_FILE: path.join(work, 'config'),
          AWS_SHARED_CREDENTIALS_FILE: path.join(work, 'no-credentials'),
          AWS_ACCESS_KEY_ID: creds.accessKey,
          AWS_SECRET_ACCESS_KEY: creds.secretKey,
          AWS_DEFAULT_REGION: 'us-east-1',
          AWS_EC2_METADATA_DISABLED: 'true',
        },
      },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
    );
  });
}

async function ok(...args: string[]): Promise<string> {
  const r = await aws(...args);
  if (r.code !== 0) throw new Error(`aws ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

beforeAll(async () => {
  await ensureDebianTool(AWS, 'awscli');
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
  const owner = await signIn(app);
  mine = await createApp(app, owner, 'cli');
  other = await createApp(app, owner, 'cli-other');
  const res = await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, mine.id) } });
  expect(res.status).toBe(200);
  creds = res.body.storage;
  work = tempDir('wharf-awscli-');
  // Path-style requests; multipart from 5 MiB up, in 5 MiB parts (S3's minimum part size).
  fs.writeFileSync(
    path.join(work, 'config'),
    '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n',
  );
}, 15 * 60_000);

afterAll(async () => {
  await app?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('awscli (Debian) with the validated credentials', () => {
  it(
    'is the Debian package, not a shim',
    async () => {
      expect(fs.realpathSync(AWS).startsWith('/usr/')).toBe(true);
      expect(await ok('--version')).toMatch(/^aws-cli\/2\./);
    },
    CLI_TEST_MS,
  );

  it(
    'put, get, list, delete',
    async () => {
      const body = randomBytes(70_000);
      fs.writeFileSync(path.join(work, 'small.bin'), body);
      await ok(
        's3api',
        'put-object',
        '--bucket',
        mine.bucketName,
        '--key',
        'cli/small.bin',
        '--body',
        'small.bin',
        '--content-type',
        'application/x-cli',
        '--metadata',
        'colour=green',
      );
      await ok('s3', 'cp', 'small.bin', `s3://${mine.bucketName}/cli/dir/second.bin`);

      const head = JSON.parse(await ok('s3api', 'head-object', '--bucket', mine.bucketName, '--key', 'cli/small.bin', '--output', 'json'));
      expect(head).toMatchObject({
        ContentLength: body.length,
        ContentType: 'application/x-cli',
        Metadata: { colour: 'green' },
        ETag: `"${createHash('md5').update(body).digest('hex')}"`,
      });
      await ok('s3', 'cp', `s3://${mine.bucketName}/cli/small.bin`, 'back.bin');
      expect(fs.readFileSync(path.join(work, 'back.bin')).equals(body)).toBe(true);

      const listed = JSON.parse(await ok('s3api', 'list-objects-v2', '--bucket', mine.bucketName, '--prefix', 'cli/', '--delimiter', '/', '--output', 'json'));
      expect(listed.Contents.map((c: any) => [c.Key, c.Size])).toEqual([['cli/small.bin', body.length]]);
      expect(listed.CommonPrefixes).toEqual([{ Prefix: 'cli/dir/' }]);
      // `aws s3 ls --recursive` pages through ListObjectsV2 itself.
      const ls = await ok('s3', 'ls', '--recursive', `s3://${mine.bucketName}/cli/`);
      expect(ls).toMatch(/ 70000 cli\/dir\/second\.bin\n/);
      expect(ls).toMatch(/ 70000 cli\/small\.bin\n/);

      await ok('s3api', 'delete-object', '--bucket', mine.bucketName, '--key', 'cli/small.bin');
      await ok('s3', 'rm', `s3://${mine.bucketName}/cli/dir/second.bin`);
      const empty = JSON.parse((await ok('s3api', 'list-objects-v2', '--bucket', mine.bucketName, '--output', 'json')) || '{}');
      expect(empty.KeyCount ?? 0).toBe(0);
      const gone = await aws('s3api', 'head-object', '--bucket', mine.bucketName, '--key', 'cli/small.bin');
      expect(gone.code).not.toBe(0);
      expect(gone.stderr).toMatch(/404|Not Found/);
    },
    CLI_TEST_MS,
  );

  it(
    'multipart: `aws s3 cp` of 12 MiB in 5 MiB parts, read back whole',
    async () => {
      const body = randomBytes(12 * 1024 * 1024);
      fs.writeFileSync(path.join(work, 'big.bin'), body);
      await ok('s3', 'cp', 'big.bin', `s3://${mine.bucketName}/big.bin`);
      const head = JSON.parse(await ok('s3api', 'head-object', '--bucket', mine.bucketName, '--key', 'big.bin', '--output', 'json'));
      // 5 + 5 + 2 MiB: a three-part upload's ETag.
      expect(head.ETag).toMatch(/^"[0-9a-f]{32}-3"$/);
      expect(head.ContentLength).toBe(body.length);
      await ok('s3', 'cp', `s3://${mine.bucketName}/big.bin`, 'big-back.bin');
      expect(
        createHash('sha256')
          .update(fs.readFileSync(path.join(work, 'big-back.bin')))
          .digest('hex'),
      ).toBe(createHash('sha256').update(body).digest('hex'));
      const uploads = JSON.parse((await ok('s3api', 'list-multipart-uploads', '--bucket', mine.bucketName, '--output', 'json')) || '{}');
      expect(uploads.Uploads ?? []).toEqual([]);
      await ok('s3', 'rm', `s3://${mine.bucketName}/big.bin`);
    },
    CLI_TEST_MS,
  );

  it(
    "another app's bucket: AccessDenied, and nothing written there",
    async () => {
      fs.writeFileSync(path.join(work, 'x.txt'), 'x');
      for (const args of [
        ['s3api', 'put-object', '--bucket', other.bucketName, '--key', 'x.txt', '--body', 'x.txt'],
        ['s3api', 'list-objects-v2', '--bucket', other.bucketName],
        ['s3', 'ls', `s3://${other.bucketName}/`],
      ]) {
        const r = await aws(...args);
        expect(r.code, args.join(' ')).not.toBe(0);
        expect(r.stderr, args.join(' ')).toMatch(/AccessDenied/);
      }
      expect(fs.readdirSync(path.join(app.dataDir, 'objects', other.bucketName))).toEqual([]);
    },
    CLI_TEST_MS,
  );
});
