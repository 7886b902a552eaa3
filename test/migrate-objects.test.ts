/**
 * `wharf migrate-objects`: the README's scale-out move, with real parts. An instance on SQLite and
 * its embedded store gets two apps and files (a multipart one over 5 MiB, one with a unicode name
 * and metadata, an empty one); migrate-objects runs once while it still serves (a pre-copy),
 * the target is then left as an interrupted run leaves it (an object missing, one with other
 * bytes, an unfinished multipart upload); the instance stops, migrate-data moves it to a fresh
 * PostgreSQL and migrate-objects finishes the copy into Ceph RGW; a second run copies nothing;
 * `wharf serve` on PostgreSQL and the s3 driver then lists, searches, downloads and deletes
 * every moved file. Bad inputs are refused in one line.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { multipartEtag, ObjectStore } from '../plugins/storage/drivers/fs/objects.ts';
import { tempDir } from './helpers/app.ts';
import { cleanEnv, root, serve, type Served, wharf, wharfAsync } from './helpers/cli.ts';
import { freshDatabase, postgresPlugins } from './helpers/postgres.ts';
import { ensureS3, s3Client, type S3Target } from './helpers/s3.ts';
import { overHttp, setupOwner } from './helpers/served.ts';
import { storageToml, uniquePrefix } from './helpers/storage.ts';

const onlyPorted = Object.fromEntries(postgresPlugins().not.map((name) => [`WHARF_PLUGINS__${name.toUpperCase()}__ENABLED`, 'false']));
const PUBLIC_URL = { WHARF_SERVER__PUBLIC_URL: 'http://wharf.test' };
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

interface Moved {
  app: string;
  bucket: string;
  token: string;
  key: string;
  name: string;
  body: Buffer;
  type: string;
}

describe('wharf migrate-objects: the embedded store into an S3 store', () => {
  let target: S3Target;
  let ceph: S3Client;
  let dataDir: string;
  let server: Served | undefined;
  const buckets: string[] = [];

  beforeAll(async () => {
    target = await ensureS3();
    ceph = s3Client(target);
    dataDir = path.join(tempDir('wharf-migrate-objects-'), 'data');
  });
  afterAll(async () => {
    await server?.stop();
    for (const bucket of buckets) {
      const listed = await ceph.send(new ListObjectsV2Command({ Bucket: bucket })).catch(() => undefined);
      const keys = (listed?.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length) await ceph.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
      for (const u of (await ceph.send(new ListMultipartUploadsCommand({ Bucket: bucket })).catch(() => undefined))?.Uploads ?? []) {
        await ceph.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key!, UploadId: u.UploadId! })).catch(() => undefined);
      }
      await ceph.send(new DeleteBucketCommand({ Bucket: bucket })).catch(() => undefined);
    }
    ceph.destroy();
  });

  it('copies every bucket and object with its type and metadata, resumes, skips on a second run; serve on PostgreSQL + s3 serves every file', async () => {
    // The old instance: SQLite, the embedded store, buckets named with a prefix of this test's.
    const oldPrefix = uniquePrefix('mo');
    const oldEnv = { ...onlyPorted, ...PUBLIC_URL, WHARF_PLUGINS__STORAGE__BUCKET_PREFIX: oldPrefix };
    server = await serve(['--data-dir', dataDir], { env: oldEnv });
    const api = overHttp(server.url);
    const owner = await setupOwner(server, 'Movers');
    const moved: Moved[] = [];
    const filesDir = tempDir('wharf-migrate-objects-files-');
    for (const appName of ['Photos', 'Docs']) {
      const app = await api.request('POST', '/api/apps', { headers: owner.headers, body: { name: appName } });
      expect(app.status, app.text).toBe(201);
      buckets.push(app.body.bucketName);
      const token = (await api.request('POST', '/api/tokens', { headers: owner.headers, body: { appId: app.body.id, name: 'ci' } })).body.token as string;
      // Uploaded with the command-line client (presigned PUTs): one of them empty.
      const contents: Record<string, Buffer> =
        appName === 'Photos'
          ? { 'résumé café ☕.txt': Buffer.from('unicode name, and metadata below\n'), 'empty.txt': Buffer.alloc(0), 'notes.txt': Buffer.from('notes\n') }
          : { 'report.pdf': Buffer.from('%PDF-1.7 a report'), 'data.csv': Buffer.from('a,b\n1,2\n') };
      const dir = path.join(filesDir, appName);
      fs.mkdirSync(dir);
      for (const [name, body] of Object.entries(contents)) fs.writeFileSync(path.join(dir, name), body);
      const up = await wharfAsync(['files', 'upload', ...Object.keys(contents), '--token', token, '--instance', server.url, '--json'], {
        cwd: dir,
        env: oldEnv,
      });
      expect(up.status, up.stderr).toBe(0);
      for (const f of JSON.parse(up.stdout).files as { key: string; name: string; type: string }[]) {
        moved.push({ app: app.body.id, bucket: app.body.bucketName, token, key: f.key, name: f.name, body: contents[f.name]!, type: f.type });
      }
    }
    const photos = moved.find((f) => f.name.startsWith('résumé'))!;
    // The app's own S3 key on the embedded endpoint: metadata on the unicode file (CopyObject
    // onto itself, REPLACE) and a multipart object of 6 MiB + 123 bytes, recorded with the token.
    const validated = (await api.request('POST', '/api/tokens/validate', { body: { token: photos.token } })).body;
    const embedded = new S3Client({
      endpoint: `http://${validated.storage.endPoint}:${validated.storage.port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: validated.storage.accessKey, secretAccessKey: validated.storage.secretKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    const metadata = { 'original-name': encodeURIComponent('résumé café ☕.txt'), owner: 'team-a' };
    await embedded.send(
      new CopyObjectCommand({
        Bucket: photos.bucket,
        Key: photos.key,
        CopySource: `${photos.bucket}/${encodeURIComponent(photos.key)}`,
        MetadataDirective: 'REPLACE',
        ContentType: 'text/plain; charset=utf-8',
        Metadata: metadata,
        CacheControl: 'max-age=60',
        ContentDisposition: `attachment; filename*=UTF-8''${encodeURIComponent(photos.name)}`,
      }),
    );
    photos.type = 'text/plain; charset=utf-8';
    const big = randomBytes(6 * 1024 * 1024 + 123);
    const bigKey = 'videos/big.bin';
    const mp = await embedded.send(new CreateMultipartUploadCommand({ Bucket: photos.bucket, Key: bigKey, ContentType: 'video/mp4' }));
    const parts = [big.subarray(0, 5 * 1024 * 1024), big.subarray(5 * 1024 * 1024)];
    const etags: string[] = [];
    for (const [i, part] of parts.entries()) {
      etags.push(
        (await embedded.send(new UploadPartCommand({ Bucket: photos.bucket, Key: bigKey, UploadId: mp.UploadId, PartNumber: i + 1, Body: part }))).ETag!,
      );
    }
    await embedded.send(
      new CompleteMultipartUploadCommand({
        Bucket: photos.bucket,
        Key: bigKey,
        UploadId: mp.UploadId,
        MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
      }),
    );
    const bigEtag = (await embedded.send(new HeadObjectCommand({ Bucket: photos.bucket, Key: bigKey }))).ETag!;
    expect(bigEtag).toMatch(/-2"$/);
    embedded.destroy();
    const recorded = await api.request('POST', '/api/files', {
      body: { token: photos.token, files: [{ key: bigKey, name: 'big.bin', size: big.length, type: 'video/mp4' }] },
    });
    expect(recorded.status, recorded.text).toBe(200);
    moved.push({ ...photos, key: bigKey, name: 'big.bin', body: big, type: 'video/mp4' });
    expect(moved).toHaveLength(6);

    // The config of the new instances: PostgreSQL, the s3 driver on Ceph, another bucket prefix.
    const database = await freshDatabase();
    const configFile = path.join(filesDir, 'new.toml');
    fs.writeFileSync(
      configFile,
      `[database]\nurl = "${database}"\n[plugins.rate_limit]\nsingle_instance = true\n${storageToml(target, { prefix: uniquePrefix('new'), storage: 'driver = "s3"' })}\n`,
    );
    const migrateObjects = (args: string[] = []) =>
      wharfAsync(['migrate-objects', '--config', configFile, '--data-dir', dataDir, ...args], { env: onlyPorted });

    // A first pass while the old server still runs: it copies (read-only) and says the server runs.
    const early = await migrateObjects();
    expect(early.stderr, early.stdout).toBe('');
    expect(early.status).toBe(0);
    expect(early.stdout).toMatch(/: 2 buckets, 6 objects: 6 copied \(6\.0 MiB\), 0 skipped \(already there, same size and ETag\), 0 failed, in \d+\.\d s\n/);
    expect(early.stdout).toContain(`a server still runs on this data dir (pid ${server.child.pid})`);
    // The new database has no tables yet (migrate-data comes once the server stops): records not checked.
    expect(early.stdout).toContain('file records not checked: the database of this config has no storage tables yet');

    // The target as an interrupted run leaves it: one object missing, one with other bytes, an unfinished multipart upload of the big key.
    const notes = moved.find((f) => f.name === 'notes.txt')!;
    const report = moved.find((f) => f.name === 'report.pdf')!;
    await ceph.send(new DeleteObjectCommand({ Bucket: notes.bucket, Key: notes.key }));
    await ceph.send(new PutObjectCommand({ Bucket: report.bucket, Key: report.key, Body: 'half a report', ContentType: 'application/pdf' }));
    await ceph.send(new DeleteObjectCommand({ Bucket: photos.bucket, Key: bigKey }));
    await ceph.send(new CreateMultipartUploadCommand({ Bucket: photos.bucket, Key: bigKey }));

    expect(await server.stop()).toBe(0);
    server = undefined;
    const data = await wharfAsync(['migrate-data', '--data-dir', dataDir, '--to', database], { env: onlyPorted });
    expect(data.status, data.stderr).toBe(0);

    const run = await migrateObjects(['--json']);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result).toMatchObject({
      source: path.join(dataDir, 'objects'),
      target: target.endpoint,
      objects: 6,
      copied: 3,
      skipped: 3,
      failed: 0,
      vanished: 0,
      bytes: notes.body.length + report.body.length + big.length,
      failures: [],
      interrupted: false,
      // Every record of the moved database has its object in Ceph.
      records: { checked: true, apps: 2, files: 6, missing: [] },
    });
    expect(result.serverRunning).toBeUndefined();
    expect(result.buckets.map((b: { bucket: string }) => b.bucket).sort()).toEqual([...buckets].sort());
    // The unfinished upload an interrupted run left is gone.
    expect((await ceph.send(new ListMultipartUploadsCommand({ Bucket: photos.bucket }))).Uploads ?? []).toEqual([]);
    // Every object in Ceph: its bytes, its type, the metadata and headers it had; the big one with its multipart ETag.
    for (const f of moved) {
      const head = await ceph.send(new HeadObjectCommand({ Bucket: f.bucket, Key: f.key }));
      expect(head.ContentLength, f.name).toBe(f.body.length);
      expect(head.ContentType, f.name).toBe(f.type);
      expect(head.ETag, f.name).toBe(f.key === bigKey ? bigEtag : `"${md5(f.body)}"`);
    }
    const photoHead = await ceph.send(new HeadObjectCommand({ Bucket: photos.bucket, Key: photos.key }));
    expect(photoHead.Metadata).toEqual(metadata);
    expect(photoHead.CacheControl).toBe('max-age=60');
    expect(photoHead.ContentDisposition).toBe(`attachment; filename*=UTF-8''${encodeURIComponent(photos.name)}`);

    // A second run copies nothing.
    const again = await migrateObjects(['--json']);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ objects: 6, copied: 0, skipped: 6, failed: 0, bytes: 0 });
    const text = await migrateObjects();
    expect(text.stdout).toContain('file records: 6 files of 2 apps in the database, every one with its object in the S3 store\n');
    // A record whose object is nowhere: named, exit 1.
    const pgClient = new pg.Client({ connectionString: database });
    await pgClient.connect();
    await pgClient.query(
      "INSERT INTO storage_files (id, app_id, key, name, size, type, uploaded_at) VALUES ('f-ghost', $1, 'ghost/key.txt', 'key.txt', 1, 'text/plain', '2026-01-01T00:00:00.000Z')",
      [report.app],
    );
    const ghost = await migrateObjects(['--json']);
    expect(ghost.status).toBe(1);
    expect(ghost.stderr).toBe(
      'wharf: 1 file record of the database has no object in the S3 store (listed in records.missing): the new instances cannot serve it\n',
    );
    expect(JSON.parse(ghost.stdout).records.missing).toEqual([{ bucket: report.bucket, key: 'ghost/key.txt' }]);
    await pgClient.query("DELETE FROM storage_files WHERE id = 'f-ghost'");
    await pgClient.end();

    // The new instance: PostgreSQL, the s3 driver, the same keys.
    server = await serve(['--config', configFile, '--data-dir', dataDir], { env: { ...onlyPorted, ...PUBLIC_URL } });
    const served = overHttp(server.url);
    const headers = { ...owner.headers, origin: server.url };
    for (const token of new Set(moved.map((f) => f.token))) {
      const mine = moved.filter((f) => f.token === token);
      const list = await served.request('GET', '/api/files?pageSize=100', { headers: { authorization: `Bearer ${token}` } });
      expect(list.status, list.text).toBe(200);
      const files = list.body.files as { id: string; key: string; name: string; size: number }[];
      expect(files.map((f) => [f.name, f.size]).sort()).toEqual(mine.map((f) => [f.name, f.body.length]).sort());
      for (const f of files) {
        const download = await served.request('GET', `/api/files/download?fileId=${f.id}`, { headers });
        expect(download.status, download.text).toBe(200);
        const got = await fetch(download.body.url);
        expect(got.status, f.name).toBe(200);
        expect(Buffer.from(await got.arrayBuffer()).equals(mine.find((m) => m.key === f.key)!.body), f.name).toBe(true);
      }
    }
    const search = await served.request('GET', `/api/files?search=${encodeURIComponent('café')}`, { headers: { authorization: `Bearer ${photos.token}` } });
    expect((search.body.files as { name: string }[]).map((f) => f.name)).toEqual([photos.name]);
    // Delete: the object goes from Ceph, the record from the listing.
    const deleted = await served.request('DELETE', '/api/files', { headers: { authorization: `Bearer ${photos.token}` }, body: { keys: [bigKey] } });
    expect(deleted.status, deleted.text).toBe(200);
    await expect(ceph.send(new HeadObjectCommand({ Bucket: photos.bucket, Key: bigKey }))).rejects.toMatchObject({ name: 'NotFound' });
    const after = await served.request('GET', '/api/files', { headers: { authorization: `Bearer ${photos.token}` } });
    expect(after.body.pagination.total).toBe(3);
  }, 300_000);

  it('refuses in one line: no embedded store in the data dir, a config not on the s3 driver, an unreachable store, bad credentials', async () => {
    const dir = tempDir('wharf-migrate-objects-refusals-');
    const config = (name: string, toml: string) => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, toml);
      return file;
    };
    const s3 = config('s3.toml', storageToml(target, { prefix: uniquePrefix('no'), storage: 'driver = "s3"' }));
    const cases: [string[], RegExp][] = [
      [
        ['--config', s3, '--data-dir', path.join(dir, 'empty')],
        /^wharf: no embedded store at .*empty\/objects \(no \.wharf\/index\.db there\): is the data dir right\?/,
      ],
      [['--data-dir', dataDir], /^wharf: this config is on the embedded store \(driver "fs"\): give the config of the new instances, on the s3 driver/],
      [
        [
          '--config',
          config('closed.toml', storageToml(target, { prefix: 'x-', storage: 'driver = "s3"', endpoint: 'http://127.0.0.1:1' })),
          '--data-dir',
          dataDir,
        ],
        /^wharf: cannot use the S3 store at http:\/\/127\.0\.0\.1:1: it does not answer/,
      ],
      [
        [
          '--config',
          config('wrong.toml', storageToml({ ...target, secretAccessKey: 'not-the-secret' }, { prefix: 'x-', storage: 'driver = "s3"' })),
          '--data-dir',
          dataDir,
        ],
        /^wharf: cannot use the S3 store at .*: it refused the credentials of \[plugins\.storage\.s3\]/,
      ],
      [['--config', s3, '--data-dir', dataDir, '--concurrency', '0'], /^wharf: --concurrency must be a whole number from 1 to 64\n$/],
    ];
    for (const [args, message] of cases) {
      const r = await wharfAsync(['migrate-objects', ...args], { env: onlyPorted });
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.status, args.join(' ')).not.toBe(0);
      expect(r.stdout, args.join(' ')).toBe('');
    }
  }, 120_000);

  it('Ctrl-C stops it (multipart uploads under way aborted); run again, it finishes', async () => {
    // An embedded store made by the store itself: multipart objects (5 + 5 + 2 MiB) and single ones.
    const dir = tempDir('wharf-migrate-objects-interrupt-');
    const bucket = uniquePrefix('int').slice(0, -1);
    buckets.push(bucket);
    const store = new ObjectStore(path.join(dir, 'objects'));
    store.createBucket(bucket);
    const bodies = new Map<string, Buffer>();
    const MiB = 1024 * 1024;
    for (let i = 0; i < 6; i++) {
      const body = randomBytes(i % 2 ? 6 * MiB : 12 * MiB);
      const key = `obj-${i}.bin`;
      bodies.set(key, body);
      const parts = i % 2 ? undefined : [5 * MiB, 5 * MiB, 2 * MiB];
      let at = 0;
      const multipart = parts && { etag: multipartEtag(parts.map((n) => md5(body.subarray(at, (at += n))))), parts };
      const received = await store.receive(
        (async function* () {
          yield body;
        })(),
      );
      await store.commit(bucket, key, received, { contentType: 'application/octet-stream', user: { n: String(i) }, headers: {} }, multipart);
    }
    store.close();
    const configFile = path.join(dir, 'new.toml');
    fs.writeFileSync(configFile, storageToml(target, { prefix: 'x-', storage: 'driver = "s3"' }));
    const args = ['migrate-objects', '--config', configFile, '--data-dir', dir, '--concurrency', '2'];
    const child = spawn(process.execPath, [path.join(root, 'bin/wharf.ts'), ...args], { env: { ...cleanEnv(), ...onlyPorted } });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const inTarget = async () => ((await ceph.send(new ListObjectsV2Command({ Bucket: bucket })).catch(() => undefined))?.Contents ?? []).length;
    await expect.poll(inTarget, { timeout: 60_000, interval: 50 }).toBeGreaterThan(0);
    child.kill('SIGINT');
    const code = await exited;
    // Interrupted (or, on a fast machine, done before the signal came): never a stack trace.
    if (code === 1) expect(stderr).toMatch(/^wharf: interrupted after \d+ objects? copied: run the same command again to finish\n$/);
    else expect([code, stderr]).toEqual([0, '']);
    expect((await ceph.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? []).toEqual([]);
    const again = await wharfAsync([...args, '--json'], { env: onlyPorted });
    expect(again.status, again.stderr).toBe(0);
    const result = JSON.parse(again.stdout);
    expect(result).toMatchObject({ objects: 6, failed: 0 });
    expect(result.copied + result.skipped).toBe(6);
    for (const [key, body] of bodies) {
      const got = await ceph.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body), key).toBe(true);
      expect(got.ETag, key).toMatch(key.endsWith('0.bin') || key.endsWith('2.bin') || key.endsWith('4.bin') ? /-3"$/ : /^"[0-9a-f]{32}"$/);
    }
  }, 180_000);

  it('is listed by wharf --help', () => {
    expect(wharf(['--help']).stdout).toMatch(/\n {2}wharf migrate-objects +Copy the objects of this data dir's embedded store/);
  });
});
