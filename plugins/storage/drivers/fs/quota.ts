/**
 * The storage limit on the embedded endpoint: every write through an app key or a presigned URL
 * is admitted before its body is read, and refused (403 `QuotaExceeded`) when it would take the
 * bucket over its app's limit. What counts against the limit:
 *
 *   objects + parts of unfinished multipart uploads     (the index's counters)
 * + phase-1 reservations, less the bytes already at their key   (from the storage plugin)
 * + writes in flight: what each adds over what is already counted where it lands
 *
 * Writes in flight are held here, in memory, from admission until their commit (or failure): the
 * app's limit and reservations are read from the database first, then the check and the hold
 * happen in one synchronous step, so concurrent writers cannot together pass the limit. A hold's
 * size is re-read against the index on every check rather than frozen at admission, so a key
 * deleted or overwritten by a smaller object meanwhile never makes room that the write in flight
 * will take back. The root key is not limited. The fs driver is single-node,
 * so in-process is the whole truth.
 */
import type { BucketUsage, QuotaPolicy } from '../types.ts';
import type { Principal } from './auth.ts';
import { type ObjectStore, S3Error } from './objects.ts';

/** How far ahead a body of unknown length is admitted at a time, so not every chunk asks. */
const METER_STEP = 1024 * 1024;

/** Where a write lands: it counts only the bytes it adds over what is counted there already. */
export type WriteSlot =
  /** PutObject, CopyObject: the object at `key` (an overwrite counts the difference). */
  | { kind: 'object'; key: string }
  /** UploadPart (and UploadPartCopy): part `part` of upload `upload` (a re-sent part counts the difference). */
  | { kind: 'part'; upload: string; part: number }
  /** CompleteMultipartUpload: the object at `key`, made of upload `upload`'s parts, which then go. */
  | { kind: 'complete'; key: string; upload: string };

/** Bytes admitted for one write while it runs. */
export interface QuotaHold {
  /** Passes the body through, asking for more bytes when it outgrows what was admitted; throws `QuotaExceeded` when refused. */
  meter(body: AsyncIterable<Buffer>): AsyncIterable<Buffer>;
  /** Ends the hold: the write committed (its bytes now count in the index) or failed. Idempotent. */
  release(): void;
}

const quotaExceeded = (limit: number, used: number, adds: number) =>
  new S3Error(
    'QuotaExceeded',
    403,
    `The bucket's storage limit of ${limit} bytes would be exceeded: ${used} bytes are stored, reserved or being written, and this request adds ${adds}.`,
  );

const UNLIMITED: QuotaHold = {
  meter: (body) => body,
  release() {},
};

class Hold implements QuotaHold {
  readonly quota: BucketQuota;
  readonly bucket: string;
  readonly slot: WriteSlot;
  /** Bytes admitted so far. */
  bytes = 0;
  #released = false;

  constructor(quota: BucketQuota, bucket: string, slot: WriteSlot) {
    this.quota = quota;
    this.bucket = bucket;
    this.slot = slot;
  }

  async *meter(body: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
    let seen = 0;
    for await (const chunk of body) {
      seen += chunk.length;
      if (seen > this.bytes) await this.quota.grow(this, seen);
      yield chunk;
    }
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.quota.drop(this);
  }
}

export class BucketQuota {
  readonly #store: ObjectStore;
  readonly #policy: QuotaPolicy | undefined;
  /** Writes in flight per bucket. */
  readonly #holds = new Map<string, Set<Hold>>();

  /** Without a policy (a stand-alone endpoint) nothing is limited. */
  constructor(store: ObjectStore, policy: QuotaPolicy | undefined) {
    this.#store = store;
    this.#policy = policy;
  }

  /**
   * Admits a write of `bytes` (undefined: unknown yet, counted as the body streams) into
   * `bucket`, or throws `QuotaExceeded`. The caller releases the hold once the write has
   * committed or failed.
   */
  async admit(principal: Principal, bucket: string, slot: WriteSlot, bytes: number | undefined): Promise<QuotaHold> {
    if (!this.#policy || principal.kind === 'root') return UNLIMITED;
    const hold = new Hold(this, bucket, slot);
    this.#set(hold, bytes ?? 0, await this.#policy.limitOf(bucket));
    let holds = this.#holds.get(bucket);
    if (!holds) this.#holds.set(bucket, (holds = new Set()));
    holds.add(hold);
    return hold;
  }

  /**
   * Runs one write under a hold: admits `bytes` at `slot` (or throws `QuotaExceeded` before
   * `write` starts), then releases the hold once `write` has settled, committed or failed. The
   * one call each write path of the endpoint makes; `write` streams its body through `hold.meter`.
   */
  async write<T>(principal: Principal, bucket: string, slot: WriteSlot, bytes: number | undefined, write: (hold: QuotaHold) => Promise<T>): Promise<T> {
    const hold = await this.admit(principal, bucket, slot, bytes);
    try {
      return await write(hold);
    } finally {
      hold.release();
    }
  }

  /**
   * Bytes counted against the bucket's limit (objects, parts, `reservations` not yet covered by
   * their object, writes in flight), with the objects alone.
   */
  usage(bucket: string, reservations: ReadonlyMap<string, number>): BucketUsage {
    const held = this.#store.bucketBytes(bucket);
    return {
      bytes: this.#used(bucket, reservations, undefined),
      reservedBytes: this.#uncovered(bucket, reservations),
      objects: held.objects,
      objectBytes: held.objectBytes,
      partBytes: held.partBytes,
    };
  }

  /** A metered body outgrew its hold: a step ahead if that fits, else exactly what it has sent. */
  async grow(hold: Hold, seen: number): Promise<void> {
    const limits = await this.#policy?.limitOf(hold.bucket);
    try {
      this.#set(hold, seen + METER_STEP, limits);
    } catch (err) {
      if (!(err instanceof S3Error) || err.code !== 'QuotaExceeded') throw err;
      this.#set(hold, seen, limits);
    }
  }

  drop(hold: Hold): void {
    const holds = this.#holds.get(hold.bucket);
    holds?.delete(hold);
    if (holds?.size === 0) this.#holds.delete(hold.bucket);
  }

  /** Sets a hold's bytes when the bucket has room for what that adds under `limits` (just read); throws QuotaExceeded otherwise. */
  #set(hold: Hold, bytes: number, limits: Awaited<ReturnType<QuotaPolicy['limitOf']>>): void {
    if (limits) {
      const adds = this.#adds(hold.bucket, hold.slot, bytes, limits.reservations);
      if (adds > 0) {
        const used = this.#used(hold.bucket, limits.reservations, hold);
        if (used + adds > limits.limit) throw quotaExceeded(limits.limit, used, adds);
      }
    }
    hold.bytes = bytes;
  }

  /** What a write of `bytes` at `slot` adds to what is counted now (never less than nothing). */
  #adds(bucket: string, slot: WriteSlot, bytes: number, reservations: ReadonlyMap<string, number>): number {
    if (slot.kind === 'part') return Math.max(0, bytes - this.#store.partSize(slot.upload, slot.part));
    const counted = Math.max(this.#store.objectSize(bucket, slot.key), reservations.get(slot.key) ?? 0);
    const freed = slot.kind === 'complete' ? this.#store.uploadBytes(slot.upload) : 0;
    return Math.max(0, bytes - counted - freed);
  }

  /** Bytes of reservations beyond what is already at their keys. */
  #uncovered(bucket: string, reservations: ReadonlyMap<string, number>): number {
    let bytes = 0;
    for (const [key, size] of reservations) bytes += Math.max(0, size - this.#store.objectSize(bucket, key));
    return bytes;
  }

  #used(bucket: string, reservations: ReadonlyMap<string, number>, except: Hold | undefined): number {
    const held = this.#store.bucketBytes(bucket);
    let used = held.objectBytes + held.partBytes + this.#uncovered(bucket, reservations);
    for (const hold of this.#holds.get(bucket) ?? []) {
      if (hold !== except) used += this.#adds(bucket, hold.slot, hold.bytes, reservations);
    }
    return used;
  }
}
