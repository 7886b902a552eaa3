/**
 * The object store's per-bucket usage counters, which the storage limit reads on every write:
 * kept by triggers through puts, overwrites (INSERT OR REPLACE), deletes, batch deletes, parts
 * (re-sent, completed, aborted) and bucket removal, each checked against a sum over the rows;
 * an index written before the counters existed gets them, right, when it is opened; and every
 * change to an object is reported once committed.
 */
import Database from 'better-sqlite3';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type ObjectChange, ObjectStore } from '../../../../plugins/storage/drivers/fs/objects.ts';
import { tempDir } from '../../../helpers/app.ts';

const meta = { contentType: 'application/octet-stream', user: {}, headers: {} };
const stores: ObjectStore[] = [];

async function* bytes(n: number): AsyncGenerator<Buffer> {
  yield Buffer.alloc(n, 7);
}

function open(dir = tempDir('wharf-usage-'), onChange?: (bucket: string, changes: readonly ObjectChange[]) => void): ObjectStore {
  const store = new ObjectStore(dir, onChange ? { onChange } : {});
  stores.push(store);
  return store;
}

async function put(store: ObjectStore, bucket: string, key: string, n: number) {
  return store.commit(bucket, key, await store.receive(bytes(n)), meta);
}

/** The same figures summed from the rows, to check the counters against. */
function summed(dir: string, bucket: string) {
  const db = new Database(path.join(dir, '.wharf/index.db'), { readonly: true });
  try {
    const o = db.prepare('SELECT count(*) AS n, coalesce(sum(size), 0) AS b FROM objects WHERE bucket = ?').get(bucket) as { n: number; b: number };
    const p = db.prepare('SELECT coalesce(sum(p.size), 0) AS b FROM parts p JOIN uploads u ON u.id = p.upload_id WHERE u.bucket = ?').get(bucket) as {
      b: number;
    };
    return { objects: o.n, objectBytes: o.b, partBytes: p.b };
  } finally {
    db.close();
  }
}

afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

describe('bucket usage counters', () => {
  it('follow puts, overwrites, deletes, parts, completes, aborts and bucket removal', async () => {
    const dir = tempDir('wharf-usage-');
    const store = open(dir);
    store.createBucket('one');
    store.createBucket('two');
    const check = (bucket: string, expected: { objects: number; objectBytes: number; partBytes: number }) => {
      expect(store.bucketBytes(bucket)).toEqual(expected);
      expect(summed(dir, bucket)).toEqual(expected);
    };
    await put(store, 'one', 'a', 100);
    await put(store, 'one', 'b', 50);
    await put(store, 'two', 'a', 7);
    check('one', { objects: 2, objectBytes: 150, partBytes: 0 });
    // An overwrite replaces the row: counted once, at its new size.
    await put(store, 'one', 'a', 30);
    check('one', { objects: 2, objectBytes: 80, partBytes: 0 });
    await store.delete('one', 'b');
    check('one', { objects: 1, objectBytes: 30, partBytes: 0 });
    const id = store.createUpload('one', 'mp', meta);
    const upload = store.upload('one', 'mp', id);
    const p1 = await store.putPart(upload, 1, await store.receive(bytes(5 * 1024 * 1024)));
    await store.putPart(upload, 2, await store.receive(bytes(10)));
    // A re-sent part replaces the first one.
    const p2 = await store.putPart(upload, 2, await store.receive(bytes(20)));
    check('one', { objects: 1, objectBytes: 30, partBytes: 5 * 1024 * 1024 + 20 });
    expect(store.partSize(id, 2)).toBe(20);
    expect(store.uploadBytes(id)).toBe(5 * 1024 * 1024 + 20);
    await store.complete(upload, [
      { partNumber: 1, etag: p1.etag },
      { partNumber: 2, etag: p2.etag },
    ]);
    check('one', { objects: 2, objectBytes: 30 + 5 * 1024 * 1024 + 20, partBytes: 0 });
    const other = store.createUpload('one', 'never', meta);
    await store.putPart(store.upload('one', 'never', other), 1, await store.receive(bytes(99)));
    check('one', { objects: 2, objectBytes: 30 + 5 * 1024 * 1024 + 20, partBytes: 99 });
    await store.abort(other);
    await store.deleteMany('one', ['a', 'mp', 'missing']);
    check('one', { objects: 0, objectBytes: 0, partBytes: 0 });
    check('two', { objects: 1, objectBytes: 7, partBytes: 0 });
    await store.delete('two', 'a');
    store.deleteBucket('two');
    expect(store.bucketBytes('two')).toEqual({ objects: 0, objectBytes: 0, partBytes: 0 });
  });

  it('an index from before the counters gets them, right, when opened', async () => {
    const dir = tempDir('wharf-usage-');
    const first = open(dir);
    first.createBucket('old');
    await put(first, 'old', 'x', 40);
    await put(first, 'old', 'y', 2);
    first.close();
    // Back to the index as the previous version left it: no counters, no triggers, version 0.
    const db = new Database(path.join(dir, '.wharf/index.db'));
    for (const t of ['buckets_ai', 'buckets_ad', 'objects_ai', 'objects_ad', 'objects_au', 'parts_ai', 'parts_ad', 'parts_au']) db.exec(`DROP TRIGGER ${t}`);
    db.exec('DROP TABLE bucket_usage');
    db.pragma('user_version = 0');
    db.close();
    const reopened = open(dir);
    expect(reopened.bucketBytes('old')).toEqual({ objects: 2, objectBytes: 42, partBytes: 0 });
    await put(reopened, 'old', 'z', 8);
    expect(reopened.bucketBytes('old')).toEqual({ objects: 3, objectBytes: 50, partBytes: 0 });
  });

  it('every committed change to an object is reported: new size, or removed', async () => {
    const seen: [string, ObjectChange[]][] = [];
    const store = open(undefined, (bucket, changes) => seen.push([bucket, [...changes]]));
    store.createBucket('bkt');
    await put(store, 'bkt', 'k', 5);
    await put(store, 'bkt', 'k', 9);
    await store.copy({ bucket: 'bkt', key: 'k' }, { bucket: 'bkt', key: 'copy' }, undefined);
    await store.delete('bkt', 'k');
    await store.delete('bkt', 'never');
    await store.deleteMany('bkt', ['copy', 'missing']);
    expect(seen).toEqual([
      ['bkt', [{ key: 'k', size: 5 }]],
      ['bkt', [{ key: 'k', size: 9 }]],
      ['bkt', [{ key: 'copy', size: 9 }]],
      ['bkt', [{ key: 'k', size: undefined }]],
      ['bkt', [{ key: 'copy', size: undefined }]],
    ]);
  });
});
