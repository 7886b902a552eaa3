/**
 * The storage plugin's operations, between the routes (which check credentials and bodies) and
 * the store and driver: provisioning and removing apps with their buckets, recording files only
 * once their objects are verified, reserving bytes for uploads, and reaping uploads never
 * completed. Nothing is recorded unless the store has confirmed what the record describes.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../core/db.ts';
import { WharfError } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import type { StoragePluginConfig } from './config.ts';
import { type ObjectInfo, type StorageDriver, StoreError } from './drivers/types.ts';
import { uploadKeys } from './object-keys.ts';
import type { AppQuotas, AppUsage } from './quota.ts';
import type { AppState, Direction, StorageStore } from './store.ts';
import type { App, AppRecord, FileRecord } from './types.ts';

/** Presigned URLs are valid one hour (the spec), upload URLs less when reservations are shorter. */
const URL_TTL_SECONDS = 3600;
/** S3 accepts at most 5 GiB in one PUT; larger objects need multipart uploads. */
export const MAX_PUT_BYTES = 5 * 1024 ** 3;
/** How many objects are checked with the store at once. */
const STAT_CONCURRENCY = 8;
/** Reservations the reaper handles per run. */
const REAP_BATCH = 1000;

export interface FileInput {
  key: string;
  name: string;
  size: number;
  type: string;
}

export interface UploadRequest {
  name: string;
  size: number;
  type: string;
}

export interface PresignedUpload extends UploadRequest {
  key: string;
  presignedUrl: string;
}

/** An app as other plugins get it (the counters stay inside). */
export function appRecord(app: AppState): AppRecord {
  return {
    id: app.id,
    orgId: app.orgId,
    name: app.name,
    bucketName: app.bucketName,
    storageLimit: app.storageLimit,
    createdAt: app.createdAt,
    updatedAt: app.updatedAt,
  };
}

/** The spec's App fields of an app: its organization is `teamId` there. */
export function publicApp(app: AppState): App {
  const { orgId, ...rest } = appRecord(app);
  return { ...rest, teamId: orgId };
}

/** A driver failure as the answer the caller gets: 503 `{error}` saying what the store did. */
export function storeFailure(err: unknown, what: string): WharfError {
  if (!(err instanceof StoreError)) return err instanceof WharfError ? err : new WharfError('internal', 'Internal server error', { cause: err });
  if (err.failure === 'unconfigured') return new WharfError('unavailable', err.message, { cause: err });
  if (err.failure === 'unavailable') return new WharfError('unavailable', `Storage is unreachable; ${what}`, { cause: err, retryAfter: 5 });
  if (err.failure === 'denied') return new WharfError('unavailable', `Storage refused the server's credentials; ${what}`, { cause: err });
  if (err.failure === 'not_found') return new WharfError('unavailable', `The app's bucket is missing from storage; ${what}`, { cause: err });
  return new WharfError('unavailable', `Storage refused the operation; ${what}`, { cause: err });
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** The size the store reports for `f`'s object, when it is the size the caller claims; 400 naming the key otherwise. */
function checkedSize(f: FileInput, size: number | undefined): number {
  if (size === undefined) throw new WharfError('bad_request', `Object "${f.key}" does not exist in the app's bucket; nothing was recorded`);
  if (size !== f.size) throw new WharfError('bad_request', `Object "${f.key}" has ${size} bytes, not ${f.size}; nothing was recorded`);
  return size;
}

function duplicateKey(files: readonly { key: string }[]): string | undefined {
  const seen = new Set<string>();
  for (const f of files) {
    if (seen.has(f.key)) return f.key;
    seen.add(f.key);
  }
  return undefined;
}

/** What another plugin does when an app is deleted, in the deleting transaction (`tx`): nothing outside the database. */
export type AppDeletionListener = (appId: string, tx: Db) => Promise<void>;

export class Storage {
  readonly #store: StorageStore;
  readonly #driver: StorageDriver;
  readonly #config: StoragePluginConfig;
  readonly #log: Logger;
  readonly #quotas: AppQuotas;
  readonly #deletionListeners: AppDeletionListener[] = [];
  #reaping: Promise<void> | undefined;

  constructor(store: StorageStore, driver: StorageDriver, config: StoragePluginConfig, log: Logger, quotas: AppQuotas) {
    this.#store = store;
    this.#driver = driver;
    this.#config = config;
    this.#log = log;
    this.#quotas = quotas;
  }

  get driver(): StorageDriver {
    return this.#driver;
  }

  onAppDeleted(listener: AppDeletionListener): void {
    this.#deletionListeners.push(listener);
  }

  // ---------------------------------------------------------------- apps

  /** Creates the bucket, then the record; a failure leaves neither. */
  async createApp(orgId: string, input: { name: string; storageLimit: number | null }): Promise<AppState> {
    const id = randomUUID();
    const bucketName = `${this.#config.bucket_prefix}${id}`;
    try {
      await this.#driver.createBucket(bucketName);
    } catch (err) {
      // The store may have created it before the answer was lost.
      await this.#driver.deleteBucket(bucketName).catch(() => undefined);
      throw storeFailure(err, 'the app was not created');
    }
    try {
      return await this.#store.insertApp({ id, orgId, name: input.name, bucketName, storageLimit: input.storageLimit, now: new Date().toISOString() });
    } catch (err) {
      await this.#driver
        .deleteBucket(bucketName)
        .catch((e: unknown) => this.#log.error({ err: e, bucket: bucketName }, 'could not remove the bucket of an app that failed to record'));
      throw err;
    }
  }

  /** The app as GET /api/apps shows it: the spec's fields and its usage. */
  async appView(app: AppState): Promise<App & AppUsage> {
    return { ...publicApp(app), ...(await this.#quotas.usage(app, this.#driver)) };
  }

  /** Lowering the limit below the usage is allowed: writes that add bytes are refused until usage falls under it. */
  async updateApp(app: AppState, changes: { name?: string; storageLimit?: number | null }): Promise<AppState> {
    const updated = await this.#store.updateApp({
      id: app.id,
      name: changes.name ?? app.name,
      storageLimit: changes.storageLimit === undefined ? app.storageLimit : changes.storageLimit,
      now: new Date().toISOString(),
    });
    if (!updated) throw new WharfError('not_found', 'App not found');
    return updated;
  }

  /**
   * Empties the bucket (records follow each deleted batch, so none outlives its object), removes
   * it, then deletes the app with its files, uploads and what other plugins keep about it. While
   * this runs the app is invisible to every route; if the store fails, it comes back with the
   * files that are left.
   */
  async deleteApp(app: AppState): Promise<void> {
    if (!(await this.#store.markDeleting(app.id, app.orgId))) throw new WharfError('not_found', 'App not found');
    try {
      for (let attempt = 1; ; attempt++) {
        await this.#driver.emptyBucket(app.bucketName, (keys) => this.#store.deleteFilesByKeys(app.id, keys));
        try {
          await this.#driver.deleteBucket(app.bucketName);
          break;
        } catch (err) {
          // An upload that landed while the bucket was being emptied: empty it again.
          if (attempt >= 3 || !(err instanceof StoreError) || err.failure !== 'failed') throw err;
        }
      }
    } catch (err) {
      await this.#store.unmarkDeleting(app.id);
      throw storeFailure(err, 'the app was not deleted (files already removed from storage are no longer listed)');
    }
    try {
      await this.#store.transaction(async (store) => {
        for (const listener of this.#deletionListeners) await listener(app.id, store.db);
        await store.deleteApp(app.id);
      });
    } catch (err) {
      // The bucket is gone; the app shows again and a second DELETE finishes the job.
      await this.#store.unmarkDeleting(app.id);
      throw err;
    }
  }

  // ---------------------------------------------------------------- files

  async listFiles(app: AppState, query: { search?: string; dir: Direction; page: number; pageSize: number }) {
    const { files, total } = await this.#store.listFiles(app, {
      search: query.search,
      dir: query.dir,
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { files, pagination: { page: query.page, pageSize: query.pageSize, total, totalPages: Math.ceil(total / query.pageSize) } };
  }

  /** Checks every object with the store: it exists and has the size the caller claims. 400 naming the first key that does not. */
  async #verifyObjects(app: AppState, files: readonly FileInput[], what: string): Promise<ObjectInfo[]> {
    const stats = await mapLimit(files, STAT_CONCURRENCY, (f) => this.#driver.statObject(app.bucketName, f.key)).catch((err: unknown) => {
      throw storeFailure(err, what);
    });
    return files.map((f, i) => {
      checkedSize(f, stats[i]?.size);
      return stats[i]!;
    });
  }

  /**
   * Inside the transaction that records `files` (`store` is bound to it): the storage limit. On a
   * driver that counts usage live the sizes are read again here, in the transaction that writes
   * the records, so a write since the check cannot slip a stale size in (later writes update the
   * records themselves once it commits).
   * Recording what adds bytes to the records is refused (413) when the app would then be over its
   * limit; `taken` are the reservations the recording ends. Returns the sizes to record.
   */
  async #checkRecording(
    store: StorageStore,
    app: AppState,
    files: readonly FileInput[],
    stats: readonly ObjectInfo[],
    taken: ReadonlySet<string>,
    now: string,
  ): Promise<number[]> {
    const live = this.#driver.live;
    const sizes = files.map((f, i) => (live ? checkedSize(f, live.objectSize(app.bucketName, f.key)) : stats[i]!.size));
    let adds = 0;
    // s3: objects the last reconciliation counted as unregistered, recorded now.
    let seen = { bytes: 0, count: 0 };
    for (const [i, f] of files.entries()) {
      const previous = await store.fileSize(app.id, f.key);
      adds += sizes[i]! - (previous ?? 0);
      // Written before that listing started (stores give whole seconds): the listing counted it.
      const modified = stats[i]!.lastModified;
      if (
        !live &&
        previous === undefined &&
        !taken.has(f.key) &&
        app.usageCheckedAt !== null &&
        modified !== undefined &&
        modified + 1000 <= Date.parse(app.usageCheckedAt)
      ) {
        seen = { bytes: seen.bytes + sizes[i]!, count: seen.count + 1 };
      }
    }
    if (app.storageLimit !== null && adds > 0) {
      const reservations = await store.reservations(app.id, now);
      for (const key of taken) reservations.delete(key);
      const { stored, reserved } = this.#quotas.measure(app, this.#driver, reservations);
      // Live: the objects are in the bucket already, so the bucket's usage is the usage after.
      const after = live ? stored + reserved : stored + reserved + adds - Math.min(seen.bytes, app.unregisteredBytes);
      if (after > app.storageLimit) {
        throw new WharfError(
          'payload_too_large',
          `Storage limit exceeded: recording these files would bring the app to ${after} bytes, over its limit of ${app.storageLimit}; nothing was recorded`,
        );
      }
    }
    if (seen.count) await store.lessUnregistered(app.id, seen.bytes, seen.count);
    return sizes;
  }

  /**
   * Records files whose objects are already in the bucket (POST /api/files). A key reserved by
   * an unfinished upload is taken over; one whose reservation expired is refused (the reaper owns it).
   */
  async registerFiles(app: AppState, files: readonly FileInput[]): Promise<FileRecord[]> {
    const dup = duplicateKey(files);
    if (dup !== undefined) throw new WharfError('bad_request', `Key "${dup}" appears twice`);
    const stats = await this.#verifyObjects(app, files, 'nothing was recorded');
    const now = new Date().toISOString();
    const recorded = await this.#store.transaction(async (store) => {
      const current = await store.app(app.id);
      if (!current) throw new WharfError('not_found', 'App not found');
      const taken = new Set<string>();
      for (const f of files) {
        const upload = await store.upload(app.id, f.key);
        if (upload && (upload.state !== 'pending' || upload.expires_at <= now)) {
          throw new WharfError('bad_request', `The upload of "${f.key}" expired and its object is being deleted; nothing was recorded`);
        }
        if (upload) taken.add(f.key);
      }
      const sizes = await this.#checkRecording(store, current, files, stats, taken, now);
      return this.#writeRecords(store, app, files, sizes, taken, now);
    });
    await this.#followLive(app, files);
    return recorded;
  }

  /** In the recording transaction: the records, ending the reservations of `taken`. */
  async #writeRecords(
    store: StorageStore,
    app: AppState,
    files: readonly FileInput[],
    sizes: readonly number[],
    taken: ReadonlySet<string>,
    now: string,
  ): Promise<FileRecord[]> {
    const recorded: FileRecord[] = [];
    for (const [i, f] of files.entries()) {
      if (taken.has(f.key)) await store.deleteUpload(app.id, f.key);
      recorded.push(await store.upsertFile({ id: randomUUID(), appId: app.id, key: f.key, name: f.name, size: sizes[i]!, type: f.type, now }));
    }
    return recorded;
  }

  /**
   * After a recording committed, on a driver that counts usage live (fs) and PostgreSQL: the
   * records follow what the objects are now. An object written while the recording's transaction
   * was open told the records before they were visible (SQLite's queries wait for the
   * transaction instead, so there this is not needed).
   */
  async #followLive(app: AppState, files: readonly FileInput[]): Promise<void> {
    const live = this.#driver.live;
    if (!live || this.#store.db.engine !== 'postgres') return;
    await this.#store.followObjects(
      app.id,
      files.map((f) => ({ key: f.key, size: live.objectSize(app.bucketName, f.key) })),
    );
  }

  /** Deletes objects, then the records of the ones the store removed. */
  async deleteFiles(app: AppState, keys: readonly string[]): Promise<void> {
    const unique = [...new Set(keys)];
    const outcome = await this.#driver.deleteObjects(app.bucketName, unique).catch((err: unknown) => {
      throw storeFailure(err, 'nothing was deleted');
    });
    if (outcome.deleted.length) await this.#store.deleteFilesByKeys(app.id, outcome.deleted);
    if (outcome.failed.length) {
      const first = outcome.failed[0]!;
      const kept = `${outcome.failed.length} of ${unique.length} object(s) could not be deleted and keep their records (first "${first.key}")`;
      throw storeFailure(new StoreError(first.failure, first.reason), kept);
    }
  }

  // ---------------------------------------------------------------- uploads

  /** Phase 1: checks the limit, reserves the bytes and keys, then presigns one PUT per file. */
  async reserveUploads(app: AppState, prefix: string | undefined, files: readonly UploadRequest[]): Promise<PresignedUpload[]> {
    const tooBig = files.find((f) => f.size > MAX_PUT_BYTES);
    if (tooBig) throw new WharfError('bad_request', `File "${tooBig.name}" is larger than ${MAX_PUT_BYTES} bytes, the most one presigned PUT accepts`);
    try {
      await this.#driver.checkBucket(app.bucketName);
    } catch (err) {
      throw storeFailure(err, 'no upload was started');
    }
    const ttl = this.#config.reservation_ttl_seconds;
    const urlTtl = Math.min(URL_TTL_SECONDS, ttl);
    const keys = uploadKeys(
      prefix,
      files.map((f) => f.name),
    );
    const planned = files.map((f, i) => ({ ...f, key: keys[i]! }));
    const requested = files.reduce((sum, f) => sum + f.size, 0);
    const started = Date.now();
    const now = new Date(started).toISOString();
    const expiresAt = new Date(started + ttl * 1000).toISOString();
    await this.#store.transaction(async (store) => {
      const current = await store.app(app.id);
      if (!current) throw new WharfError('not_found', 'App not found');
      if (current.storageLimit !== null && requested > 0) {
        const { stored, reserved } = this.#quotas.measure(current, this.#driver, await store.reservations(app.id, now));
        if (stored + reserved + requested > current.storageLimit) {
          throw new WharfError(
            'payload_too_large',
            `Storage limit exceeded: ${stored} bytes stored, ${reserved} reserved by unfinished uploads and ${requested} requested, over the limit of ${current.storageLimit}`,
          );
        }
      }
      await store.insertUploads(app.id, planned, now, expiresAt);
    });
    try {
      return await Promise.all(
        planned.map(async (f) => ({
          key: f.key,
          name: f.name,
          size: f.size,
          type: f.type,
          presignedUrl: await this.#driver.presignPut({ bucket: app.bucketName, key: f.key, size: f.size, contentType: f.type, expiresInSeconds: urlTtl }),
        })),
      );
    } catch (err) {
      await this.#store.deleteUploads(
        app.id,
        planned.map((f) => f.key),
      );
      throw storeFailure(err, 'no upload was started');
    }
  }

  /** Phase 2: every key must be an unfinished upload of this app, and its object must be there with its size; then all are recorded at once. */
  async completeUploads(app: AppState, files: readonly FileInput[]): Promise<FileRecord[]> {
    const dup = duplicateKey(files);
    if (dup !== undefined) throw new WharfError('bad_request', `Key "${dup}" appears twice`);
    const checkReservations = async (store: StorageStore, now: string) => {
      for (const f of files) {
        const upload = await store.upload(app.id, f.key);
        if (upload?.state !== 'pending' || upload.expires_at <= now) {
          throw new WharfError(
            'bad_request',
            `Key "${f.key}" is not an unfinished upload of this app (never issued, already completed, or expired); nothing was recorded`,
          );
        }
        if (upload.size !== f.size) {
          throw new WharfError('bad_request', `Size of "${f.key}" is ${f.size}, but the upload was issued for ${upload.size} bytes; nothing was recorded`);
        }
        if (upload.type !== f.type) {
          throw new WharfError('bad_request', `Type of "${f.key}" is "${f.type}", but the upload was issued for "${upload.type}"; nothing was recorded`);
        }
      }
    };
    await checkReservations(this.#store, new Date().toISOString());
    const stats = await this.#verifyObjects(app, files, 'nothing was recorded');
    const now = new Date().toISOString();
    const recorded = await this.#store.transaction(async (store) => {
      const current = await store.app(app.id);
      if (!current) throw new WharfError('not_found', 'App not found');
      await checkReservations(store, now);
      const keys = new Set(files.map((f) => f.key));
      const sizes = await this.#checkRecording(store, current, files, stats, keys, now);
      return this.#writeRecords(store, app, files, sizes, keys, now);
    });
    await this.#followLive(app, files);
    return recorded;
  }

  async presignDownload(app: AppRecord, file: FileRecord): Promise<string> {
    try {
      return await this.#driver.presignGet({ bucket: app.bucketName, key: file.key, expiresInSeconds: URL_TTL_SECONDS, downloadName: file.name });
    } catch (err) {
      throw storeFailure(err, 'no download URL was made');
    }
  }

  // ---------------------------------------------------------------- reaper

  /**
   * Deletes the objects of expired reservations, then the reservations. A key that has a file
   * record is never deleted. Failures are logged and retried on the next run. One run at a time.
   */
  reap(): Promise<void> {
    this.#reaping ??= this.#reapOnce().finally(() => {
      this.#reaping = undefined;
    });
    return this.#reaping;
  }

  async #reapOnce(): Promise<void> {
    if (this.#driver.problem) return;
    const rows = await this.#store.claimExpired(new Date().toISOString(), REAP_BATCH);
    const byApp = new Map<string, string[]>();
    for (const r of rows) byApp.set(r.app_id, [...(byApp.get(r.app_id) ?? []), r.key]);
    for (const [appId, keys] of byApp) {
      const bucket = await this.#store.bucketOf(appId);
      if (!bucket) continue;
      const recorded: string[] = [];
      for (const k of keys) if (await this.#store.hasFileKey(appId, k)) recorded.push(k);
      const orphans = keys.filter((k) => !recorded.includes(k));
      const outcome = orphans.length ? await this.#driver.deleteObjects(bucket, orphans) : { deleted: [], failed: [] };
      await this.#store.deleteUploads(appId, [...recorded, ...outcome.deleted]);
      if (outcome.failed.length) {
        this.#log.warn({ app: appId, failed: outcome.failed.length, first: outcome.failed[0] }, 'could not delete the objects of expired uploads; will retry');
      } else if (outcome.deleted.length) {
        this.#log.info({ app: appId, deleted: outcome.deleted.length }, 'deleted the objects of expired uploads');
      }
    }
  }

  /** Waits for a reaper run in progress. */
  async settle(): Promise<void> {
    await this.#reaping;
  }
}
