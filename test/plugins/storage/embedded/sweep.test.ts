/**
 * The object store's housekeeping: the start-up sweep of files a crash left unreferenced (a blob
 * renamed into its bucket whose row was never committed, a part without its row, a forgotten
 * upload's directory), sparing young files another process may be about to commit; and batch
 * deletes (one transaction for many keys).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ObjectStore } from '../../../../plugins/storage/drivers/fs/objects.ts';
import { tempDir } from '../../../helpers/app.ts';

const meta = { contentType: 'application/octet-stream', user: {}, headers: {} };
const stores: ObjectStore[] = [];

async function* bytes(text: string): AsyncGenerator<Buffer> {
  yield Buffer.from(text);
}

function open(): ObjectStore {
  const store = new ObjectStore(tempDir('wharf-sweep-'));
  stores.push(store);
  store.createBucket('bkt');
  return store;
}

async function put(store: ObjectStore, key: string, text: string) {
  return store.commit('bkt', key, await store.receive(bytes(text)), meta);
}

/** A file as a crash would leave it, `ageMs` old. */
function orphan(file: string, ageMs: number): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'left by a crash');
  const t = new Date(Date.now() - ageMs);
  fs.utimesSync(file, t, t);
  return file;
}

function old(dir: string, ageMs: number): void {
  const t = new Date(Date.now() - ageMs);
  fs.utimesSync(dir, t, t);
}

afterEach(() => {
  for (const s of stores.splice(0)) {
    s.close();
    fs.rmSync(s.root, { recursive: true, force: true });
  }
});

const HOUR = 3600_000;

describe('start-up sweep', () => {
  it('removes old unreferenced blobs and parts, keeps referenced files and young orphans', async () => {
    const store = open();
    const kept = await put(store, 'kept', 'kept bytes');
    // Referenced, and made old: age alone never removes a file.
    old(path.join(store.root, 'bkt', kept.blob), 2 * HOUR);
    const lost = orphan(path.join(store.root, 'bkt', 'ab', 'ab0f0000-0000-4000-8000-000000000000'), 2 * HOUR);
    const young = orphan(path.join(store.root, 'bkt', 'cd', 'cd0f0000-0000-4000-8000-000000000000'), 1000);

    const upload = store.createUpload('bkt', 'mp', meta);
    const part = await store.putPart(store.upload('bkt', 'mp', upload), 1, await store.receive(bytes('part one')));
    old(part.blob, 2 * HOUR);
    const strayPart = orphan(path.join(store.root, '.wharf/multipart', upload, '2.deadbeef'), 2 * HOUR);
    const forgotten = path.join(store.root, '.wharf/multipart', 'f'.repeat(64));
    orphan(path.join(forgotten, '1.cafe'), 2 * HOUR);
    old(forgotten, 2 * HOUR);

    expect(await store.sweep(HOUR)).toBe(3);
    expect(fs.existsSync(lost)).toBe(false);
    expect(fs.existsSync(strayPart)).toBe(false);
    expect(fs.existsSync(forgotten)).toBe(false);
    expect(fs.existsSync(young)).toBe(true);
    expect(fs.existsSync(part.blob)).toBe(true);
    const { row, handle } = await store.open('bkt', 'kept');
    expect((await handle.readFile()).toString()).toBe('kept bytes');
    await handle.close();
    expect(row.blob).toBe(kept.blob);
    // Completing the upload still works: its part survived.
    const done = await store.complete(store.upload('bkt', 'mp', upload), [{ partNumber: 1, etag: part.etag }]);
    expect(done.size).toBe(8);
    // Nothing more to sweep.
    expect(await store.sweep(HOUR)).toBe(0);
  });
});

describe('batch deletes', () => {
  it('deleteMany removes rows and blobs of existing keys, ignores missing ones', async () => {
    const store = open();
    const rows = await Promise.all(['a', 'b', 'c', 'd'].map((k) => put(store, k, k)));
    expect(await store.deleteMany('bkt', ['a', 'c', 'missing', 'd'])).toBe(3);
    expect(store.keysAfter('bkt', '', 10)).toEqual(['b']);
    expect(rows.map((r) => fs.existsSync(path.join(store.root, 'bkt', r.blob)))).toEqual([false, true, false, false]);
    expect(await store.deleteMany('bkt', [])).toBe(0);
  });
});
