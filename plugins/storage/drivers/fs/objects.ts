/**
 * The embedded object store on local disk. Layout under the objects directory:
 *
 *   <bucket>/<2 hex>/<uuid>     object bytes, one file per object version (never a key-derived path)
 *   .wharf/index.db              SQLite: buckets, objects (key -> blob, size, ETag, type, metadata,
 *                                part sizes), multipart uploads and their parts, uploads completed in
 *                                the last day (for retried completions), per-bucket access keys, and
 *                                per-bucket usage counters (kept by triggers)
 *   .wharf/tmp/                  bytes being received
 *   .wharf/multipart/<id>/<n>    parts of unfinished multipart uploads
 *
 * A write goes to a temporary file, is fsynced, renamed into the bucket and the directory synced
 * (so the name survives a power loss too), and only then is its row committed; it is acknowledged
 * once the index's WAL is synced (a group commit, off the event loop). A reader finds an object
 * through its row, so it sees the old bytes or the new ones, never a part. A crash or a full disk leaves at most a temporary file (removed on the next
 * start) or an unreferenced blob, never a row without its bytes. Keys are only ever stored in the
 * index, so no key (`..`, `%2e%2e`, backslashes, absolute paths) can name a path.
 */
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Statement } from 'better-sqlite3';
import { openDatabase, type Database } from '../../../../core/db.ts';

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** S3's largest key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 1024;
const MIN_PART_BYTES = 5 * 1024 * 1024;
export const MAX_PARTS = 10_000;

/** An S3 error: code, HTTP status and message, as the endpoint answers it. */
export class S3Error extends Error {
  readonly code: string;
  readonly status: number;
  /** More elements of the error document, as S3 adds them (`Region`, `ArgumentName`, ...). */
  readonly details: Readonly<Record<string, string>>;
  constructor(code: string, status: number, message: string, details: Record<string, string> = {}) {
    super(message);
    this.name = 'S3Error';
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

const noSuchBucket = (bucket: string) => new S3Error('NoSuchBucket', 404, `The specified bucket does not exist: ${bucket}`);
const noSuchKey = () => new S3Error('NoSuchKey', 404, 'The specified key does not exist.');
export const noSuchUpload = () => new S3Error('NoSuchUpload', 404, 'The specified multipart upload does not exist.');

/** Metadata kept with an object besides its bytes. */
export interface ObjectMeta {
  contentType: string;
  /** `x-amz-meta-*` without the prefix, lowercase names. */
  user: Record<string, string>;
  /** Content-Encoding, Content-Disposition, Cache-Control, Content-Language, Expires as given. */
  headers: Record<string, string>;
  /**
   * The checksum the upload declared and the store checked (`x-amz-checksum-<algorithm>`, base64),
   * returned on a whole GET or HEAD that asks for it (`x-amz-checksum-mode: ENABLED`). Only for
   * objects PUT in one request (and their copies): a multipart object has none.
   */
  checksum?: { algorithm: string; value: string };
}

export interface ObjectRow {
  bucket: string;
  key: string;
  blob: string;
  size: number;
  etag: string;
  lastModified: number;
  meta: ObjectMeta;
  /** Sizes of the parts of an object made by a multipart upload, in order; undefined otherwise. */
  parts?: number[];
}

export interface ListResult {
  contents: ObjectRow[];
  commonPrefixes: string[];
  truncated: boolean;
  /** The last key or common prefix returned, to continue after. */
  last: string | undefined;
}

export interface UploadRow {
  id: string;
  bucket: string;
  key: string;
  initiated: number;
  meta: ObjectMeta;
}

export interface PartRow {
  partNumber: number;
  size: number;
  etag: string;
  lastModified: number;
  blob: string;
}

export interface BucketKey {
  accessKey: string;
  bucket: string;
  secret: string;
}

/** An object's row as the index stores it (`objects`). */
export interface RawObject {
  bucket: string;
  key: string;
  blob: string;
  size: number;
  etag: string;
  last_modified: number;
  meta: string;
  parts: string | null;
}

export function toRow(r: RawObject): ObjectRow {
  const row: ObjectRow = {
    bucket: r.bucket,
    key: r.key,
    blob: r.blob,
    size: r.size,
    etag: r.etag,
    lastModified: r.last_modified,
    meta: JSON.parse(r.meta) as ObjectMeta,
  };
  if (r.parts) row.parts = JSON.parse(r.parts) as number[];
  return row;
}

/** A completed multipart upload, remembered so that a retried completion can be answered. */
export interface CompletedUpload {
  id: string;
  bucket: string;
  key: string;
  etag: string;
  completed: number;
}

/** How long a completed upload is remembered for a retried CompleteMultipartUpload. */
const COMPLETED_UPLOAD_TTL_MS = 24 * 3600 * 1000;

/** Where the bytes of `blob` (an object row's) lie under the objects directory `root`. */
export function blobPath(root: string, bucket: string, blob: string): string {
  return path.join(root, bucket, blob);
}

/** The ETag of a multipart object: MD5 of the parts' MD5s, then "-" and the part count. */
export function multipartEtag(partEtags: readonly string[]): string {
  const md5s = createHash('md5');
  for (const etag of partEtags) md5s.update(Buffer.from(etag.replace(/"/g, ''), 'hex'));
  return `${md5s.digest('hex')}-${partEtags.length}`;
}

/** The smallest string greater than every string starting with `prefix` (binary UTF-8 order). */
function after(prefix: string): string {
  return `${prefix}\u{10FFFF}`;
}

/** What a bucket holds, from the counters the index keeps. */
export interface BucketBytes {
  objects: number;
  objectBytes: number;
  /** Bytes of the parts of its unfinished multipart uploads. */
  partBytes: number;
}

/** An object written (its new size) or removed (`size` undefined). */
export interface ObjectChange {
  key: string;
  size: number | undefined;
}

export interface ObjectStoreOptions {
  /**
   * Told after objects of a bucket are written or removed, once the index has committed the
   * change, whoever made it (S3 clients, the server, the root key); the write or delete ends (and
   * is answered) once its promise settles. Must not throw or reject.
   */
  onChange?(bucket: string, changes: readonly ObjectChange[]): void | Promise<void>;
}

/**
 * Index schema version 1: per-bucket usage counters. Triggers keep them in step with every write
 * to objects and parts (REPLACE included: recursive_triggers is on), so the storage limit reads
 * one row per write instead of summing a bucket.
 */
const USAGE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS bucket_usage (
    bucket TEXT PRIMARY KEY, objects INTEGER NOT NULL DEFAULT 0, object_bytes INTEGER NOT NULL DEFAULT 0,
    part_bytes INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
  CREATE TRIGGER IF NOT EXISTS buckets_ai AFTER INSERT ON buckets BEGIN
    INSERT INTO bucket_usage (bucket) VALUES (new.name) ON CONFLICT DO NOTHING;
  END;
  CREATE TRIGGER IF NOT EXISTS buckets_ad AFTER DELETE ON buckets BEGIN
    DELETE FROM bucket_usage WHERE bucket = old.name;
  END;
  CREATE TRIGGER IF NOT EXISTS objects_ai AFTER INSERT ON objects BEGIN
    UPDATE bucket_usage SET objects = objects + 1, object_bytes = object_bytes + new.size WHERE bucket = new.bucket;
  END;
  CREATE TRIGGER IF NOT EXISTS objects_ad AFTER DELETE ON objects BEGIN
    UPDATE bucket_usage SET objects = objects - 1, object_bytes = object_bytes - old.size WHERE bucket = old.bucket;
  END;
  CREATE TRIGGER IF NOT EXISTS objects_au AFTER UPDATE OF size ON objects BEGIN
    UPDATE bucket_usage SET object_bytes = object_bytes - old.size + new.size WHERE bucket = new.bucket;
  END;
  CREATE TRIGGER IF NOT EXISTS parts_ai AFTER INSERT ON parts BEGIN
    UPDATE bucket_usage SET part_bytes = part_bytes + new.size WHERE bucket = (SELECT bucket FROM uploads WHERE id = new.upload_id);
  END;
  CREATE TRIGGER IF NOT EXISTS parts_ad AFTER DELETE ON parts BEGIN
    UPDATE bucket_usage SET part_bytes = part_bytes - old.size WHERE bucket = (SELECT bucket FROM uploads WHERE id = old.upload_id);
  END;
  CREATE TRIGGER IF NOT EXISTS parts_au AFTER UPDATE OF size ON parts BEGIN
    UPDATE bucket_usage SET part_bytes = part_bytes - old.size + new.size WHERE bucket = (SELECT bucket FROM uploads WHERE id = new.upload_id);
  END;
  DELETE FROM bucket_usage;
  INSERT INTO bucket_usage (bucket, objects, object_bytes, part_bytes)
    SELECT b.name,
      (SELECT count(*) FROM objects o WHERE o.bucket = b.name),
      (SELECT coalesce(sum(o.size), 0) FROM objects o WHERE o.bucket = b.name),
      (SELECT coalesce(sum(p.size), 0) FROM parts p JOIN uploads u ON u.id = p.upload_id WHERE u.bucket = b.name)
    FROM buckets b;
`;

/** Bytes gathered into one write of a received body. */
const WRITE_BYTES = 1 << 20;
/** A body up to this size, whole in memory at its end, is written with one synchronous write. */
const SMALL_BODY_BYTES = 256 * 1024;
/** A background fdatasync starts every this many bytes written (writeback overlaps the upload). */
const EARLY_SYNC_BYTES = 8 << 20;

const datasync = (fd: number) => new Promise<void>((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
/**
 * fsyncs a file or a directory: a rename or a new entry in it survives a power loss or a kernel crash only
 * once its directory is synced (a file's fsync covers its bytes, not the name pointing at them).
 */
async function fsyncPath(file: string): Promise<void> {
  const handle = await fsp.open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
/** {@link fsyncPath} on the event loop: for the rare directories made with their row (a bucket, a multipart upload). */
function fsyncPathNow(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
const writevAt = (fd: number, pieces: Buffer[], position: number) =>
  new Promise<number>((resolve, reject) => fs.writev(fd, pieces, position, (err, n) => (err ? reject(err) : resolve(n))));
const writeAt = (fd: number, data: Buffer, off: number, position: number) =>
  new Promise<number>((resolve, reject) => fs.write(fd, data, off, data.length - off, position, (err, n) => (err ? reject(err) : resolve(n))));

/** A file written so that it is complete before anyone can see it. */
export interface Received {
  tmp: string;
  size: number;
  md5: Buffer;
}

export class ObjectStore {
  readonly root: string;
  readonly #db: Database;
  readonly #tmp: string;
  readonly #multipart: string;
  readonly #onChange: ObjectStoreOptions['onChange'];
  readonly #q;
  readonly #statements = new Map<string, Statement>();
  /** Writes waiting for the shared transaction of {@link #record}. */
  #pending: { record: () => unknown; resolve: (value: unknown) => void; reject: (error: unknown) => void }[] = [];
  /** The index's write-ahead log, synced after each group of object writes ({@link ObjectStore.#syncWal}). */
  readonly #wal: string;
  #runningSync: Promise<void> | undefined;
  #queuedSync: Promise<void> | undefined;

  constructor(root: string, options: ObjectStoreOptions = {}) {
    this.#onChange = options.onChange;
    this.root = path.resolve(root);
    const meta = path.join(this.root, '.wharf');
    this.#tmp = path.join(meta, 'tmp');
    this.#multipart = path.join(meta, 'multipart');
    fs.mkdirSync(this.#tmp, { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.#multipart, { recursive: true, mode: 0o700 });
    this.#db = openDatabase(path.join(meta, 'index.db'));
    this.#wal = path.join(meta, 'index.db-wal');
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS buckets (name TEXT PRIMARY KEY, created INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS objects (
        bucket TEXT NOT NULL, key TEXT NOT NULL, blob TEXT NOT NULL, size INTEGER NOT NULL,
        etag TEXT NOT NULL, last_modified INTEGER NOT NULL, meta TEXT NOT NULL,
        PRIMARY KEY (bucket, key)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS uploads (
        id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, initiated INTEGER NOT NULL, meta TEXT NOT NULL);
      CREATE INDEX IF NOT EXISTS uploads_by_key ON uploads (bucket, key, id);
      CREATE TABLE IF NOT EXISTS parts (
        upload_id TEXT NOT NULL, part_number INTEGER NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL,
        last_modified INTEGER NOT NULL, blob TEXT NOT NULL, PRIMARY KEY (upload_id, part_number)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS bucket_keys (
        access_key TEXT PRIMARY KEY, bucket TEXT NOT NULL UNIQUE, secret TEXT NOT NULL, created INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS completed_uploads (
        id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, etag TEXT NOT NULL, completed INTEGER NOT NULL);
    `);
    // Part sizes of multipart objects (GetObject ?partNumber=); stores made before have none.
    const columns = this.#db.prepare('PRAGMA table_info(objects)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'parts')) this.#db.exec('ALTER TABLE objects ADD COLUMN parts TEXT');
    // INSERT OR REPLACE must fire the delete triggers of the row it replaces (usage counters).
    this.#db.pragma('recursive_triggers = ON');
    this.#db
      .transaction(() => {
        if ((this.#db.pragma('user_version', { simple: true }) as number) >= 1) return;
        this.#db.exec(USAGE_SCHEMA);
        this.#db.pragma('user_version = 1');
      })
      .immediate();
    this.#q = {
      usage: this.#db.prepare('SELECT objects, object_bytes, part_bytes FROM bucket_usage WHERE bucket = ?'),
      objectSize: this.#db.prepare('SELECT size FROM objects WHERE bucket = ? AND key = ?').pluck(),
      partSize: this.#db.prepare('SELECT size FROM parts WHERE upload_id = ? AND part_number = ?').pluck(),
      uploadBytes: this.#db.prepare('SELECT coalesce(sum(size), 0) FROM parts WHERE upload_id = ?').pluck(),
      keyById: this.#db.prepare('SELECT access_key, bucket, secret FROM bucket_keys WHERE access_key = ?'),
      keyOfBucket: this.#db.prepare('SELECT access_key, bucket, secret FROM bucket_keys WHERE bucket = ?'),
      objectsAfter: this.#db.prepare('SELECT key, size, last_modified FROM objects WHERE bucket = ? AND key > ? ORDER BY key LIMIT ?'),
    };
    // Bytes received before a crash, never renamed into place.
    for (const name of fs.readdirSync(this.#tmp)) fs.rmSync(path.join(this.#tmp, name), { force: true });
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }

  /** A statement, prepared once per SQL text (preparing costs more than most of these queries). */
  #st(sql: string): Statement {
    let st = this.#statements.get(sql);
    if (!st) this.#statements.set(sql, (st = this.#db.prepare(sql)));
    return st;
  }

  /**
   * Runs `record` (a few statements) in a transaction shared with the other writes that reach
   * this point in the same event-loop turn, each in a savepoint of its own: one commit, so one
   * fsync of the WAL, for all of them, instead of one each on the event loop. The promise
   * settles after the shared COMMIT has returned: a write is acknowledged only once its row is
   * durable, as before; a failing write rolls back its savepoint alone, a failing COMMIT fails
   * every write of the group.
   */
  #record<T>(record: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ record, resolve: resolve as (value: unknown) => void, reject });
      if (this.#pending.length === 1) setImmediate(() => this.#flush());
    });
  }

  async #flush(): Promise<void> {
    const group = this.#pending;
    this.#pending = [];
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.#db.transaction(() => {
        for (const item of group) {
          try {
            outcomes.push({ ok: true, value: this.#db.transaction(item.record)() });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
      })();
      // The index runs with synchronous = NORMAL (no fsync in COMMIT, which would block the
      // event loop): the WAL is synced here, off the loop and shared by the groups committed
      // meanwhile, before any write of the group is acknowledged.
      if (outcomes.some((o) => o.ok)) await this.#syncWal();
    } catch (error) {
      for (const item of group) item.reject(error);
      return;
    }
    for (const [i, item] of group.entries()) {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    }
  }

  /**
   * An fdatasync of the index's WAL that starts after this call: commits made before it are
   * durable once it settles. Calls made while one runs share the next one (group commit).
   */
  #syncWal(): Promise<void> {
    if (!this.#queuedSync) {
      const next: Promise<void> = (this.#runningSync ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => {
          this.#queuedSync = undefined;
          this.#runningSync = next;
          return fsyncPath(this.#wal);
        })
        .finally(() => {
          if (this.#runningSync === next) this.#runningSync = undefined;
        });
      this.#queuedSync = next;
    }
    return this.#queuedSync;
  }

  // ------------------------------------------------------------------ buckets

  hasBucket(bucket: string): boolean {
    return this.#st('SELECT 1 FROM buckets WHERE name = ?').get(bucket) !== undefined;
  }

  requireBucket(bucket: string): void {
    if (!this.hasBucket(bucket)) throw noSuchBucket(bucket);
  }

  listBuckets(): { name: string; created: number }[] {
    return this.#st('SELECT name, created FROM buckets ORDER BY name').all() as { name: string; created: number }[];
  }

  /** Creates the bucket; false when it existed already. */
  createBucket(bucket: string): boolean {
    if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) throw new S3Error('InvalidBucketName', 400, 'The specified bucket is not valid.');
    if (fs.mkdirSync(path.join(this.root, bucket), { recursive: true, mode: 0o700 })) fsyncPathNow(this.root);
    return this.#st('INSERT OR IGNORE INTO buckets (name, created) VALUES (?, ?)').run(bucket, Date.now()).changes === 1;
  }

  /** Removes an empty bucket and its access key. */
  deleteBucket(bucket: string): void {
    this.requireBucket(bucket);
    this.#db.transaction(() => {
      if (this.#st('SELECT 1 FROM objects WHERE bucket = ? LIMIT 1').get(bucket)) {
        throw new S3Error('BucketNotEmpty', 409, 'The bucket you tried to delete is not empty.');
      }
      for (const u of this.#st('SELECT id FROM uploads WHERE bucket = ?').all(bucket) as { id: string }[]) this.#dropUpload(u.id);
      this.#st('DELETE FROM buckets WHERE name = ?').run(bucket);
      this.#st('DELETE FROM bucket_keys WHERE bucket = ?').run(bucket);
      this.#st('DELETE FROM completed_uploads WHERE bucket = ?').run(bucket);
    })();
    fs.rmSync(path.join(this.root, bucket), { recursive: true, force: true });
  }

  // ------------------------------------------------------------------ keys

  bucketKey(accessKey: string): BucketKey | undefined {
    const row = this.#q.keyById.get(accessKey) as { access_key: string; bucket: string; secret: string } | undefined;
    return row && { accessKey: row.access_key, bucket: row.bucket, secret: row.secret };
  }

  keyOfBucket(bucket: string): BucketKey | undefined {
    const row = this.#q.keyOfBucket.get(bucket) as { access_key: string; bucket: string; secret: string } | undefined;
    return row && { accessKey: row.access_key, bucket: row.bucket, secret: row.secret };
  }

  /** Stores the bucket's key unless it has one; returns the one it has. */
  setBucketKey(key: BucketKey): BucketKey {
    this.#db
      .prepare('INSERT OR IGNORE INTO bucket_keys (access_key, bucket, secret, created) VALUES (?, ?, ?, ?)')
      .run(key.accessKey, key.bucket, key.secret, Date.now());
    return this.keyOfBucket(key.bucket)!;
  }

  // ------------------------------------------------------------------ usage

  /** What the bucket holds (zeros for a missing bucket). */
  bucketBytes(bucket: string): BucketBytes {
    const r = this.#q.usage.get(bucket) as { objects: number; object_bytes: number; part_bytes: number } | undefined;
    return { objects: r?.objects ?? 0, objectBytes: r?.object_bytes ?? 0, partBytes: r?.part_bytes ?? 0 };
  }

  /** The size of an object, or 0 when there is none. */
  objectSize(bucket: string, key: string): number {
    return (this.#q.objectSize.get(bucket, key) as number | undefined) ?? 0;
  }

  /** The size of one part of an upload, or 0 when it has not been sent. */
  partSize(uploadId: string, partNumber: number): number {
    return (this.#q.partSize.get(uploadId, partNumber) as number | undefined) ?? 0;
  }

  /** Bytes of every part an upload holds. */
  uploadBytes(uploadId: string): number {
    return this.#q.uploadBytes.get(uploadId) as number;
  }

  /** Objects of a bucket in key order after `after`, a page at a time: key, size, last modified (ms). */
  objectsAfter(bucket: string, after: string, limit: number): { key: string; size: number; lastModified: number }[] {
    return (this.#q.objectsAfter.all(bucket, after, limit) as { key: string; size: number; last_modified: number }[]).map((r) => ({
      key: r.key,
      size: r.size,
      lastModified: r.last_modified,
    }));
  }

  // ------------------------------------------------------------------ bytes

  /**
   * Writes `source` to a temporary file, MD5 computed on the way, its data synced
   * (fdatasync: the bytes and the size, what reading them back needs). The caller renames it into
   * place with {@link commit} or drops it with {@link discard}. Any failure removes the file.
   *
   * Bytes are gathered into writes (one writev each) of {@link WRITE_BYTES} (a request arrives in 64 KiB pieces),
   * one in flight while the next is received and hashed;
   * a body that ends within {@link SMALL_BODY_BYTES} is written with one synchronous write (to
   * the page cache: cheaper than a trip through the thread pool), larger ones through the thread
   * pool. Every {@link EARLY_SYNC_BYTES} written, an fdatasync starts in the background, so
   * that the disk writes back while the rest arrives; the final fdatasync still comes after the
   * last byte and before the caller may acknowledge anything.
   */
  async receive(source: AsyncIterable<Buffer>, dir: string = this.#tmp): Promise<Received> {
    const tmp = path.join(dir, `${randomUUID()}.tmp`);
    const md5 = createHash('md5');
    let size = 0;
    const fd = fs.openSync(tmp, 'wx', 0o600);
    let open = true;
    let gathered: Buffer[] = [];
    let gatheredBytes = 0;
    /** Bytes handed to writes so far (the next write's position), and those written (for the early syncs). */
    let queued = 0;
    let written = 0;
    let syncedUpTo = 0;
    let early: Promise<void> | undefined;
    /** The write in flight: the next MiB is received and hashed meanwhile, at most one write waits. */
    let writing: Promise<void> | undefined;
    const take = () => {
      const data = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes);
      gathered = [];
      gatheredBytes = 0;
      return data;
    };
    const write = async (pieces: Buffer[], bytes: number, at: number) => {
      // One writev of the gathered pieces (no copy); a short write, rare on a file, finishes from a joined copy.
      const done = await writevAt(fd, pieces, at);
      if (done < bytes) {
        const rest = Buffer.concat(pieces, bytes).subarray(done);
        for (let off = 0; off < rest.length; ) off += await writeAt(fd, rest, off, at + done + off);
      }
      written = at + bytes;
      if (!early && written - syncedUpTo >= EARLY_SYNC_BYTES) {
        syncedUpTo = written;
        early = datasync(fd).finally(() => (early = undefined));
      }
    };
    const flush = async () => {
      await writing;
      const at = queued;
      queued += gatheredBytes;
      writing = write(gathered, gatheredBytes, at);
      // Awaited by the next flush or at the end; a failure meanwhile is not an unhandled rejection.
      writing.catch(() => undefined);
      gathered = [];
      gatheredBytes = 0;
    };
    try {
      for await (const chunk of source) {
        md5.update(chunk);
        size += chunk.length;
        gathered.push(chunk);
        gatheredBytes += chunk.length;
        if (gatheredBytes >= WRITE_BYTES) await flush();
      }
      if (gatheredBytes && queued === 0 && gatheredBytes <= SMALL_BODY_BYTES) {
        const data = take();
        for (let off = 0; off < data.length; ) off += fs.writeSync(fd, data, off, data.length - off, off);
      } else if (gatheredBytes) await flush();
      await writing;
      await early;
      await datasync(fd);
      open = false;
      fs.closeSync(fd);
    } catch (err) {
      await writing?.catch(() => undefined);
      await early?.catch(() => undefined);
      if (open) fs.closeSync(fd);
      await fsp.rm(tmp, { force: true });
      throw err;
    }
    return { tmp, size, md5: md5.digest() };
  }

  /**
   * Renames a received file to `target`, making the target's directory (`<bucket>/<2 hex>`) when
   * it is missing, and syncs the directories it changed: the row committed next never points at a
   * name a power loss could take back.
   */
  async #renameInto(from: string, target: string): Promise<void> {
    const dir = path.dirname(target);
    try {
      await fsp.rename(from, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      await fsyncPath(path.dirname(dir));
      await fsp.rename(from, target);
    }
    await fsyncPath(dir);
  }

  async discard(received: Received): Promise<void> {
    await fsp.rm(received.tmp, { force: true });
  }

  #blobPath(bucket: string, blob: string): string {
    return blobPath(this.root, bucket, blob);
  }

  /**
   * Renames received bytes into the bucket and makes them the object's; the replaced blob is
   * removed. `multipart` gives the ETag and part sizes of an object joined from parts; `then`
   * runs inside the transaction that records the object.
   */
  async commit(
    bucket: string,
    key: string,
    received: Received,
    meta: ObjectMeta,
    multipart?: { etag: string; parts: number[] },
    then?: () => void,
  ): Promise<ObjectRow> {
    const id = randomUUID();
    const blob = `${id.slice(0, 2)}/${id}`;
    const target = this.#blobPath(bucket, blob);
    try {
      this.requireBucket(bucket);
      await this.#renameInto(received.tmp, target);
    } catch (err) {
      await this.discard(received);
      throw err;
    }
    const row: ObjectRow = { bucket, key, blob, size: received.size, etag: multipart?.etag ?? received.md5.toString('hex'), lastModified: Date.now(), meta };
    if (multipart) row.parts = multipart.parts;
    let old: string | undefined;
    try {
      old = await this.#record(() => {
        if (!this.hasBucket(bucket)) throw noSuchBucket(bucket);
        const prev = this.#st('SELECT blob FROM objects WHERE bucket = ? AND key = ?').get(bucket, key) as { blob: string } | undefined;
        this.#st('INSERT OR REPLACE INTO objects (bucket, key, blob, size, etag, last_modified, meta, parts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
          bucket,
          key,
          blob,
          row.size,
          row.etag,
          row.lastModified,
          JSON.stringify(meta),
          row.parts ? JSON.stringify(row.parts) : null,
        );
        then?.();
        return prev?.blob;
      });
    } catch (err) {
      await fsp.rm(target, { force: true });
      throw err;
    }
    await this.#onChange?.(bucket, [{ key, size: row.size }]);
    if (old) await fsp.rm(this.#blobPath(bucket, old), { force: true });
    return row;
  }

  // ------------------------------------------------------------------ objects

  head(bucket: string, key: string): ObjectRow | undefined {
    const r = this.#st('SELECT * FROM objects WHERE bucket = ? AND key = ?').get(bucket, key) as RawObject | undefined;
    return r && toRow(r);
  }

  /** Opens the object's bytes: the row and an open file handle (unaffected by a concurrent overwrite). */
  async open(bucket: string, key: string): Promise<{ row: ObjectRow; handle: fsp.FileHandle }> {
    for (let attempt = 0; ; attempt++) {
      const row = this.head(bucket, key);
      if (!row) {
        this.requireBucket(bucket);
        throw noSuchKey();
      }
      try {
        return { row, handle: await fsp.open(this.#blobPath(bucket, row.blob), 'r') };
      } catch (err) {
        // Replaced between the look-up and the open: look again.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw err;
      }
    }
  }

  /**
   * The row and the whole bytes of an object of at most `limit` bytes, read synchronously (open,
   * one read, close: a fifth of the CPU of the same through the thread pool, for the small objects
   * most reads are; the index is read synchronously too); undefined for a larger object, which
   * {@link open} streams. Throws NoSuchKey/NoSuchBucket like {@link open}.
   */
  readSmall(bucket: string, key: string, limit: number): { row: ObjectRow; body: Buffer } | undefined {
    for (let attempt = 0; ; attempt++) {
      const row = this.head(bucket, key);
      if (!row) {
        this.requireBucket(bucket);
        throw noSuchKey();
      }
      if (row.size > limit) return undefined;
      let fd: number;
      try {
        fd = fs.openSync(this.#blobPath(bucket, row.blob), 'r');
      } catch (err) {
        // Replaced between the look-up and the open: look again.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw err;
        continue;
      }
      try {
        const body = Buffer.allocUnsafe(row.size);
        let got = 0;
        while (got < row.size) {
          const n = fs.readSync(fd, body, got, row.size - got, got);
          if (!n) throw new Error(`object ${bucket}/${key}: ${got} of ${row.size} bytes on disk`);
          got += n;
        }
        return { row, body };
      } finally {
        fs.closeSync(fd);
      }
    }
  }

  /** Deletes an object; true when it existed. */
  async delete(bucket: string, key: string): Promise<boolean> {
    const blob = this.#db.transaction(() => {
      const prev = this.#st('SELECT blob FROM objects WHERE bucket = ? AND key = ?').get(bucket, key) as { blob: string } | undefined;
      if (prev) this.#st('DELETE FROM objects WHERE bucket = ? AND key = ?').run(bucket, key);
      return prev?.blob;
    })();
    if (!blob) return false;
    // The row's removal is durable before its bytes go: a power loss never leaves it without them.
    await this.#syncWal();
    await this.#onChange?.(bucket, [{ key, size: undefined }]);
    await fsp.rm(this.#blobPath(bucket, blob), { force: true });
    return true;
  }

  /**
   * Deletes many objects of one bucket: their rows in one transaction, then their blobs (a few
   * at a time). Missing keys are not an error. Returns how many objects existed.
   */
  async deleteMany(bucket: string, keys: readonly string[]): Promise<number> {
    const drop = this.#st('DELETE FROM objects WHERE bucket = ? AND key = ? RETURNING blob');
    const removed: ObjectChange[] = [];
    const blobs = this.#db.transaction(() => {
      const out: string[] = [];
      for (const key of keys) {
        const row = drop.get(bucket, key) as { blob: string } | undefined;
        if (row) {
          out.push(row.blob);
          removed.push({ key, size: undefined });
        }
      }
      return out;
    })();
    if (removed.length) {
      await this.#syncWal();
      await this.#onChange?.(bucket, removed);
    }
    for (let i = 0; i < blobs.length; i += 32) {
      await Promise.all(blobs.slice(i, i + 32).map((blob) => fsp.rm(this.#blobPath(bucket, blob), { force: true })));
    }
    return blobs.length;
  }

  /**
   * Removes files nothing refers to, which only a crash leaves: a blob renamed into a bucket
   * whose row was never committed, a part file without its row, the directory of an upload that
   * no longer exists. Files younger than `graceMs` are left alone: another process sharing the
   * directory may be between its rename and its commit. Returns the number of files removed.
   */
  async sweep(graceMs = 15 * 60 * 1000): Promise<number> {
    const cutoff = Date.now() - graceMs;
    let removed = 0;
    const removeIfOld = async (file: string): Promise<void> => {
      try {
        if ((await fsp.stat(file)).mtimeMs >= cutoff) return;
        await fsp.rm(file, { force: true });
        removed++;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    };
    for (const { name: bucket } of this.listBuckets()) {
      const dir = path.join(this.root, bucket);
      let shards: string[];
      try {
        shards = await fsp.readdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      const referenced = new Set((this.#st('SELECT blob FROM objects WHERE bucket = ?').all(bucket) as { blob: string }[]).map((r) => r.blob));
      for (const shard of shards) {
        if (!/^[0-9a-f]{2}$/.test(shard)) continue;
        let names: string[];
        try {
          names = await fsp.readdir(path.join(dir, shard));
        } catch {
          continue;
        }
        for (const name of names) {
          const blob = `${shard}/${name}`;
          // Looked up again before removing: committed since the set was read?
          if (referenced.has(blob) || this.#st('SELECT 1 FROM objects WHERE bucket = ? AND blob = ?').get(bucket, blob)) continue;
          await removeIfOld(path.join(dir, blob));
        }
      }
    }
    const partOf = this.#st('SELECT 1 FROM parts WHERE upload_id = ? AND blob = ?');
    const uploadExists = this.#st('SELECT 1 FROM uploads WHERE id = ?');
    for (const id of await fsp.readdir(this.#multipart)) {
      const dir = path.join(this.#multipart, id);
      const known = uploadExists.get(id) !== undefined;
      // Before its files go (which touches it): an old directory of a forgotten upload.
      const stale = !known && ((await fsp.stat(dir).catch(() => undefined))?.mtimeMs ?? Infinity) < cutoff;
      for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
        const file = path.join(dir, name);
        if (known && partOf.get(id, file)) continue;
        await removeIfOld(file);
      }
      if (stale) await fsp.rmdir(dir).catch(() => undefined);
    }
    return removed;
  }

  /**
   * Keys in binary order after `startAfter`, starting with `prefix`; with a delimiter, keys that
   * have it after the prefix roll up into common prefixes. At most `maxKeys` entries in all.
   */
  list(bucket: string, opts: { prefix: string; delimiter: string; startAfter: string; skipUnder?: boolean; maxKeys: number }): ListResult {
    const { prefix, delimiter, maxKeys } = opts;
    const out: ListResult = { contents: [], commonPrefixes: [], truncated: false, last: undefined };
    let from = prefix;
    let inclusive = true;
    if (opts.startAfter !== '' && opts.startAfter >= prefix) {
      from = opts.skipUnder ? after(opts.startAfter) : opts.startAfter;
      inclusive = false;
    }
    const upper = prefix === '' ? undefined : after(prefix);
    const range = upper ? 'AND key < ?' : '';
    const stmtIncl = this.#st(`SELECT * FROM objects WHERE bucket = ? AND key >= ? ${range} ORDER BY key LIMIT ?`);
    const stmtExcl = this.#st(`SELECT * FROM objects WHERE bucket = ? AND key > ? ${range} ORDER BY key LIMIT ?`);
    const batch = Math.min(Math.max(maxKeys, 1) + 1, 1001);
    for (;;) {
      const rows = (inclusive ? stmtIncl : stmtExcl).all(bucket, from, ...(upper ? [upper] : []), batch) as RawObject[];
      let skipped = false;
      for (const raw of rows) {
        if (!raw.key.startsWith(prefix)) return out;
        const at = delimiter ? raw.key.indexOf(delimiter, prefix.length) : -1;
        const entry = at >= 0 ? raw.key.slice(0, at + delimiter.length) : raw.key;
        if (out.contents.length + out.commonPrefixes.length >= maxKeys) {
          out.truncated = true;
          return out;
        }
        out.last = entry;
        inclusive = false;
        if (at >= 0) {
          out.commonPrefixes.push(entry);
          // Skip every key under this common prefix.
          from = after(entry);
          skipped = true;
          break;
        }
        out.contents.push(toRow(raw));
        from = raw.key;
      }
      if (!skipped && rows.length < batch) return out;
    }
  }

  /** Every object of a bucket, in key order, a page at a time. */
  keysAfter(bucket: string, after: string, limit: number): string[] {
    return (this.#st('SELECT key FROM objects WHERE bucket = ? AND key > ? ORDER BY key LIMIT ?').all(bucket, after, limit) as { key: string }[]).map(
      (r) => r.key,
    );
  }

  /**
   * Copies an object's bytes (through a temporary file, like any write; `through` sees them on the
   * way, the storage limit's meter). The copy is a single-part object: its ETag is the MD5 of its
   * bytes, as S3 gives a CopyObject.
   */
  async copy(
    src: { bucket: string; key: string },
    dst: { bucket: string; key: string },
    meta: ObjectMeta | undefined,
    through: (body: AsyncIterable<Buffer>) => AsyncIterable<Buffer> = (body) => body,
  ): Promise<ObjectRow> {
    this.requireBucket(dst.bucket);
    const { row, handle } = await this.open(src.bucket, src.key);
    let received: Received;
    try {
      received = await this.receive(through(handle.createReadStream({ autoClose: false }) as AsyncIterable<Buffer>));
    } finally {
      await handle.close();
    }
    return this.commit(dst.bucket, dst.key, received, meta ?? row.meta);
  }

  /**
   * The bytes `start..end` (inclusive) of an object, received like an upload's: what
   * UploadPartCopy stores as a part. `range` decides them from the source's row (its size),
   * throwing to refuse; undefined means the whole object.
   */
  async receiveFrom(
    src: { bucket: string; key: string },
    range: (row: ObjectRow) => { start: number; end: number } | undefined,
    through: (body: AsyncIterable<Buffer>) => AsyncIterable<Buffer> = (body) => body,
  ): Promise<Received> {
    const { row, handle } = await this.open(src.bucket, src.key);
    try {
      const r = range(row);
      if (row.size === 0 && !r) return await this.receive(through((async function* () {})()));
      return await this.receive(
        through(handle.createReadStream({ autoClose: false, start: r?.start ?? 0, end: r?.end ?? row.size - 1 }) as AsyncIterable<Buffer>),
      );
    } finally {
      await handle.close();
    }
  }

  // ------------------------------------------------------------------ multipart

  createUpload(bucket: string, key: string, meta: ObjectMeta): string {
    this.requireBucket(bucket);
    const id = randomUUID().replace(/-/g, '') + randomUUID().replace(/-/g, '');
    fs.mkdirSync(path.join(this.#multipart, id), { mode: 0o700 });
    fsyncPathNow(this.#multipart);
    this.#st('INSERT INTO uploads (id, bucket, key, initiated, meta) VALUES (?, ?, ?, ?, ?)').run(id, bucket, key, Date.now(), JSON.stringify(meta));
    return id;
  }

  upload(bucket: string, key: string, id: string): UploadRow {
    const r = this.#st('SELECT * FROM uploads WHERE id = ?').get(id) as
      | { id: string; bucket: string; key: string; initiated: number; meta: string }
      | undefined;
    if (!r || r.bucket !== bucket || r.key !== key) {
      this.requireBucket(bucket);
      throw noSuchUpload();
    }
    return { id: r.id, bucket: r.bucket, key: r.key, initiated: r.initiated, meta: JSON.parse(r.meta) as ObjectMeta };
  }

  listUploads(bucket: string, opts: { prefix: string; keyMarker: string; uploadIdMarker: string; max: number }): { uploads: UploadRow[]; truncated: boolean } {
    const rows = this.#db
      .prepare('SELECT * FROM uploads WHERE bucket = ? AND (key > ? OR (key = ? AND id > ?)) ORDER BY key, id LIMIT ?')
      .all(bucket, opts.keyMarker, opts.keyMarker, opts.uploadIdMarker, opts.max + 1) as {
      id: string;
      bucket: string;
      key: string;
      initiated: number;
      meta: string;
    }[];
    const matching = rows.filter((r) => r.key.startsWith(opts.prefix));
    return {
      uploads: matching
        .slice(0, opts.max)
        .map((r) => ({ id: r.id, bucket: r.bucket, key: r.key, initiated: r.initiated, meta: JSON.parse(r.meta) as ObjectMeta })),
      truncated: rows.length > opts.max,
    };
  }

  async putPart(upload: UploadRow, partNumber: number, received: Received): Promise<PartRow> {
    const blob = path.join(this.#multipart, upload.id, `${partNumber}.${randomUUID()}`);
    try {
      await fsp.rename(received.tmp, blob);
      await fsyncPath(path.dirname(blob));
    } catch (err) {
      await this.discard(received);
      throw err;
    }
    const part: PartRow = { partNumber, size: received.size, etag: received.md5.toString('hex'), lastModified: Date.now(), blob };
    const old = this.#db.transaction(() => {
      if (!this.#st('SELECT 1 FROM uploads WHERE id = ?').get(upload.id)) throw noSuchUpload();
      const prev = this.#st('SELECT blob FROM parts WHERE upload_id = ? AND part_number = ?').get(upload.id, partNumber) as { blob: string } | undefined;
      this.#db
        .prepare('INSERT OR REPLACE INTO parts (upload_id, part_number, size, etag, last_modified, blob) VALUES (?, ?, ?, ?, ?, ?)')
        .run(upload.id, partNumber, part.size, part.etag, part.lastModified, blob);
      return prev?.blob;
    });
    let prevBlob: string | undefined;
    try {
      prevBlob = old();
    } catch (err) {
      await fsp.rm(blob, { force: true });
      throw err;
    }
    await this.#syncWal();
    if (prevBlob) await fsp.rm(prevBlob, { force: true });
    return part;
  }

  parts(uploadId: string): PartRow[] {
    return (
      this.#st('SELECT part_number, size, etag, last_modified, blob FROM parts WHERE upload_id = ? ORDER BY part_number').all(uploadId) as {
        part_number: number;
        size: number;
        etag: string;
        last_modified: number;
        blob: string;
      }[]
    ).map((p) => ({ partNumber: p.part_number, size: p.size, etag: p.etag, lastModified: p.last_modified, blob: p.blob }));
  }

  /**
   * Joins the named parts into the object; the multipart ETag is MD5 of the part MD5s, "-N". The
   * upload is then forgotten, and remembered as completed (for a day) in the same transaction.
   */
  async complete(upload: UploadRow, wanted: { partNumber: number; etag: string }[]): Promise<ObjectRow> {
    if (!wanted.length) throw new S3Error('MalformedXML', 400, 'You must specify at least one part.');
    const have = new Map(this.parts(upload.id).map((p) => [p.partNumber, p]));
    const chosen: PartRow[] = [];
    let previous = 0;
    for (const [i, w] of wanted.entries()) {
      if (w.partNumber <= previous) throw new S3Error('InvalidPartOrder', 400, 'The list of parts was not in ascending order.');
      previous = w.partNumber;
      const part = have.get(w.partNumber);
      if (!part || part.etag !== w.etag.replace(/"/g, ''))
        throw new S3Error('InvalidPart', 400, `Part ${w.partNumber} was not found or its ETag does not match.`);
      if (i < wanted.length - 1 && part.size < MIN_PART_BYTES)
        throw new S3Error('EntityTooSmall', 400, `Part ${w.partNumber} is smaller than the minimum of 5 MiB.`);
      chosen.push(part);
    }
    async function* concat(): AsyncIterable<Buffer> {
      for (const part of chosen) {
        for await (const chunk of fs.createReadStream(part.blob, { highWaterMark: 1 << 20 })) yield chunk as Buffer;
      }
    }
    const received = await this.receive(concat());
    const etag = multipartEtag(chosen.map((p) => p.etag));
    if (!this.#st('SELECT 1 FROM uploads WHERE id = ?').get(upload.id)) {
      await this.discard(received);
      throw noSuchUpload();
    }
    const now = Date.now();
    const row = await this.commit(upload.bucket, upload.key, received, upload.meta, { etag, parts: chosen.map((p) => p.size) }, () => {
      // A second completion that got here at the same time: the first one won.
      if (!this.#st('SELECT 1 FROM uploads WHERE id = ?').get(upload.id)) throw noSuchUpload();
      this.#dropUpload(upload.id);
      this.#st('DELETE FROM completed_uploads WHERE completed < ?').run(now - COMPLETED_UPLOAD_TTL_MS);
      this.#db
        .prepare('INSERT OR REPLACE INTO completed_uploads (id, bucket, key, etag, completed) VALUES (?, ?, ?, ?, ?)')
        .run(upload.id, upload.bucket, upload.key, etag, now);
    });
    fs.rmSync(path.join(this.#multipart, upload.id), { recursive: true, force: true });
    return row;
  }

  /** An upload completed within {@link COMPLETED_UPLOAD_TTL_MS}, for a retried completion. */
  completedUpload(bucket: string, key: string, id: string): CompletedUpload | undefined {
    const r = this.#st('SELECT id, bucket, key, etag, completed FROM completed_uploads WHERE id = ?').get(id) as CompletedUpload | undefined;
    if (!r || r.bucket !== bucket || r.key !== key || r.completed < Date.now() - COMPLETED_UPLOAD_TTL_MS) return undefined;
    return r;
  }

  #dropUpload(id: string): void {
    this.#st('DELETE FROM parts WHERE upload_id = ?').run(id);
    this.#st('DELETE FROM uploads WHERE id = ?').run(id);
  }

  /**
   * Forgets an upload, then removes its parts once the forgetting is durable: a power loss never
   * leaves an upload whose part rows point at removed files.
   */
  async abort(id: string): Promise<void> {
    this.#db.transaction(() => this.#dropUpload(id))();
    await this.#syncWal();
    await fsp.rm(path.join(this.#multipart, id), { recursive: true, force: true });
  }

  /**
   * Aborts the unfinished uploads initiated before `cutoff` (ms since the epoch), at most `max`
   * of them, oldest first (S3's lifecycle rule AbortIncompleteMultipartUpload). Returns how
   * many it aborted, with their buckets and keys.
   */
  async abortInitiatedBefore(cutoff: number, max: number): Promise<{ bucket: string; key: string }[]> {
    const rows = this.#st('SELECT id, bucket, key FROM uploads WHERE initiated < ? ORDER BY initiated LIMIT ?').all(cutoff, max) as {
      id: string;
      bucket: string;
      key: string;
    }[];
    for (const row of rows) await this.abort(row.id);
    return rows.map(({ bucket, key }) => ({ bucket, key }));
  }
}
