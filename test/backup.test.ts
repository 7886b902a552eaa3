/**
 * `wharf backup DEST` against a real `wharf serve` that keeps writing during the backup, then a
 * second server on a restored copy; and the inputs it refuses, each in one line with nothing
 * left behind.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backup } from '../core/backup.ts';
import { openDatabase } from '../core/db.ts';
import { ObjectStore } from '../plugins/storage/drivers/fs/objects.ts';
import { tempDir } from './helpers/app.ts';
import { serve, type Served, wharf, wharfAsync } from './helpers/cli.ts';
import { overHttp, setupOwner } from './helpers/served.ts';
import { createApp, createToken, localFile, uploadFiles } from './helpers/storage.ts';

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('wharf backup', () => {
  let root: string;
  let dataDir: string;
  let first: Served | undefined;
  let second: Served | undefined;
  beforeAll(() => {
    root = tempDir('wharf-backup-');
    dataDir = path.join(root, 'data');
  });
  afterAll(async () => {
    await first?.stop();
    await second?.stop();
  });

  it('copies a serving instance online (writes going on) and a server on the restored copy answers the same data', async () => {
    first = await serve(['--data-dir', dataDir]);
    const api = overHttp(first.url);
    const owner = await setupOwner(first);
    const appId = (await createApp(api, owner, 'backed up')).id as string;
    const token = await createToken(api, owner, appId);
    const file = localFile('photo.bin', 300_000);
    const [uploaded] = await uploadFiles(api, owner, appId, [file], 'b');
    const pat = (await api.request('POST', '/api/personal-access-tokens', { headers: owner.headers, body: { name: 'backup test' } })).body.data.token as string;
    const created = await api.request('POST', '/api/sandbox-sessions', { headers: bearer(pat), body: { name: 'Kept' } });
    expect(created.status, created.text).toBe(201);
    const session = created.body.data as { id: number; api_key: string };

    // Writes all through the backup: personal access tokens w-1, w-2, ... one after the other.
    let writes = 0;
    let writing = true;
    const loop = (async () => {
      while (writing) {
        const res = await api.request('POST', '/api/personal-access-tokens', { headers: bearer(pat), body: { name: `w-${writes + 1}` } });
        expect(res.status, res.text).toBe(201);
        writes++;
        // Paced under the rate limit (600 a minute per credential by default): a backup slower than
        // a minute under load must not meet a 429 from a server that answers fast.
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    while (writes < 3) await new Promise((r) => setTimeout(r, 10));
    const dest = path.join(root, 'backup');
    const before = writes;
    const ran = await wharfAsync(['backup', dest, '--with-objects', '--data-dir', dataDir]);
    const writtenDuring = writes;
    writing = false;
    await loop;
    expect(ran.stderr).toBe('');
    expect(ran.status).toBe(0);
    expect(ran.stdout).toMatch(
      new RegExp(`^backup written to ${dest} in \\d+\\.\\d s: database \\S+ [KM]iB \\(SQLite online backup\\), keys 3 files, objects 1 \\(293 KiB\\)\\n$`),
    );
    expect(writtenDuring).toBeGreaterThan(before); // the server was written to while the backup ran

    // Files 0600, directories 0700; nothing left beside DEST.
    const walk = (dir: string): string[] =>
      fs
        .readdirSync(dir, { withFileTypes: true })
        .flatMap((e) => (e.isDirectory() ? [path.join(dir, e.name), ...walk(path.join(dir, e.name))] : [path.join(dir, e.name)]));
    for (const p of [dest, ...walk(dest)]) expect((fs.statSync(p).mode & 0o777).toString(8), p).toBe(fs.statSync(p).isDirectory() ? '700' : '600');
    expect(fs.readdirSync(root).sort()).toEqual(['backup', 'data']);
    expect(fs.readdirSync(dest).sort()).toEqual(['keys', 'objects', 'wharf.db']);
    const copy = openDatabase(path.join(dest, 'wharf.db'), { mustExist: true, readonly: true });
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
    copy.close();

    // Restore: the files into a new data dir, a second server on it (the first keeps running).
    const restored = path.join(root, 'restored');
    fs.cpSync(dest, restored, { recursive: true });
    second = await serve(['--data-dir', restored]);
    const again = overHttp(second.url);
    // The session's API key (found by its hash) and the key itself (decrypted with the copied keys).
    expect((await again.request('GET', '/api/status', { headers: bearer(session.api_key) })).body).toEqual({ status: 'connected' });
    const shown = await again.request('GET', `/api/whatsapp-sessions/${session.id}`, { headers: bearer(pat) });
    expect(shown.body.data.api_key).toBe(session.api_key);
    // The app token, and the file's bytes from the restored embedded store.
    const out = path.join(root, 'downloaded.bin');
    const got = await wharfAsync(['files', 'get', uploaded.key, '--out', out, '--token', token, '--instance', second.url]);
    expect(got.stderr).toBe('');
    expect(fs.readFileSync(out).equals(file.body)).toBe(true);
    // One instant: the tokens written during the backup are w-1..w-k with no gap, k <= the writes.
    const pats = (await again.request('GET', '/api/personal-access-tokens', { headers: bearer(pat) })).body.data as { name: string }[];
    const numbers = pats
      .map((p) => /^w-(\d+)$/.exec(p.name)?.[1])
      .filter((n) => n !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
    expect(numbers.length).toBeGreaterThanOrEqual(3);
    expect(numbers.length).toBeLessThanOrEqual(writtenDuring);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
  }, 180_000);

  it('without --with-objects, says the objects are not in it', () => {
    const dest = path.join(root, 'no-objects');
    const r = wharf(['backup', dest, '--data-dir', dataDir, '--json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ dest, database: { engine: 'sqlite', bytes: expect.any(Number) }, keys: { files: 3 } });
    expect(json.objects).toBeUndefined();
    expect(json.notIncluded).toEqual([`the embedded store's objects in ${path.join(dataDir, 'objects')} (--with-objects copies them)`]);
    expect(fs.readdirSync(dest).sort()).toEqual(['keys', 'wharf.db']);
  });

  it('refuses bad inputs in one line, exit 1, leaving nothing half-written', () => {
    const parentFile = path.join(root, 'a-file');
    fs.writeFileSync(parentFile, 'not a directory');
    const notWritable = wharf(['backup', path.join(parentFile, 'dest'), '--data-dir', dataDir]);
    expect(notWritable).toMatchObject({ status: 1, stdout: '' });
    expect(notWritable.stderr).toBe(`wharf: cannot write ${path.join(parentFile, 'dest')} (ENOTDIR)\n`);
    // A parent that does not exist: the temporary directory beside DEST cannot be made.
    const orphan = path.join(root, 'no-such-parent', 'dest');
    expect(wharf(['backup', orphan, '--data-dir', dataDir])).toMatchObject({ status: 1, stdout: '', stderr: `wharf: cannot write ${orphan} (ENOENT)\n` });
    if (process.getuid?.() !== 0) {
      // Not as root, whom permissions do not stop.
      const locked = path.join(root, 'locked');
      fs.mkdirSync(locked, { mode: 0o500 });
      expect(wharf(['backup', path.join(locked, 'dest'), '--data-dir', dataDir])).toMatchObject({
        status: 1,
        stderr: `wharf: cannot write ${path.join(locked, 'dest')} (EACCES)\n`,
      });
      expect(fs.readdirSync(locked)).toEqual([]);
    }

    const full = path.join(root, 'full');
    fs.mkdirSync(full);
    fs.writeFileSync(path.join(full, 'mine.txt'), 'keep me');
    expect(wharf(['backup', full, '--data-dir', dataDir])).toMatchObject({
      status: 1,
      stdout: '',
      stderr: `wharf: ${full} exists and is not empty (--force replaces it)\n`,
    });
    expect(fs.readdirSync(full)).toEqual(['mine.txt']);

    const empty = path.join(root, 'empty-data');
    fs.mkdirSync(empty);
    expect(wharf(['backup', path.join(root, 'nothing'), '--data-dir', empty])).toMatchObject({
      status: 1,
      stdout: '',
      stderr: `wharf: no Wharf database at ${path.join(empty, 'wharf.db')}: is the data dir right?\n`,
    });
    expect(fs.readdirSync(empty)).toEqual([]);
    expect(fs.readdirSync(root).filter((n) => n.includes('partial') || n === 'nothing')).toEqual([]);

    // --force replaces the directory, once the new copy is whole.
    const forced = wharf(['backup', full, '--force', '--data-dir', dataDir]);
    expect(forced.status, forced.stderr).toBe(0);
    expect(fs.readdirSync(full).sort()).toEqual(['keys', 'wharf.db']);
    expect(fs.readdirSync(root).filter((n) => n.includes('partial'))).toEqual([]);
  });

  it('on PostgreSQL points to pg_dump (password masked) and still copies the keys', () => {
    const dest = path.join(root, 'pg');
    const pgData = path.join(root, 'pg-data');
    fs.cpSync(path.join(dataDir, 'keys'), path.join(pgData, 'keys'), { recursive: true });
    const r = wharf(['backup', dest, '--data-dir', pgData], {
      env: {
        WHARF_DATABASE__URL: 'postgres://wharf:s3cret@db.internal:5432/wharf',
        WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
      },
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).not.toContain('s3cret');
    expect(r.stdout).toMatch(/^backup written to \S+ in \d+\.\d s: database not copied \(PostgreSQL\), keys 3 files\n/);
    expect(r.stdout).toMatch(
      /\nthe PostgreSQL database is not in it: back it up with pg_dump --format=custom --file=wharf\.pgdump 'postgres:\/\/wharf:\*\*\*@db\.internal:5432\/wharf'\n$/,
    );
    expect(fs.readdirSync(dest)).toEqual(['keys']);
  });
});

describe('backup of the embedded store', () => {
  it('leaves out an object whose blob went after the index snapshot (deleted or replaced meanwhile), and drops its row', async () => {
    const dir = tempDir('wharf-backup-objects-');
    const dataDir = path.join(dir, 'data');
    openDatabase(path.join(dataDir, 'wharf.db')).close();
    const store = new ObjectStore(path.join(dataDir, 'objects'));
    try {
      store.createBucket('kept-bucket');
      const meta = { contentType: 'application/octet-stream', user: {}, headers: {} };
      const put = async (key: string, n: number) =>
        store.commit(
          'kept-bucket',
          key,
          await store.receive(
            (async function* () {
              yield Buffer.alloc(n, 7);
            })(),
          ),
          meta,
        );
      await put('stays', 10);
      const gone = await put('goes', 20);
      // As a delete running between the snapshot and the copy does: the row is in the snapshot, the blob is not on disk.
      fs.rmSync(path.join(dataDir, 'objects', 'kept-bucket', gone.blob));
      const result = await backup({
        dataDir,
        database: { engine: 'sqlite', path: path.join(dataDir, 'wharf.db') },
        dest: path.join(dir, 'b'),
        objectsDir: path.join(dataDir, 'objects'),
      });
      expect(result.objects).toEqual({ objects: 1, bytes: 10, leftOut: 1 });
      const index = openDatabase(path.join(dir, 'b', 'objects', '.wharf', 'index.db'), { mustExist: true, readonly: true });
      expect(index.prepare('SELECT key FROM objects').pluck().all()).toEqual(['stays']);
      // The usage counters follow the dropped row, as they follow the store's own deletes.
      expect(index.prepare('SELECT objects, object_bytes FROM bucket_usage').get()).toEqual({ objects: 1, object_bytes: 10 });
      index.close();
    } finally {
      store.close();
    }
  });
});
