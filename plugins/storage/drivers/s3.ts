/**
 * The `s3` driver: any S3-compatible store through @aws-sdk/client-s3, for the endpoint the
 * server reaches. Presigned URLs are signed (SigV4, the server's credentials) for the public
 * endpoint clients reach, by our own signer: it gives the SDK presigner's URLs for a fraction of
 * the cost (test/plugins/storage/sigv4.test.ts). Checksums are computed only where the API
 * requires them (`WHEN_REQUIRED`), since the SDK's default CRC32 breaks presigned PUTs on
 * Garage and SeaweedFS.
 */
import { contentDisposition } from '../../../core/http.ts';
import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import type { S3Config } from '../config.ts';
import { SigV4Presigner } from './sigv4.ts';
import { type DeleteOutcome, type StorageConnection, type StorageDriver, type StoreFailure, StoreError, unconfiguredDriver } from './types.ts';

/** DeleteObjects takes at most this many keys per request. */
const DELETE_BATCH = 1000;

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

const AUTH_ERRORS = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'AccessDenied', 'InvalidToken', 'ExpiredToken']);

/** Turns an SDK error into a StoreError saying what it means for the caller. */
export function classify(err: unknown, doing: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = (err ?? {}) as SdkError;
  const status = e.$metadata?.httpStatusCode;
  const what = e.name && e.name !== 'Error' ? e.name : (e.code ?? e.message ?? 'error');
  let failure: StoreFailure;
  if (typeof status !== 'number' || status >= 500 || e.name === 'TimeoutError') failure = 'unavailable';
  else if (status === 403 || status === 401 || AUTH_ERRORS.has(e.name ?? '')) failure = 'denied';
  else if (status === 404) failure = 'not_found';
  else failure = 'failed';
  const reason = typeof status === 'number' ? `${what}, HTTP ${status}` : what;
  return new StoreError(failure, `${doing}: ${reason}`, { cause: err });
}

/** The client settings of the store `s3` describes, reached at `endpoint`. */
export function clientConfig(s3: S3Config, endpoint: string): S3ClientConfig {
  return {
    endpoint,
    region: s3.region,
    forcePathStyle: s3.force_path_style,
    credentials: { accessKeyId: s3.access_key!, secretAccessKey: s3.secret_key! },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: s3.max_attempts,
    requestHandler: { connectionTimeout: s3.connect_timeout_ms, requestTimeout: s3.request_timeout_ms },
  };
}

/**
 * How long a bucket HeadBucket found stays checked: phase 1 checks its app's bucket on every
 * request, and HeadBucket through the SDK was about 14 us of CPU per presigned URL of a 100-file
 * request (BENCHMARKS.md, issue 16 part 6). A failure is never kept, and a bucket this driver
 * deletes is forgotten at once; a store that goes away within the window is met by the URLs'
 * PUTs instead (the reservations expire and are reaped as for any upload never completed).
 */
export const BUCKET_CHECK_MS = 2000;

export function createS3Driver(s3: S3Config, options: { clock?: () => number } = {}): StorageDriver {
  const clock = options.clock ?? (() => performance.now());
  if (!s3.endpoint) {
    return unconfiguredDriver(
      's3',
      'Storage is not configured: set endpoint, access_key and secret_key in [plugins.storage.s3] (or WHARF_PLUGINS__STORAGE__S3__ENDPOINT and the like)',
    );
  }
  const endpoint = s3.endpoint.replace(/\/+$/, '');
  const publicEndpoint = (s3.public_endpoint ?? s3.endpoint).replace(/\/+$/, '');
  const client = new S3Client(clientConfig(s3, endpoint));
  const pingBucket = `wharf-ping-${randomBytes(8).toString('hex')}`;
  const publicUrl = new URL(publicEndpoint);
  const signer = new SigV4Presigner({
    credentials: { accessKeyId: s3.access_key!, secretAccessKey: s3.secret_key! },
    region: s3.region,
    forcePathStyle: s3.force_path_style,
  });
  const connection: StorageConnection = {
    endPoint: publicUrl.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: publicUrl.port ? Number(publicUrl.port) : publicUrl.protocol === 'https:' ? 443 : 80,
    useSSL: publicUrl.protocol === 'https:',
    accessKey: s3.public_access_key ?? s3.access_key!,
    secretKey: s3.public_secret_key ?? s3.secret_key!,
  };

  /** Buckets checked within BUCKET_CHECK_MS: bucket -> when (clock). */
  const checked = new Map<string, number>();

  async function send<T>(doing: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw classify(err, doing);
    }
  }

  async function deleteBatch(bucket: string, keys: readonly string[]): Promise<DeleteOutcome> {
    const out = await send(`deleting objects from ${bucket}`, () =>
      client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } })),
    );
    const refused = new Map<string, string>();
    for (const error of out.Errors ?? []) {
      if (error.Key !== undefined && error.Code !== 'NoSuchKey') refused.set(error.Key, `${error.Code ?? 'error'}${error.Message ? `: ${error.Message}` : ''}`);
    }
    return {
      deleted: keys.filter((k) => !refused.has(k)),
      failed: [...refused].map(([key, reason]) => ({ key, reason, failure: reason.startsWith('AccessDenied') ? 'denied' : 'failed' })),
    };
  }

  async function abortUnfinished(bucket: string): Promise<void> {
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await send(`listing unfinished uploads of ${bucket}`, () =>
        client.send(new ListMultipartUploadsCommand({ Bucket: bucket, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker })),
      );
      for (const upload of page.Uploads ?? []) {
        try {
          await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.Key, UploadId: upload.UploadId }));
        } catch (err) {
          const e = classify(err, `aborting the unfinished upload of ${upload.Key}`);
          if (e.failure !== 'not_found') throw e;
        }
      }
      if (!page.IsTruncated) return;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
      if (!keyMarker && !uploadIdMarker) return;
    }
  }

  return {
    name: 's3',
    problem: undefined,

    async ping() {
      // One signed request whose cost does not grow with the number of buckets: listing a bucket
      // that does not exist. NoSuchBucket (or AccessDenied, for a valid key with narrow rights)
      // proves the store answers and accepts the key; a bad key or signature does not.
      try {
        await client.send(new ListObjectsV2Command({ Bucket: pingBucket, MaxKeys: 1 }));
      } catch (err) {
        const name = (err as SdkError).name;
        if (name === 'NoSuchBucket' || name === 'AccessDenied') return;
        throw classify(err, 'reaching the store');
      }
    },

    async createBucket(bucket) {
      try {
        // Outside us-east-1, AWS wants the region named; S3-compatible stores accept their own.
        const location = s3.region === 'us-east-1' ? undefined : { LocationConstraint: s3.region as never };
        await client.send(new CreateBucketCommand({ Bucket: bucket, CreateBucketConfiguration: location }));
      } catch (err) {
        // Our own retry after a lost response: the bucket is ours and new.
        if ((err as SdkError).name === 'BucketAlreadyOwnedByYou') return;
        throw classify(err, `creating bucket ${bucket}`);
      }
    },

    async checkBucket(bucket) {
      const at = checked.get(bucket);
      if (at !== undefined && clock() - at < BUCKET_CHECK_MS) return;
      checked.delete(bucket);
      await send(`checking bucket ${bucket}`, () => client.send(new HeadBucketCommand({ Bucket: bucket })));
      checked.set(bucket, clock());
    },

    async emptyBucket(bucket, onDeleted) {
      try {
        await abortUnfinished(bucket);
        let token: string | undefined;
        for (;;) {
          const page = await send(`listing objects of ${bucket}`, () =>
            client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token, MaxKeys: DELETE_BATCH })),
          );
          const keys = (page.Contents ?? []).map((o) => o.Key).filter((k): k is string => k !== undefined);
          if (keys.length) {
            const outcome = await deleteBatch(bucket, keys);
            if (outcome.deleted.length) await onDeleted(outcome.deleted);
            if (outcome.failed.length) {
              const first = outcome.failed[0]!;
              throw new StoreError(
                first.failure,
                `the store refused to delete ${outcome.failed.length} object(s) of ${bucket}, first "${first.key}" (${first.reason})`,
              );
            }
          }
          if (!page.IsTruncated || !page.NextContinuationToken) return;
          token = page.NextContinuationToken;
        }
      } catch (err) {
        const e = classify(err, `emptying bucket ${bucket}`);
        if (e.failure === 'not_found' && /NoSuchBucket/.test(e.message)) return;
        throw e;
      }
    },

    async deleteBucket(bucket) {
      checked.delete(bucket);
      try {
        await client.send(new DeleteBucketCommand({ Bucket: bucket }));
      } catch (err) {
        const e = classify(err, `deleting bucket ${bucket}`);
        if (e.failure !== 'not_found') throw e;
      }
    },

    async statObject(bucket, key) {
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return { size: head.ContentLength ?? 0, lastModified: head.LastModified?.getTime() };
      } catch (err) {
        const e = classify(err, `checking object "${key}"`);
        // HEAD answers have no body: a missing bucket looks like a missing key, and both mean no object.
        if (e.failure === 'not_found') return undefined;
        throw e;
      }
    },

    async listObjects(bucket, onPage) {
      let token: string | undefined;
      for (;;) {
        const page = await send(`listing objects of ${bucket}`, () => client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token })));
        const objects = (page.Contents ?? []).filter((o) => o.Key !== undefined).map((o) => ({ key: o.Key!, size: o.Size ?? 0 }));
        if (objects.length) await onPage(objects);
        if (!page.IsTruncated || !page.NextContinuationToken) return;
        token = page.NextContinuationToken;
      }
    },

    async deleteObjects(bucket, keys) {
      const outcome: DeleteOutcome = { deleted: [], failed: [] };
      for (let i = 0; i < keys.length; i += DELETE_BATCH) {
        const batch = keys.slice(i, i + DELETE_BATCH);
        try {
          const part = await deleteBatch(bucket, batch);
          outcome.deleted.push(...part.deleted);
          outcome.failed.push(...part.failed);
        } catch (err) {
          const e = classify(err, `deleting objects from ${bucket}`);
          for (const key of keys.slice(i)) outcome.failed.push({ key, reason: e.message, failure: e.failure });
          break;
        }
      }
      return outcome;
    },

    async presignPut({ bucket, key, size, contentType, expiresInSeconds }) {
      // Content-Length and Content-Type are signed: the store refuses another size or type.
      return signer.presign({
        method: 'PUT',
        endpoint: publicUrl,
        bucket,
        key,
        expiresInSeconds,
        headers: { 'content-length': String(size), 'content-type': contentType },
      });
    },

    async presignGet({ bucket, key, expiresInSeconds, downloadName }) {
      return signer.presign({
        method: 'GET',
        endpoint: publicUrl,
        bucket,
        key,
        expiresInSeconds,
        query: downloadName === undefined ? {} : { 'response-content-disposition': contentDisposition('attachment', downloadName) },
      });
    },

    connectionFor() {
      return { ...connection };
    },

    close() {
      client.destroy();
    },
  };
}
