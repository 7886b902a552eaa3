/**
 * Disk full: the embedded store's objects directory on a 2 MiB tmpfs (mounted here, as root), a
 * PUT larger than what is left fails with ENOSPC while its bytes are written. The answer is 507,
 * no object (and no temporary file) is left, an object it would have replaced is intact, and the
 * space is free again for the next write.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeSha256 } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { startApp, tempDir, type TestApp } from '../../../helpers/app.ts';
import { signIn } from '../../../helpers/identity.ts';
import { createApp, createToken } from '../../../helpers/storage.ts';

let mount: string | undefined;
let app: TestApp | undefined;
let bucket: string;
let creds: { endPoint: string; port: number; accessKey: string; secretKey: string };
let signer: SignatureV4;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs: run it as root');
  const dir = tempDir('wharf-full-');
  // A tiny file system of its own: only this test's objects and index fill it.
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', dir]);
  mount = dir;
  app = await startApp(`[plugins.identity]\nscrypt_cost = 1024\n[plugins.storage.fs]\nobjects_dir = "${dir}"\n`);
  const owner = await signIn(app);
  const created = await createApp(app, owner, 'full');
  bucket = created.bucketName;
  creds = (await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, created.id) } })).body.storage;
  signer = new SignatureV4({
    credentials: { accessKeyId: creds.accessKey, secretAccessKey: creds.secretKey },
    region: 'us-east-1',
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
  });
});

afterAll(async () => {
  await app?.close();
  if (mount) {
    execFileSync('umount', [mount]);
    fs.rmSync(mount, { recursive: true, force: true });
  }
});

/** A signed request (UNSIGNED-PAYLOAD); resolves on the response even if the server cuts the upload short. */
async function request(method: 'PUT' | 'GET' | 'HEAD', key: string, body?: Buffer): Promise<{ status: number; text: string; bytes: Buffer }> {
  const p = `/${bucket}/${key}`;
  const headers: Record<string, string> = { host: `${creds.endPoint}:${creds.port}`, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' };
  if (body) headers['content-length'] = String(body.length);
  const signed = await signer.sign({ method, protocol: 'http:', hostname: creds.endPoint, port: creds.port, path: p, query: {}, headers });
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request({ host: creds.endPoint, port: creds.port, method, path: p, headers: signed.headers as Record<string, string> }, (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString('utf8'), bytes: Buffer.concat(parts) }));
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.end(body);
  });
}

const tmpFiles = () => fs.readdirSync(path.join(mount!, '.wharf/tmp'));
const blobFiles = () =>
  fs
    .readdirSync(path.join(mount!, bucket), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name);

describe('a PUT that fills the disk', () => {
  it('answers 507, leaves no partial object and no temporary file; what it would replace is intact', async () => {
    const kept = randomBytes(100_000);
    expect((await request('PUT', 'kept.bin', kept)).status).toBe(200);
    expect(blobFiles()).toHaveLength(1);

    // 3 MiB onto a 2 MiB file system: ENOSPC part-way through writing the bytes.
    for (const key of ['new.bin', 'kept.bin']) {
      const res = await request('PUT', key, randomBytes(3 * 1024 * 1024));
      expect(res.status, key).toBe(507);
      expect(res.text).toMatch(/<Code>XWharfStorageFull<\/Code>/);
      expect(tmpFiles()).toEqual([]);
    }
    expect((await request('HEAD', 'new.bin')).status).toBe(404);
    const back = await request('GET', 'kept.bin');
    expect(back.status).toBe(200);
    expect(back.bytes.equals(kept)).toBe(true);
    expect(blobFiles()).toHaveLength(1);

    // The failed writes gave their space back: a write that fits succeeds.
    const after = randomBytes(500_000);
    expect((await request('PUT', 'after.bin', after)).status).toBe(200);
    expect((await request('GET', 'after.bin')).bytes.equals(after)).toBe(true);
  });
});
