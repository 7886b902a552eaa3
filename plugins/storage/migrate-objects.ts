/**
 * `wharf migrate-objects`: copies the objects of an instance's embedded store (the `fs` driver's
 * objects directory) into the S3-compatible store of `[plugins.storage.s3]`, so that instances on
 * the `s3` driver serve the files `wharf migrate-data` moved.
 *
 * - The embedded store is only read: its index (`.wharf/index.db`) is opened read-only and each
 *   object's bytes streamed from its blob file, so the old server may run meanwhile (objects it
 *   writes after a bucket was read are left for the next run; one it deletes meanwhile is skipped).
 * - Every bucket keeps its name: an app's bucket is the `bucket_name` of its `storage_apps` row,
 *   which the s3 driver uses as it is (bucket_prefix only names the buckets of new apps).
 * - Each object keeps its part layout, so its ETag in the target is the one the embedded store
 *   recorded: an object written in one PUT is sent in one PUT (S3 takes up to 5 GiB that way) with
 *   Content-MD5 (the store refuses bytes that do not match), a multipart object with the same part
 *   sizes, each part's MD5 computed while it streams and compared with what the store answers,
 *   and the whole checked against the recorded ETag before the upload completes. A HEAD then
 *   checks size and ETag. Content type, user metadata and the stored headers go with it.
 * - Idempotent and resumable: an object already in the target with the same size and ETag is
 *   skipped, so a second run copies nothing and an interrupted one finishes where it stopped (the
 *   unfinished multipart upload an interrupted copy left is aborted before its key is sent again).
 * - A failed object is recorded with its key and the others go on.
 * - The target's listing of the bucket being copied is held in memory (key, size and ETag per
 *   object: about 150 MB for a million objects); the bytes are streamed, never held whole.
 * - Then, given the new instances' database, every file record is looked for in the target.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { type Readable, Transform } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { type Database, type DbHandle, openDatabase } from '../../core/db.ts';
import { runningServer } from '../../core/serve-pid.ts';
import type { S3Config } from './config.ts';
import { blobPath, multipartEtag, type ObjectRow, type RawObject, toRow } from './drivers/fs/objects.ts';
import { classify, clientConfig, createS3Driver } from './drivers/s3.ts';
import { StoreError } from './drivers/types.ts';
import { MAX_PUT_BYTES } from './service.ts';

/** Refused before anything was copied: one line for the operator. */
export class MigrateObjectsError extends Error {
  override name = 'MigrateObjectsError';
}

export interface MigrateObjectsOptions {
  /** The embedded store's objects directory (`[plugins.storage.fs] objects_dir`, default `<data_dir>/objects`). */
  objectsDir: string;
  /** The old instance's data dir: a server running there is reported. */
  dataDir: string;
  /** The target store. */
  s3: S3Config;
  /** Objects copied at once (default 4). */
  concurrency?: number;
  /** Aborted: no new object starts, copies under way are abandoned (their multipart uploads aborted). */
  signal?: AbortSignal;
  /**
   * The new instances' database, opened once the embedded store and the S3 store answer: each
   * app's file records are looked for in the S3 store after the copy (`records`).
   */
  database?: () => Promise<DbHandle>;
}

/** The file records of the new instances' database, checked against the S3 store after the copy. */
export interface RecordsCheck {
  /** False when the database has no storage tables yet (migrate-data not run): nothing checked. */
  checked: boolean;
  apps: number;
  files: number;
  /** Records whose object the S3 store does not have: the new instances could not serve them. */
  missing: { bucket: string; key: string }[];
}

export interface BucketSummary {
  bucket: string;
  /** Objects of the bucket in the embedded store. */
  objects: number;
  copied: number;
  skipped: number;
  failed: number;
  /** Bytes copied. */
  bytes: number;
}

export interface MigrateObjectsResult {
  /** The embedded store read. */
  source: string;
  /** The target store's endpoint. */
  target: string;
  buckets: BucketSummary[];
  /** Objects of the embedded store. */
  objects: number;
  copied: number;
  /** Already in the target with the same size and ETag. */
  skipped: number;
  failed: number;
  /** Objects that went from the embedded store while being read (the old server deleted them). */
  vanished: number;
  /** Bytes copied. */
  bytes: number;
  ms: number;
  failures: { bucket: string; key: string; reason: string }[];
  /** The run was interrupted: run it again to finish. */
  interrupted: boolean;
  /** A server still running on the old data dir: what it writes after its bucket was read is not copied. */
  serverRunning?: { pid: number; url: string };
  /** Present when a database was given. */
  records?: RecordsCheck;
}

const PAGE = 1000;
const DEFAULT_CONCURRENCY = 4;
/** Part size for an object whose part layout the index does not know (stores made before it kept one). */
const FALLBACK_PART_BYTES = 16 * 1024 * 1024;
const MAX_PARTS = 10_000;

/** Header names the embedded store keeps with an object, as PutObject and CreateMultipartUpload take them. */
function objectHeaders(row: ObjectRow) {
  const h = row.meta.headers;
  const expires = h.expires === undefined ? undefined : new Date(h.expires);
  return {
    ContentType: row.meta.contentType,
    Metadata: { ...row.meta.user },
    ContentEncoding: h['content-encoding'],
    ContentDisposition: h['content-disposition'],
    CacheControl: h['cache-control'],
    ContentLanguage: h['content-language'],
    Expires: expires && !Number.isNaN(expires.getTime()) ? expires : undefined,
  };
}

/**
 * How an object is sent: its recorded layout when known (the target's ETag is then the recorded
 * one), else parts of a fixed size (only the size can be compared with a later run's).
 */
interface Layout {
  /** Part sizes; undefined: one PUT. */
  parts?: number[];
  /** The ETag the target ends up with, when known in advance. */
  etag?: string;
}

export function layoutOf(row: Pick<ObjectRow, 'size' | 'etag' | 'parts'>): Layout {
  if (!row.etag.includes('-') && row.size <= MAX_PUT_BYTES) return { etag: row.etag };
  if (row.parts?.length && row.parts.reduce((a, b) => a + b, 0) === row.size) return { parts: row.parts, etag: row.etag };
  const partBytes = Math.max(FALLBACK_PART_BYTES, Math.ceil(row.size / MAX_PARTS));
  const parts: number[] = [];
  for (let left = row.size; left > 0; left -= partBytes) parts.push(Math.min(partBytes, left));
  return { parts: parts.length ? parts : [0] };
}

/** The target's copy is the source's: same size, and the ETag it must have (or, without one, a multipart ETag of as many parts). */
function alreadyThere(there: { size: number; etag: string } | undefined, size: number, layout: Layout): boolean {
  if (!there || there.size !== size) return false;
  if (layout.etag !== undefined) return there.etag === layout.etag;
  return there.etag.endsWith(`-${layout.parts!.length}`);
}

const unquote = (etag: string | undefined) => (etag ?? '').replaceAll('"', '');

/** A stream's bytes through an MD5. */
function md5Tap(): { tap: Transform; digest: () => string } {
  const hash = createHash('md5');
  const tap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  return { tap, digest: () => hash.digest('hex') };
}

/** The embedded store's index, read-only, a page at a time (no long read transaction: a running server checkpoints meanwhile). */
class IndexReader {
  readonly #db: Database;
  readonly #q;
  constructor(objectsDir: string) {
    const file = path.join(objectsDir, '.wharf', 'index.db');
    if (!fs.existsSync(file)) {
      throw new MigrateObjectsError(
        `no embedded store at ${objectsDir} (no .wharf/index.db there): is the data dir right? (--data-dir, or --objects-dir when objects_dir was set)`,
      );
    }
    const columns = 'bucket, key, blob, size, etag, last_modified, meta, parts';
    try {
      this.#db = openDatabase(file, { mustExist: true, readonly: true });
      this.#q = {
        buckets: this.#db.prepare('SELECT name FROM buckets ORDER BY name').pluck(),
        page: this.#db.prepare(`SELECT ${columns} FROM objects WHERE bucket = ? AND key > ? ORDER BY key LIMIT ${PAGE}`),
        row: this.#db.prepare(`SELECT ${columns} FROM objects WHERE bucket = ? AND key = ?`),
        count: this.#db.prepare('SELECT count(*) FROM objects WHERE bucket = ?').pluck(),
      };
    } catch (err) {
      throw new MigrateObjectsError(`cannot read the embedded store's index ${file}: ${(err as Error).message}`);
    }
  }
  buckets(): string[] {
    return this.#q.buckets.all() as string[];
  }
  page(bucket: string, after: string): ObjectRow[] {
    return (this.#q.page.all(bucket, after) as RawObject[]).map(toRow);
  }
  row(bucket: string, key: string): ObjectRow | undefined {
    const r = this.#q.row.get(bucket, key) as RawObject | undefined;
    return r && toRow(r);
  }
  count(bucket: string): number {
    return Number(this.#q.count.get(bucket));
  }
  close(): void {
    this.#db.close();
  }
}

/** An object's file, open for reading, and the streams reading it. */
interface OpenBlob {
  handle: fsp.FileHandle;
  streams: (Readable | Transform)[];
}

/** Thrown for an object that went from the embedded store while being read. */
class Vanished extends Error {}

/** One object that cannot be copied: said with its key, the others go on. */
class ObjectFailure extends Error {}

/** The apps of the database with their buckets, or undefined when it has no storage tables yet. */
async function appsOf(db: DbHandle): Promise<{ id: string; bucket: string }[] | undefined> {
  try {
    const rows = await db.all<{ id: string; bucket_name: string }>('SELECT id, bucket_name FROM storage_apps WHERE deleting = 0 ORDER BY bucket_name');
    return rows.map((r) => ({ id: r.id, bucket: r.bucket_name }));
  } catch {
    return undefined;
  }
}

/**
 * Every file record of every app looked for in what the S3 store holds: the buckets copied (their
 * keys known from the copy), the others (an app made elsewhere) listed.
 */
async function checkRecords(
  db: DbHandle,
  apps: { id: string; bucket: string }[] | undefined,
  held: Map<string, Set<string>>,
  list: (bucket: string) => Promise<Set<string>>,
): Promise<RecordsCheck> {
  if (!apps) return { checked: false, apps: 0, files: 0, missing: [] };
  const check: RecordsCheck = { checked: true, apps: apps.length, files: 0, missing: [] };
  for (const app of apps) {
    const keys = await db.all<{ key: string }>('SELECT key FROM storage_files WHERE app_id = ? ORDER BY key', [app.id]);
    check.files += keys.length;
    if (!keys.length) continue;
    let there = held.get(app.bucket);
    if (!there) {
      try {
        there = await list(app.bucket);
      } catch (err) {
        if (!(err instanceof StoreError && err.failure === 'not_found')) throw err;
        there = new Set();
      }
    }
    for (const { key } of keys) if (!there.has(key)) check.missing.push({ bucket: app.bucket, key });
  }
  return check;
}

export async function migrateObjects(options: MigrateObjectsOptions): Promise<MigrateObjectsResult> {
  const started = performance.now();
  const { s3, signal } = options;
  if (!s3.endpoint) {
    throw new MigrateObjectsError(
      'no target store: set endpoint, access_key and secret_key in [plugins.storage.s3] (or WHARF_PLUGINS__STORAGE__S3__ENDPOINT and the like), the store the new instances use',
    );
  }
  const objectsDir = path.resolve(options.objectsDir);
  const index = new IndexReader(objectsDir);
  const server = runningServer(options.dataDir);
  const endpoint = s3.endpoint.replace(/\/+$/, '');
  const driver = createS3Driver(s3);
  // Requests with a body are retried here (a stream is read once): the SDK tries them once.
  const client = new S3Client(clientConfig(s3, endpoint));
  // Its failures are ours to report (the SDK would also warn of each on the console).
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const once = new S3Client({ ...clientConfig(s3, endpoint), maxAttempts: 1, logger: quiet });
  let db: DbHandle | undefined;
  const result: MigrateObjectsResult = {
    source: objectsDir,
    target: endpoint,
    buckets: [],
    objects: 0,
    copied: 0,
    skipped: 0,
    failed: 0,
    vanished: 0,
    bytes: 0,
    ms: 0,
    failures: [],
    interrupted: false,
    ...(server ? { serverRunning: { pid: server.pid, url: server.url } } : {}),
  };
  try {
    try {
      await driver.ping();
    } catch (err) {
      const e = err as StoreError;
      const why =
        e.failure === 'denied'
          ? 'it refused the credentials of [plugins.storage.s3]'
          : e.failure === 'unavailable'
            ? 'it does not answer'
            : 'it answered an error';
      throw new MigrateObjectsError(`cannot use the S3 store at ${endpoint}: ${why} (${e.message})`);
    }
    const send = async <T>(doing: string, run: () => Promise<T>): Promise<T> => {
      try {
        return await run();
      } catch (err) {
        throw classify(err, doing);
      }
    };

    /** A body-carrying request, tried s3.max_attempts times when the store is unavailable; each `attempt` makes a fresh body. */
    async function withRetries<T>(doing: string, attempt: () => Promise<T>): Promise<T> {
      for (let n = 1; ; n++) {
        try {
          return await attempt();
        } catch (err) {
          const e = err instanceof ObjectFailure ? err : classify(err, doing);
          if (signal?.aborted || !(e instanceof StoreError) || e.failure !== 'unavailable' || n >= s3.max_attempts) throw e;
          await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** n));
        }
      }
    }

    /** The target's objects of a bucket: key -> size and ETag. */
    async function targetObjects(bucket: string): Promise<Map<string, { size: number; etag: string }>> {
      const there = new Map<string, { size: number; etag: string }>();
      let token: string | undefined;
      do {
        const page = await send(`listing objects of ${bucket}`, () =>
          client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }), { abortSignal: signal }),
        );
        for (const o of page.Contents ?? []) if (o.Key !== undefined) there.set(o.Key, { size: o.Size ?? 0, etag: unquote(o.ETag) });
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return there;
    }

    /** Aborts the unfinished multipart uploads of `key` (left by an interrupted run). */
    async function abortLeftovers(bucket: string, key: string): Promise<void> {
      const page = await send(`listing unfinished uploads of ${key}`, () =>
        client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: key }), { abortSignal: signal }),
      );
      for (const u of page.Uploads ?? []) {
        if (u.Key !== key) continue;
        await send(`aborting an unfinished upload of ${key}`, () =>
          client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u.UploadId })),
        );
      }
    }

    /**
     * Bytes `start` .. `start + size` of an object's file, as a request body: `tap` sees them on the
     * way. Each stream is recorded in `open`, to be destroyed before the file closes (a request
     * abandoned midway leaves its body behind).
     */
    function bodyOf(file: OpenBlob, start: number, size: number, tap?: Transform): Buffer | Readable {
      if (size === 0) return Buffer.alloc(0);
      const stream = file.handle.createReadStream({ start, end: start + size - 1, autoClose: false });
      file.streams.push(stream);
      if (!tap) return stream;
      stream.once('error', (err) => tap.destroy(err));
      file.streams.push(tap);
      return stream.pipe(tap);
    }

    async function putWhole(row: ObjectRow, file: OpenBlob): Promise<void> {
      const out = await withRetries(`copying "${row.key}"`, () =>
        once.send(
          new PutObjectCommand({
            Bucket: row.bucket,
            Key: row.key,
            Body: bodyOf(file, 0, row.size),
            ContentLength: row.size,
            // The store checks the bytes against the MD5 the embedded store recorded for them.
            ContentMD5: Buffer.from(row.etag, 'hex').toString('base64'),
            ...objectHeaders(row),
          }),
          { abortSignal: signal },
        ),
      );
      if (unquote(out.ETag) !== row.etag) throw new ObjectFailure(`the store answered ETag ${unquote(out.ETag)}, not ${row.etag}`);
    }

    async function putParts(row: ObjectRow, file: OpenBlob, layout: Layout): Promise<void> {
      await abortLeftovers(row.bucket, row.key);
      // Not cut by the signal: a create the store carried out but whose answer was abandoned would
      // leave an upload nobody knows the id of. Once it answers, an interruption aborts it below.
      const created = await send(`starting the upload of "${row.key}"`, () =>
        client.send(new CreateMultipartUploadCommand({ Bucket: row.bucket, Key: row.key, ...objectHeaders(row) })),
      );
      const uploadId = created.UploadId!;
      try {
        signal?.throwIfAborted();
        const md5s: string[] = [];
        let offset = 0;
        for (const [i, size] of layout.parts!.entries()) {
          const start = offset;
          const md5 = await withRetries(`copying part ${i + 1} of "${row.key}"`, async () => {
            const { tap, digest } = md5Tap();
            const body = bodyOf(file, start, size, tap);
            const out = await once.send(
              new UploadPartCommand({ Bucket: row.bucket, Key: row.key, UploadId: uploadId, PartNumber: i + 1, Body: body, ContentLength: size }),
              { abortSignal: signal },
            );
            const sent = size === 0 ? createHash('md5').digest('hex') : digest();
            if (unquote(out.ETag) !== sent)
              throw new ObjectFailure(`part ${i + 1}: the store answered ETag ${unquote(out.ETag)} for bytes whose MD5 is ${sent}`);
            return sent;
          });
          md5s.push(md5);
          offset += size;
        }
        if (layout.etag !== undefined && multipartEtag(md5s) !== layout.etag) {
          throw new ObjectFailure(`its bytes on disk do not match the ETag the embedded store recorded (${layout.etag}): not copied`);
        }
        // The ETag it ends with is checked by the HEAD that follows (Ceph RGW answers this one without it).
        await send(`completing the upload of "${row.key}"`, () =>
          client.send(
            new CompleteMultipartUploadCommand({
              Bucket: row.bucket,
              Key: row.key,
              UploadId: uploadId,
              MultipartUpload: { Parts: md5s.map((m, i) => ({ PartNumber: i + 1, ETag: `"${m}"` })) },
            }),
          ),
        );
      } catch (err) {
        await client.send(new AbortMultipartUploadCommand({ Bucket: row.bucket, Key: row.key, UploadId: uploadId })).catch(() => undefined);
        throw err;
      }
    }

    /** Copies one object unless the target has it (re-reading its row when its blob went: the old server replaced or deleted it). */
    async function copy(first: ObjectRow, there: Map<string, { size: number; etag: string }>): Promise<'copied' | 'skipped'> {
      let row: ObjectRow | undefined = first;
      let handle: fsp.FileHandle | undefined;
      while (!handle) {
        try {
          handle = await fsp.open(blobPath(objectsDir, row.bucket, row.blob), 'r');
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ObjectFailure(`cannot read its bytes: ${(err as Error).message}`);
          const now = index.row(row.bucket, row.key);
          if (!now || now.blob === row.blob) throw new Vanished();
          row = now;
        }
      }
      const file: OpenBlob = { handle, streams: [] };
      try {
        const onDisk = (await handle.stat()).size;
        if (onDisk !== row.size) throw new ObjectFailure(`its file has ${onDisk} bytes, the index says ${row.size}: not copied`);
        const layout = layoutOf(row);
        if (alreadyThere(there.get(row.key), row.size, layout)) return 'skipped';
        if (layout.parts) await putParts(row, file, layout);
        else await putWhole(row, file);
      } finally {
        for (const stream of file.streams) stream.destroy();
        await handle.close();
      }
      const head = await send(`checking "${row.key}"`, () => client.send(new HeadObjectCommand({ Bucket: row.bucket, Key: row.key })));
      const copied = { size: head.ContentLength ?? -1, etag: unquote(head.ETag) };
      if (!alreadyThere(copied, row.size, layoutOf(row))) {
        throw new ObjectFailure(`after the copy the store holds ${copied.size} bytes with ETag ${copied.etag}, not ${row.size} bytes with ETag ${row.etag}`);
      }
      there.set(row.key, copied);
      result.bytes += row.size;
      return 'copied';
    }

    const concurrency = Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY);
    try {
      db = await options.database?.();
    } catch (err) {
      throw new MigrateObjectsError(`cannot open the database of this config (its file records are checked against the S3 store): ${(err as Error).message}`);
    }
    const apps = db && (await appsOf(db));
    /** What the S3 store holds of each bucket, after the copy: keys only, for the records check. */
    const held = new Map<string, Set<string>>();
    for (const bucket of index.buckets()) {
      if (signal?.aborted) break;
      const summary: BucketSummary = { bucket, objects: index.count(bucket), copied: 0, skipped: 0, failed: 0, bytes: 0 };
      result.buckets.push(summary);
      result.objects += summary.objects;
      try {
        await driver.createBucket(bucket);
      } catch (err) {
        // The store may say the name is taken when it is this key's own bucket (BucketAlreadyExists).
        try {
          await driver.checkBucket(bucket);
        } catch {
          throw new MigrateObjectsError(`cannot create bucket ${bucket} in ${endpoint}: ${(err as Error).message}`);
        }
      }
      const there = await targetObjects(bucket);
      const bytesBefore = result.bytes;
      let after = '';
      for (let page = index.page(bucket, after); page.length && !signal?.aborted; page = index.page(bucket, after)) {
        after = page[page.length - 1]!.key;
        let next = 0;
        const worker = async () => {
          while (next < page.length && !signal?.aborted) {
            const row = page[next++]!;
            try {
              const outcome = await copy(row, there);
              summary[outcome]++;
              result[outcome]++;
            } catch (err) {
              if (err instanceof Vanished) {
                result.vanished++;
                continue;
              }
              if (signal?.aborted) return;
              summary.failed++;
              result.failed++;
              result.failures.push({ bucket, key: row.key, reason: err instanceof Error ? err.message : String(err) });
            }
          }
        };
        await Promise.all(Array.from({ length: Math.min(concurrency, page.length) }, worker));
      }
      summary.bytes = result.bytes - bytesBefore;
      if (apps) held.set(bucket, new Set(there.keys()));
    }
    result.interrupted = signal?.aborted ?? false;
    if (db && !result.interrupted) result.records = await checkRecords(db, apps, held, async (bucket) => new Set((await targetObjects(bucket)).keys()));
    result.ms = Math.round(performance.now() - started);
    return result;
  } catch (err) {
    if (signal?.aborted) {
      result.interrupted = true;
      result.ms = Math.round(performance.now() - started);
      return result;
    }
    if (err instanceof MigrateObjectsError) throw err;
    if (err instanceof StoreError) throw new MigrateObjectsError(`${endpoint}: ${err.message}`);
    throw err;
  } finally {
    index.close();
    await db?.close();
    driver.close();
    client.destroy();
    once.destroy();
  }
}
