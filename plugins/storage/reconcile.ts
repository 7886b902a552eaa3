/**
 * Usage reconciliation for drivers that do not count usage live (`s3`: clients with the key write
 * to the store directly, and it cannot refuse them). Every `usage_interval_seconds` each app's
 * bucket is listed (ListObjectsV2, 1000 objects a request) and compared with the records, a page
 * at a time:
 *
 * - a record whose object now has another size (overwritten through S3) gets the listed size,
 *   unless it was written after the listing started (it may describe a newer object than the
 *   listing saw);
 * - objects with neither a record nor an unfinished upload at their key are counted, and that
 *   count and its bytes are stored on the app: they show in GET /api/apps and count against the
 *   limit until the next run.
 *
 * Records whose objects are gone are left alone (only DELETE /api/files removes records on s3).
 */
import type { Logger } from '../../core/logger.ts';
import { type StorageDriver, StoreError } from './drivers/types.ts';
import type { StorageStore } from './store.ts';

export class UsageReconciler {
  readonly #store: StorageStore;
  readonly #driver: StorageDriver;
  readonly #log: Logger;
  #running: Promise<void> | undefined;

  constructor(store: StorageStore, driver: StorageDriver, log: Logger) {
    this.#store = store;
    this.#driver = driver;
    this.#log = log;
  }

  /** Whether the driver needs it: one that counts usage live does not. */
  get needed(): boolean {
    return !this.#driver.live;
  }

  /** Reconciles every app; one run at a time (a call during a run gets that run). A bucket that fails is logged and retried next time. */
  run(): Promise<void> {
    this.#running ??= this.#runOnce().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Waits for a run in progress. */
  async settle(): Promise<void> {
    await this.#running;
  }

  async #runOnce(): Promise<void> {
    if (!this.needed || this.#driver.problem) return;
    for (const app of await this.#store.liveApps()) {
      try {
        await this.#reconcile(app);
      } catch (err) {
        this.#log.warn({ err, app: app.id, bucket: app.bucketName }, 'could not reconcile the usage of a bucket; will retry');
        // A store that does not answer will not answer for the next bucket either.
        if (err instanceof StoreError && err.failure === 'unavailable') return;
      }
    }
  }

  async #reconcile(app: { id: string; bucketName: string }): Promise<void> {
    const checkedAt = new Date().toISOString();
    let bytes = 0;
    let count = 0;
    let corrected = 0;
    await this.#driver.listObjects(app.bucketName, async (page) => {
      const keys = page.map((o) => o.key);
      const recorded = await this.#store.filesOfKeys(app.id, keys);
      const reserved = await this.#store.reservedOfKeys(app.id, keys, new Date().toISOString());
      const changed = page.filter((o) => recorded.has(o.key) && recorded.get(o.key) !== o.size);
      if (changed.length) corrected += await this.#store.correctFileSizes(app.id, changed, checkedAt);
      for (const o of page) {
        if (recorded.has(o.key) || reserved.has(o.key)) continue;
        bytes += o.size;
        count++;
      }
    });
    await this.#store.setUnregistered(app.id, { bytes, count, checkedAt });
    if (corrected) this.#log.info({ app: app.id, corrected }, 'file records took the sizes of objects overwritten through S3');
  }
}
