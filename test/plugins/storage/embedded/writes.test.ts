/**
 * How the embedded store writes objects (issue 16): bodies gathered into large writes with
 * background syncs, small ones in one write; rows of concurrent writes committed together (one
 * transaction, a savepoint each), so a failing write fails alone; and an object acknowledged over
 * HTTP is there after the process is killed with SIGKILL right after the answers; a name is synced
 * (its directory fsynced) before the row that points at it is written, so a power loss cannot leave
 * a row without its bytes (the order read from strace).
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ObjectStore, S3Error } from '../../../../plugins/storage/drivers/fs/objects.ts';
import { SigV4Presigner } from '../../../../plugins/storage/drivers/sigv4.ts';
import { tempDir } from '../../../helpers/app.ts';
import { ensureDebianTool } from '../../../helpers/debian.ts';

const meta = { contentType: 'application/octet-stream', user: {}, headers: {} };
const stores: ObjectStore[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

function open(dir = tempDir('wharf-writes-')): ObjectStore {
  const store = new ObjectStore(dir);
  stores.push(store);
  store.createBucket('bkt');
  return store;
}

async function* pieces(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let off = 0; off < data.length; off += size) yield data.subarray(off, off + size);
}

async function read(store: ObjectStore, key: string): Promise<Buffer> {
  const { handle } = await store.open('bkt', key);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

describe('receiving bodies', () => {
  it.each([
    ['empty', 0, 1],
    ['4 KiB in one piece', 4096, 65536],
    ['200 KiB in 64 KiB pieces (one synchronous write at the end)', 200 * 1024, 65536],
    ['300 KiB in 1 KiB pieces (over the small-body size)', 300 * 1024, 1024],
    ['20 MiB in 64 KiB pieces (1 MiB writes, background syncs)', 20 * 1024 * 1024, 65536],
    ['3 MiB in 512-byte pieces (more pieces than one writev takes)', 3 * 1024 * 1024, 512],
  ])('%s: the bytes, size and MD5 are the body’s', async (_, size, piece) => {
    const store = open();
    const data = randomBytes(size);
    const row = await store.commit('bkt', 'k', await store.receive(pieces(data, piece)), meta);
    expect(row.size).toBe(size);
    expect(row.etag).toBe(md5(data));
    expect((await read(store, 'k')).equals(data)).toBe(true);
  });

  it('a body that fails half-way leaves no temporary file', async () => {
    const dir = tempDir('wharf-writes-');
    const store = open(dir);
    async function* failing(): AsyncGenerator<Buffer> {
      yield randomBytes(3 * 1024 * 1024);
      throw new Error('client went away');
    }
    await expect(store.receive(failing())).rejects.toThrow('client went away');
    expect(fs.readdirSync(path.join(dir, '.wharf', 'tmp'))).toEqual([]);
  });
});

describe('rows of concurrent writes', () => {
  it('commit together; one failing write fails alone and leaves no blob', async () => {
    const dir = tempDir('wharf-writes-');
    const store = open(dir);
    const bodies = Array.from({ length: 20 }, () => randomBytes(1000));
    const received = await Promise.all(bodies.map((b) => store.receive(pieces(b, 4096))));
    const failing = await store.receive(pieces(randomBytes(10), 4096));
    // All in the same turn: one shared transaction.
    const results = await Promise.allSettled([
      ...received.map((r, i) => store.commit('bkt', `ok/${i}`, r, meta)),
      store.commit('bkt', 'bad', failing, meta, undefined, () => {
        throw new S3Error('NoSuchUpload', 404, 'gone');
      }),
    ]);
    expect(results.slice(0, 20).every((r) => r.status === 'fulfilled')).toBe(true);
    expect(results[20]).toMatchObject({ status: 'rejected', reason: { code: 'NoSuchUpload' } });
    expect(store.head('bkt', 'bad')).toBeUndefined();
    for (const [i, b] of bodies.entries()) expect((await read(store, `ok/${i}`)).equals(b)).toBe(true);
    // Twenty blobs in the bucket, not twenty-one.
    const blobs = fs.readdirSync(path.join(dir, 'bkt'), { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(blobs).toHaveLength(20);
    expect(store.bucketBytes('bkt')).toMatchObject({ objects: 20, objectBytes: 20_000 });
  });

  it('a write to a bucket deleted before its row is committed fails with NoSuchBucket', async () => {
    const store = open();
    store.createBucket('gone');
    const r = await store.receive(pieces(randomBytes(10), 4096));
    const commit = store.commit('gone', 'k', r, meta);
    store.deleteBucket('gone');
    await expect(commit).rejects.toMatchObject({ code: 'NoSuchBucket' });
  });
});

describe('durability', () => {
  it('a name is synced before its row, the row before the answer: rename, fsync of the directory, the WAL write, its fsync, then the promise settles (strace)', async () => {
    const dir = tempDir('wharf-writes-order-');
    const module = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../plugins/storage/drivers/fs/objects.ts');
    const code = `
      const { ObjectStore } = await import(${JSON.stringify(module)});
      const store = new ObjectStore(${JSON.stringify(dir)});
      store.createBucket('bkt');
      const meta = { contentType: 'application/octet-stream', user: {}, headers: {} };
      async function* body() { yield Buffer.alloc(4096, 7); }
      const fs = await import('node:fs');
      // A rename of nothing: a mark in the trace when a promise settles (the write is acknowledged).
      const mark = (name) => { try { fs.renameSync('/nonexistent/' + name, '/nonexistent/x'); } catch {} };
      await store.commit('bkt', 'k', await store.receive(body()), meta);
      mark('committed');
      const upload = store.createUpload('bkt', 'big', meta);
      await store.putPart(store.upload('bkt', 'big', upload), 1, await store.receive(body()));
      mark('part');
      await store.abort(upload);
      mark('aborted');
      store.close();`;
    const trace = path.join(tempDir('wharf-strace-'), 'trace');
    const strace = await ensureDebianTool('/usr/bin/strace', 'strace');
    const child = spawn(
      strace,
      ['-f', '-y', '-e', 'trace=rename,fsync,fdatasync,pwrite64,unlink,unlinkat,rmdir', '-o', trace, process.execPath, '--input-type=module', '-e', code],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(0);
    const lines = fs.readFileSync(trace, 'utf8').split('\n');
    const at = (re: RegExp, from = 0) => lines.findIndex((l, i) => i >= from && re.test(l));
    const esc = (p: string) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    // The bucket's directory entry is synced when the bucket is made.
    expect(at(new RegExp(`fsync\\(\\d+<${esc(dir)}>\\) = 0`))).toBeGreaterThanOrEqual(0);
    // The object: renamed into <bucket>/<2 hex>/, that directory synced, and only then its row written.
    const renamed = at(new RegExp(`rename\\("[^"]+", "${esc(dir)}/bkt/([0-9a-f]{2})/[0-9a-f-]{36}"\\) = 0`));
    expect(renamed, lines.join('\n')).toBeGreaterThanOrEqual(0);
    const sub = /\/bkt\/([0-9a-f]{2})\//.exec(lines[renamed]!)![1]!;
    const synced = at(new RegExp(`fsync\\(\\d+<${esc(dir)}/bkt/${sub}>\\) = 0`), renamed);
    expect(synced).toBeGreaterThan(renamed);
    const row = at(/pwrite64\(\d+<[^>]*index\.db-wal>/, renamed);
    expect(row).toBeGreaterThan(synced);
    // Acknowledged once the WAL holding the row is synced.
    const acknowledged = at(/rename\("\/nonexistent\/committed"/);
    const walSynced = at(/f(data)?sync\(\d+<[^>]*index\.db-wal>\) = 0/, row);
    expect(walSynced).toBeGreaterThan(row);
    expect(acknowledged).toBeGreaterThan(walSynced);
    // A multipart part: renamed into its upload's directory, which is synced before the part's row.
    const part = at(new RegExp(`rename\\("[^"]+", "${esc(dir)}/\\.wharf/multipart/([0-9a-f]+)/1\\.[0-9a-f-]+"\\) = 0`));
    expect(part).toBeGreaterThan(row);
    const partSynced = at(new RegExp(`fsync\\(\\d+<${esc(dir)}/\\.wharf/multipart/[0-9a-f]+>\\) = 0`), part);
    expect(partSynced).toBeGreaterThan(part);
    const partRow = at(/pwrite64\(\d+<[^>]*index\.db-wal>/, part);
    expect(partRow).toBeGreaterThan(partSynced);
    const partWalSynced = at(/f(data)?sync\(\d+<[^>]*index\.db-wal>\) = 0/, partRow);
    expect(partWalSynced).toBeGreaterThan(partRow);
    const partAcknowledged = at(/rename\("\/nonexistent\/part"/);
    expect(partAcknowledged).toBeGreaterThan(partWalSynced);
    // An abort: the upload's rows go, the WAL holding that is synced, and only then its part files.
    const abortRow = at(/pwrite64\(\d+<[^>]*index\.db-wal>/, partAcknowledged);
    expect(abortRow).toBeGreaterThan(partAcknowledged);
    const abortSynced = at(/f(data)?sync\(\d+<[^>]*index\.db-wal>\) = 0/, abortRow);
    expect(abortSynced).toBeGreaterThan(abortRow);
    const removed = at(/(unlink|unlinkat|rmdir)\(.*\.wharf\/multipart\/[0-9a-f]+/, partAcknowledged);
    expect(removed, lines.join('\n')).toBeGreaterThan(abortSynced);
    expect(at(/rename\("\/nonexistent\/aborted"/)).toBeGreaterThan(removed);
  });

  it('objects acknowledged over HTTP are all there after SIGKILL right after the answers', async () => {
    const dir = tempDir('wharf-writes-kill-');
    const before = new ObjectStore(dir);
    before.createBucket('bkt');
    before.close();
    const module = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../plugins/storage/drivers/fs/index.ts');
    const logger = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../core/logger.ts');
    const code = `
      const { startStandaloneStore } = await import(${JSON.stringify(module)});
      const { createLogger } = await import(${JSON.stringify(logger)});
      const s = await startStandaloneStore({ objectsDir: ${JSON.stringify(dir)}, listen: '127.0.0.1:0', region: 'us-east-1',
        root: { accessKey: 'root', secretKey: 'root-secret' }, log: createLogger('silent') });
      process.stdout.write(s.url + '\\n');`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d) => {
          out += d;
          if (out.includes('\n')) resolve(out.trim());
        });
        child.once('exit', (c) => reject(new Error(`store exited ${c}`)));
      });
      const signer = new SigV4Presigner({ credentials: { accessKeyId: 'root', secretAccessKey: 'root-secret' }, region: 'us-east-1', forcePathStyle: true });
      const sign = (key: string) => signer.presignSync({ method: 'PUT', endpoint: new URL(url), bucket: 'bkt', key, expiresInSeconds: 600 });
      const bodies = Array.from({ length: 40 }, (_, i) => randomBytes(i === 0 ? 3 * 1024 * 1024 : 2048));
      const answers = await Promise.all(bodies.map((b, i) => fetch(sign(`k/${i}`), { method: 'PUT', body: b })));
      expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 200));
      child.kill('SIGKILL');
      await exited;
      const store = new ObjectStore(dir);
      stores.push(store);
      for (const [i, b] of bodies.entries()) {
        expect(store.head('bkt', `k/${i}`)?.etag).toBe(md5(b));
        expect((await read(store, `k/${i}`)).equals(b)).toBe(true);
      }
    } finally {
      child.kill('SIGKILL');
    }
  });
});
