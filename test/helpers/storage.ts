/** File storage in tests: an app wired to the test S3 server, and the upload round trip. */
import { randomBytes } from 'node:crypto';
import { DeleteBucketCommand, DeleteObjectsCommand, ListBucketsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import fs from 'node:fs';
import path from 'node:path';
import { startApp, tempDir, type TestApp } from './app.ts';
import { freePort } from './cli.ts';
import type { SignedIn } from './identity.ts';
import type { S3Target } from './s3.ts';

/** A bucket prefix unique to one test file, so concurrent runs on the shared store never meet. */
export function uniquePrefix(tag: string): string {
  return `wt-${tag}-${randomBytes(3).toString('hex')}-`;
}

export interface StorageAppOptions {
  prefix: string;
  /** Extra lines for [plugins.storage]. */
  storage?: string;
  /** Extra lines for [plugins.storage.s3]. */
  s3?: string;
  /** Overrides the target's endpoint (a closed port, say). */
  endpoint?: string;
  dataDir?: string;
  /** Extra TOML after the storage sections (other plugins' settings). */
  toml?: string;
}

export function storageToml(target: S3Target, options: StorageAppOptions): string {
  // The embedded store: the app's own `fs` driver over the target's objects directory (a
  // closed-port `endpoint` still means an s3 driver that cannot reach its store).
  const embedded = target.embedded && options.endpoint === undefined;
  return [
    '[plugins.identity]',
    'scrypt_cost = 1024',
    '[plugins.storage]',
    `bucket_prefix = "${options.prefix}"`,
    ...(embedded ? ['driver = "fs"'] : []),
    options.storage ?? '',
    ...(embedded
      ? [
          '[plugins.storage.fs]',
          `objects_dir = "${target.embedded!.objectsDir}"`,
          `public_url = "${target.endpoint}"`,
          `root_access_key = "${target.accessKeyId}"`,
          `root_secret_key = "${target.secretAccessKey}"`,
        ]
      : []),
    '[plugins.storage.s3]',
    `endpoint = "${options.endpoint ?? target.endpoint}"`,
    `region = "${target.region}"`,
    `access_key = "${target.accessKeyId}"`,
    `secret_key = "${target.secretAccessKey}"`,
    'max_attempts = 2',
    'connect_timeout_ms = 2000',
    options.s3 ?? '',
    options.toml ?? '',
  ].join('\n');
}

export function startStorageApp(target: S3Target, options: StorageAppOptions): Promise<TestApp> {
  let dataDir = options.dataDir;
  if (target.embedded) {
    // The data-dir secret of the embedded target, so its endpoint knows this server's keys.
    dataDir ??= tempDir();
    fs.mkdirSync(path.join(dataDir, 'keys'), { recursive: true, mode: 0o700 });
    const secret = path.join(dataDir, 'keys', 'secret.key');
    if (!fs.existsSync(secret)) fs.copyFileSync(path.join(target.embedded.dataDir, 'keys', 'secret.key'), secret);
  }
  return startApp(storageToml(target, options), dataDir ? { dataDir } : {});
}

/** A loopback port nothing listens on. */
export const closedPort = freePort;

export interface LocalFile {
  name: string;
  type: string;
  body: Buffer;
}

export function localFile(name: string, size = 16, type = 'application/octet-stream'): LocalFile {
  return { name, type, body: randomBytes(size) };
}

/** Phase 1 for `files`; returns the status and body. */
export function requestUploads(app: TestApp, who: SignedIn, appId: string, files: LocalFile[], prefix?: string) {
  return app.request('POST', '/api/files/upload', {
    headers: who.headers,
    body: { appId, ...(prefix === undefined ? {} : { prefix }), files: files.map((f) => ({ name: f.name, size: f.body.length, type: f.type })) },
  });
}

/** PUTs a file's bytes to a presigned URL with plain fetch. */
export function putTo(url: string, file: LocalFile): Promise<Response> {
  return fetch(url, { method: 'PUT', headers: { 'content-type': file.type }, body: file.body });
}

/** Phase 1, the PUTs, phase 2: the recorded files. */
export async function uploadFiles(app: TestApp, who: SignedIn, appId: string, files: LocalFile[], prefix?: string): Promise<any[]> {
  const phase1 = await requestUploads(app, who, appId, files, prefix);
  if (phase1.status !== 200) throw new Error(`phase 1: ${phase1.status} ${phase1.text}`);
  const uploads = phase1.body.uploads as { key: string; name: string; size: number; type: string; presignedUrl: string }[];
  for (const [i, u] of uploads.entries()) {
    const put = await putTo(u.presignedUrl, files[i]!);
    if (put.status !== 200) throw new Error(`PUT ${u.key}: ${put.status} ${await put.text()}`);
  }
  const done = await app.request('POST', '/api/files/upload', {
    headers: who.headers,
    body: { appId, action: 'complete', files: uploads.map(({ key, name, size, type }) => ({ key, name, size, type })) },
  });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${done.text}`);
  return done.body.files;
}

/** Creates an app; returns its body. */
export async function createApp(app: TestApp, who: SignedIn, name = 'app', storageLimit?: number | null): Promise<any> {
  const res = await app.request('POST', '/api/apps', { headers: who.headers, body: { name, ...(storageLimit === undefined ? {} : { storageLimit }) } });
  if (res.status !== 201) throw new Error(`create app: ${res.status} ${res.text}`);
  return res.body;
}

/** Creates an API token for an app; returns the raw token. */
export async function createToken(app: TestApp, who: SignedIn, appId: string, name = 'token'): Promise<string> {
  const res = await app.request('POST', '/api/tokens', { headers: who.headers, body: { appId, name } });
  if (res.status !== 201) throw new Error(`create token: ${res.status} ${res.text}`);
  return res.body.token;
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** Buckets on the store whose names start with `prefix`. */
export async function bucketsWithPrefix(s3: S3Client, prefix: string): Promise<string[]> {
  const out = await s3.send(new ListBucketsCommand({}));
  return (out.Buckets ?? []).map((b) => b.Name!).filter((n) => n.startsWith(prefix));
}

/** Removes every bucket (and its objects) whose name starts with `prefix`: test clean-up. */
export async function removeBuckets(s3: S3Client, prefix: string): Promise<void> {
  for (const bucket of await bucketsWithPrefix(s3, prefix)) {
    for (;;) {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (!keys.length) break;
      await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
    }
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
  }
}

/** The end of a storage test file: the app closed, then every bucket its run created removed. */
export async function closeStorageApp(app: TestApp | undefined, s3: S3Client | undefined, prefix: string): Promise<void> {
  await app?.close();
  if (s3) {
    await removeBuckets(s3, prefix);
    s3.destroy();
  }
}
