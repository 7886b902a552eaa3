/**
 * What the storage plugin needs from a place that keeps objects. Written in terms of buckets,
 * keys, sizes and presigned URLs, not of one SDK's commands: the `s3` driver implements it with
 * the AWS SDK, the embedded `fs` driver will implement it on local disk behind its own
 * S3-compatible endpoint. Every method reports store failures as a {@link StoreError}.
 */

/** Why a store operation failed, in terms the routes can answer with. */
export type StoreFailure =
  /** The store cannot be reached, timed out or answered 5xx: try again later. */
  | 'unavailable'
  /** The driver lacks configuration: nothing can work until an operator sets it. */
  | 'unconfigured'
  /** The store refused the server's credentials or their permissions. */
  | 'denied'
  /** The bucket or object does not exist. */
  | 'not_found'
  /** The store refused for another reason (a name taken, a bucket not empty, ...). */
  | 'failed';

export class StoreError extends Error {
  readonly failure: StoreFailure;
  constructor(failure: StoreFailure, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.failure = failure;
  }
}

/** The connection details an app's API token holder gets (the spec's StorageConfig). */
export interface StorageConnection {
  endPoint: string;
  port: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
}

export interface ObjectInfo {
  /** Bytes. */
  size: number;
  /** When it was last written, in milliseconds since the epoch, when the store says. */
  lastModified?: number;
}

/** One object as a bucket listing gives it. */
export interface ListedObject {
  key: string;
  size: number;
}

/**
 * What the storage plugin tells a driver that enforces app storage limits on the writes it serves
 * itself (the `fs` driver's endpoint). The limit is read from the database (async); the driver
 * then checks and holds bytes in one synchronous step.
 */
export interface QuotaPolicy {
  /**
   * The limit of an app's bucket and the phase-1 uploads counting against it (key -> bytes
   * reserved), or undefined when the bucket is unlimited or no app's.
   */
  limitOf(bucket: string): Promise<{ limit: number; reservations: ReadonlyMap<string, number> } | undefined>;
  /**
   * Objects of a bucket were written (new size) or removed (undefined), by anyone: records follow,
   * in the order of the changes; resolves once they have (the driver answers the write then).
   * Never rejects.
   */
  objectsChanged(bucket: string, changes: readonly { key: string; size: number | undefined }[]): Promise<void>;
}

/** A bucket's usage as a driver that counts it live reports it. */
export interface BucketUsage {
  /** Everything counted against the limit: objects, unfinished multipart parts, reservations not yet covered by their object, writes in flight. */
  bytes: number;
  /** The part of `bytes` that is reservations not yet covered by their object. */
  reservedBytes: number;
  /** Objects in the bucket. */
  objects: number;
  /** Bytes of those objects. */
  objectBytes: number;
  /** Bytes of the parts of unfinished multipart uploads (counted in `bytes` until completed or aborted). */
  partBytes: number;
}

/**
 * What a driver that counts usage live and enforces limits on every write it serves (`fs`)
 * offers. Synchronous, so a caller can read, check and record in one step.
 */
export interface LiveUsage {
  /** The bucket's usage now, counting `reservations` (key -> bytes) not yet covered by their object. */
  usage(bucket: string, reservations: ReadonlyMap<string, number>): BucketUsage;
  /** An object's size now, or undefined when it does not exist. */
  objectSize(bucket: string, key: string): number | undefined;
}

export interface DeleteOutcome {
  /** Keys that no longer exist (deleting a missing key counts as deleted). */
  deleted: string[];
  /** Keys the store refused or could not be asked to delete, with the reason. */
  failed: { key: string; reason: string; failure: StoreFailure }[];
}

export interface PresignPut {
  bucket: string;
  key: string;
  /** Exact body length the URL accepts, in bytes. */
  size: number;
  /** Exact Content-Type the uploader must send. */
  contentType: string;
  expiresInSeconds: number;
}

export interface PresignGet {
  bucket: string;
  key: string;
  expiresInSeconds: number;
  /** File name for the download's Content-Disposition. */
  downloadName?: string;
}

export interface StorageDriver {
  /** `s3`, `fs`: for logs. */
  readonly name: string;
  /** Why the driver cannot work (missing configuration), or undefined when it can. */
  readonly problem: string | undefined;
  /** Starts what the driver serves itself (the `fs` driver's S3 endpoint); rejects when it cannot. */
  start?(): Promise<void>;
  /** The address of the S3 endpoint the driver serves itself (`fs`), once started: said on stderr at start-up. */
  readonly publicUrl?: string;
  /** Succeeds when the store answers and accepts the server's credentials. */
  ping(): Promise<void>;
  /** Creates an empty bucket. */
  createBucket(bucket: string): Promise<void>;
  /** Succeeds when the bucket exists and the store answers; `not_found` otherwise. */
  checkBucket(bucket: string): Promise<void>;
  /**
   * Deletes every object of a bucket and abandons its unfinished uploads, reporting each batch
   * of deleted keys to `onDeleted` as it goes (so records can follow; the next batch waits for
   * it). Throws on the first failure, after reporting what was deleted. A missing bucket is empty.
   */
  emptyBucket(bucket: string, onDeleted: (keys: string[]) => void | Promise<void>): Promise<void>;
  /** Removes an empty bucket; a missing bucket is not an error. */
  deleteBucket(bucket: string): Promise<void>;
  /** The object's size, or undefined when it does not exist. */
  statObject(bucket: string, key: string): Promise<ObjectInfo | undefined>;
  /** Calls `onPage` with every object of the bucket, a page at a time in key order (ListObjectsV2), each page after the last one's promise. */
  listObjects(bucket: string, onPage: (objects: ListedObject[]) => void | Promise<void>): Promise<void>;
  /**
   * Present on drivers that count usage live and enforce storage limits on every write (`fs`).
   * Absent (`s3`): the store cannot refuse writes it takes directly, so the storage plugin
   * enforces limits on its own paths and reconciles usage from listings.
   */
  readonly live?: LiveUsage;
  /**
   * Aborts the unfinished multipart uploads older than the driver's configured age (`fs`:
   * `abort_incomplete_uploads_after_days`); absent when nothing expires them. Returns how many.
   */
  expireUploads?(): Promise<number>;
  /** Deletes objects; never throws for a per-key refusal, which is reported in `failed`. */
  deleteObjects(bucket: string, keys: readonly string[]): Promise<DeleteOutcome>;
  /** A URL that accepts one PUT of exactly `size` bytes with `contentType` until it expires. */
  presignPut(request: PresignPut): Promise<string>;
  /** A URL that serves the object until it expires. */
  presignGet(request: PresignGet): Promise<string>;
  /** What a holder of one of the bucket's app tokens uses to reach the store directly. */
  connectionFor(bucket: string): StorageConnection;
  close(): void;
}

/** A driver that lacks configuration: it starts, and every operation names what is missing. */
export function unconfiguredDriver(name: string, problem: string): StorageDriver {
  const fail = (): never => {
    throw new StoreError('unconfigured', problem);
  };
  return {
    name,
    problem,
    ping: async () => fail(),
    createBucket: async () => fail(),
    checkBucket: async () => fail(),
    emptyBucket: async () => fail(),
    deleteBucket: async () => fail(),
    statObject: async () => fail(),
    listObjects: async () => fail(),
    deleteObjects: async () => fail(),
    presignPut: async () => fail(),
    presignGet: async () => fail(),
    connectionFor: () => fail(),
    close() {},
  };
}
