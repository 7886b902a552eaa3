/**
 * An app's storage limit as a quota: what counts against it, per driver, and the policy the `fs`
 * driver's endpoint admits every write against.
 *
 * - `fs` (the driver counts usage live): the bucket's real bytes (objects, parts of unfinished
 *   multipart uploads, writes in flight) plus phase-1 reservations not yet covered by their
 *   object. Every write path of the endpoint is refused before its body is stored when it would
 *   go over; records follow every change to an object (new size, or removed).
 * - `s3` (the store cannot refuse what it is sent directly): recorded bytes, plus objects a
 *   reconciliation found with neither a record nor an unfinished upload (./reconcile.ts), plus
 *   reservations. Wharf's own paths (phase 1, register, complete) are refused when they would go over.
 */
import type { Logger } from '../../core/logger.ts';
import type { QuotaPolicy, StorageDriver } from './drivers/types.ts';
import type { AppState, SizeChange, StorageStore } from './store.ts';

/** An app's usage as GET /api/apps shows it, beside the spec's App fields. */
export interface AppUsage {
  /** Bytes of the registered files (their records). */
  storedBytes: number;
  /** Registered files. */
  fileCount: number;
  /** Objects in the bucket with neither a record nor an unfinished upload at their key, and their bytes. */
  unregisteredBytes: number;
  unregisteredCount: number;
  /**
   * Bytes of the parts of unfinished multipart uploads: they count against the limit until the
   * upload is completed or aborted. Null where usage is not counted live (s3: not listed).
   */
  pendingBytes: number | null;
  /** Everything counted against storageLimit now (see the module comment). */
  usedBytes: number;
  /** When the unregistered figures were measured: now on a live driver, the last reconciliation otherwise (null before the first). */
  usageCheckedAt: string | null;
}

/** What counts against an app's limit, in two parts: reservations not yet covered by an object, and everything else. */
export interface Measured {
  /** Stored, unregistered, in multipart parts or being written. */
  stored: number;
  /** Reserved by unfinished phase-1 uploads beyond what is already at their keys. */
  reserved: number;
}

export class AppQuotas implements QuotaPolicy {
  readonly #store: StorageStore;
  readonly #log: Logger;
  /** Records following object changes, in order (never rejects). */
  #following: Promise<void> = Promise.resolve();

  constructor(store: StorageStore, log: Logger) {
    this.#store = store;
    this.#log = log;
  }

  // ------------------------------------------------------------------ what the fs driver asks

  async limitOf(bucket: string): Promise<{ limit: number; reservations: ReadonlyMap<string, number> } | undefined> {
    const app = await this.#store.appOfBucket(bucket);
    if (!app || app.storageLimit === null) return undefined;
    return { limit: app.storageLimit, reservations: await this.#store.reservations(app.id, new Date().toISOString()) };
  }

  objectsChanged(bucket: string, changes: readonly SizeChange[]): Promise<void> {
    // One after the other, in the order the objects changed, so a record ends with the last size.
    this.#following = this.#following.then(() => this.#follow(bucket, changes));
    return this.#following;
  }

  async #follow(bucket: string, changes: readonly SizeChange[]): Promise<void> {
    try {
      const app = await this.#store.appOfBucket(bucket);
      if (app) await this.#store.followObjects(app.id, changes);
    } catch (err) {
      // The object is written whatever happens here; the record keeps its size until the object changes again.
      this.#log.error({ err, bucket, keys: changes.length }, 'could not bring file records in line with their objects');
    }
  }

  /** Waits until records have followed every object change reported so far. */
  settle(): Promise<void> {
    return this.#following;
  }

  // ------------------------------------------------------------------ what the service asks

  /** What counts against the app's limit now; `reservations` are its unfinished uploads (key -> bytes). Synchronous. */
  measure(app: AppState, driver: StorageDriver, reservations: ReadonlyMap<string, number>): Measured {
    if (driver.live) {
      const usage = driver.live.usage(app.bucketName, reservations);
      return { stored: usage.bytes - usage.reservedBytes, reserved: usage.reservedBytes };
    }
    let reserved = 0;
    for (const size of reservations.values()) reserved += size;
    return { stored: app.storedBytes + app.unregisteredBytes, reserved };
  }

  /** The usage fields of an app. */
  async usage(app: AppState, driver: StorageDriver): Promise<AppUsage> {
    const recorded = { storedBytes: app.storedBytes, fileCount: app.fileCount };
    const reservations = await this.#store.reservations(app.id, new Date().toISOString());
    if (!driver.live) {
      const { stored, reserved } = this.measure(app, driver, reservations);
      return {
        ...recorded,
        unregisteredBytes: app.unregisteredBytes,
        unregisteredCount: app.unregisteredCount,
        pendingBytes: null,
        usedBytes: stored + reserved,
        usageCheckedAt: app.usageCheckedAt,
      };
    }
    const usage = driver.live.usage(app.bucketName, reservations);
    // Objects of unfinished uploads are awaiting `complete`, not unregistered.
    let awaitingBytes = 0;
    let awaitingCount = 0;
    for (const key of reservations.keys()) {
      const size = driver.live.objectSize(app.bucketName, key);
      if (size === undefined) continue;
      awaitingBytes += size;
      awaitingCount++;
    }
    return {
      ...recorded,
      unregisteredBytes: Math.max(0, usage.objectBytes - app.storedBytes - awaitingBytes),
      unregisteredCount: Math.max(0, usage.objects - app.fileCount - awaitingCount),
      pendingBytes: usage.partBytes,
      usedBytes: usage.bytes,
      usageCheckedAt: new Date().toISOString(),
    };
  }
}
