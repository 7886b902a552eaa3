/**
 * The `fs` driver: the embedded object store. Objects live on local disk (./objects.ts); the
 * server reaches them directly, while clients (presigned URLs, SDKs with the credentials that
 * POST /api/tokens/validate returns) use the built-in S3-compatible endpoint (./endpoint.ts).
 *
 * Keys: every bucket gets its own access key, scoped to it, its secret stored encrypted with the
 * data-dir key; the server signs presigned URLs with its own key (derived from the data-dir
 * secret, never handed out); a root key (from the config, or generated into
 * `<data_dir>/keys/s3-root.json`) may list, create and delete buckets. No API returns the root or
 * service secrets.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { contentDisposition } from '../../../../core/http.ts';
import { type Keys, writeSecretFile } from '../../../../core/keys.ts';
import type { Logger } from '../../../../core/logger.ts';
import type { FsConfig } from '../../config.ts';
import { type QuotaPolicy, type StorageConnection, type StorageDriver, StoreError } from '../types.ts';
import { SigV4Presigner } from '../sigv4.ts';
import { type Credential, type KeyLookup, Verifier } from './auth.ts';
import { createEndpoint } from './endpoint.ts';
import { type BucketKey, ObjectStore, S3Error } from './objects.ts';
import { BucketQuota } from './quota.ts';

const secretContext = (accessKey: string) => `storage:fs:bucket-key:${accessKey}`;

/** The server's own key, derived from the data-dir secret: stable, never stored, never handed out. */
function serviceKey(keys: Keys): RootKey {
  return {
    accessKey: `WSVC${keys.derive('storage:fs:service-key-id').toString('hex').slice(0, 16).toUpperCase()}`,
    secretKey: keys.derive('storage:fs:service-key').toString('base64url'),
  };
}

/**
 * Decrypted bucket secrets by access key, each with the ciphertext it came from: the row is read
 * on every use and a secret is reused only while the stored ciphertext is the same one, so a
 * bucket key replaced, re-created or deleted (here or by another process) is never answered from
 * here. Entries of a deleted bucket are dropped with it.
 */
class SecretCache {
  readonly #entries = new Map<string, { ciphertext: string; secret: string }>();
  readonly keys: Keys;
  constructor(keys: Keys) {
    this.keys = keys;
  }

  secretOf(key: BucketKey): string {
    const hit = this.#entries.get(key.accessKey);
    if (hit?.ciphertext === key.secret) return hit.secret;
    const secret = this.keys.decrypt(key.secret, secretContext(key.accessKey));
    this.#entries.set(key.accessKey, { ciphertext: key.secret, secret });
    return secret;
  }

  forget(accessKey: string): void {
    this.#entries.delete(accessKey);
  }
}

/** Root, service and per-bucket keys (secrets decrypted with the data-dir key). */
function keyLookup(store: ObjectStore, root: RootKey, secrets: SecretCache | undefined, log: Logger): KeyLookup {
  const service = secrets && serviceKey(secrets.keys);
  return (accessKey): Credential | undefined => {
    if (accessKey === root.accessKey) return { principal: { kind: 'root', accessKey }, secret: root.secretKey };
    if (!service || !secrets) return undefined;
    if (accessKey === service.accessKey) return { principal: { kind: 'service', accessKey }, secret: service.secretKey };
    const found = store.bucketKey(accessKey);
    if (!found) return undefined;
    try {
      return { principal: { kind: 'bucket', accessKey, bucket: found.bucket }, secret: secrets.secretOf(found) };
    } catch (err) {
      log.error({ err, accessKey }, 'a bucket key cannot be decrypted with this data dir key');
      return undefined;
    }
  };
}

export interface FsDriverEnv {
  dataDir: string;
  keys: Keys;
  log: Logger;
  /** App limits: without it nothing is limited. */
  quota?: QuotaPolicy;
}

export interface RootKey {
  accessKey: string;
  secretKey: string;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** An access key id like AWS's: 20 upper-case letters and digits, starting with `prefix`. */
function accessKeyId(prefix: string): string {
  const bytes = randomBytes(20);
  let out = prefix;
  for (let i = 0; out.length < 20; i++) out += ALNUM[bytes[i]! % ALNUM.length];
  return out;
}

const newSecret = () => randomBytes(30).toString('base64url');

/** The root key: from the config, or read from (generated into) `<data_dir>/keys/s3-root.json`. */
function rootKey(config: FsConfig, dataDir: string): RootKey {
  if (config.root_access_key && config.root_secret_key) return { accessKey: config.root_access_key, secretKey: config.root_secret_key };
  const file = path.join(dataDir, 'keys', 's3-root.json');
  if (!fs.existsSync(file)) writeSecretFile(file, `${JSON.stringify({ accessKey: accessKeyId('WROOT'), secretKey: newSecret() }, null, 2)}\n`);
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<RootKey>;
  if (typeof parsed.accessKey !== 'string' || typeof parsed.secretKey !== 'string') throw new Error(`${file} does not hold {"accessKey", "secretKey"}`);
  return { accessKey: parsed.accessKey, secretKey: parsed.secretKey };
}

function toStoreError(err: unknown, doing: string): StoreError {
  if (err instanceof StoreError) return err;
  if (err instanceof S3Error) {
    const failure = err.status === 404 ? 'not_found' : err.status === 403 ? 'denied' : 'failed';
    return new StoreError(failure, `${doing}: ${err.code}`, { cause: err });
  }
  return new StoreError('unavailable', `${doing}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

export interface FsDriver extends StorageDriver {
  /** Binds the endpoint; rejects with a message naming the address when it cannot. */
  start(): Promise<void>;
  /** The endpoint's base URL as clients reach it. */
  readonly publicUrl: string;
}

export function createFsDriver(config: FsConfig, env: FsDriverEnv): FsDriver {
  const objectsDir = path.resolve(config.objects_dir ?? path.join(env.dataDir, 'objects'));
  const policy = env.quota;
  const store = new ObjectStore(objectsDir, policy ? { onChange: (bucket, changes) => policy.objectsChanged(bucket, changes) } : {});
  const quota = new BucketQuota(store, policy);
  const root = rootKey(config, env.dataDir);
  const service = serviceKey(env.keys);
  const secrets = new SecretCache(env.keys);
  const lookup = keyLookup(store, root, secrets, env.log);
  const verifier = new Verifier(lookup, config.region);
  const server: http.Server = createEndpoint({
    store,
    verifier,
    region: config.region,
    log: env.log,
    requestTimeoutMs: config.request_timeout_ms,
    headersTimeoutMs: config.headers_timeout_ms,
    quota,
  });
  const presigner = new SigV4Presigner({
    credentials: { accessKeyId: service.accessKey, secretAccessKey: service.secretKey },
    region: config.region,
    forcePathStyle: true,
  });

  let listening: Promise<void> | undefined;
  let publicUrl = config.public_url?.replace(/\/+$/, '') ?? `http://${config.listen}`;

  function bucketKey(bucket: string): { accessKey: string; secretKey: string } {
    let found = store.keyOfBucket(bucket);
    if (!found) {
      const accessKey = accessKeyId('WAPP');
      found = store.setBucketKey({ accessKey, bucket, secret: env.keys.encrypt(newSecret(), secretContext(accessKey)) });
    }
    return { accessKey: found.accessKey, secretKey: secrets.secretOf(found) };
  }

  /** The public URL parsed, with its parts for connectionFor: parsed again only when the URL changes (start). */
  let endpoint: { text: string; url: URL; parts: Pick<StorageConnection, 'endPoint' | 'port' | 'useSSL'> } | undefined;
  function publicEndpoint(): NonNullable<typeof endpoint> {
    if (endpoint?.text !== publicUrl) {
      const url = new URL(publicUrl);
      const parts = {
        endPoint: url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80,
        useSSL: url.protocol === 'https:',
      };
      endpoint = { text: publicUrl, url, parts };
    }
    return endpoint;
  }

  function presign(
    method: 'GET' | 'PUT',
    bucket: string,
    key: string,
    expiresInSeconds: number,
    headers: Record<string, string>,
    query: Record<string, string>,
  ): string {
    return presigner.presignSync({ method, endpoint: publicEndpoint().url, bucket, key, expiresInSeconds, headers, query });
  }

  async function run<T>(doing: string, fn: () => T | Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toStoreError(err, doing);
    }
  }

  return {
    name: 'fs',
    problem: undefined,
    get publicUrl() {
      return publicUrl;
    },

    start() {
      listening ??= new Promise<void>((resolve, reject) => {
        const at = config.listen.lastIndexOf(':');
        const host = config.listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
        const port = Number(config.listen.slice(at + 1));
        server.once('error', (err: NodeJS.ErrnoException) => {
          const reason = err.code === 'EADDRINUSE' ? 'address already in use' : err.code === 'EACCES' ? 'permission denied' : err.message;
          reject(new Error(`cannot listen on ${config.listen} for the embedded S3 endpoint ([plugins.storage.fs] listen): ${reason}`));
        });
        server.listen(port, host, () => {
          if (!config.public_url) {
            const a = server.address() as AddressInfo;
            publicUrl = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
          }
          env.log.info({ url: publicUrl, objects: objectsDir }, 'embedded S3 endpoint listening');
          // Files a crash left unreferenced (between a rename and its commit): in the background.
          store
            .sweep()
            .then((removed) => removed && env.log.warn({ removed, objects: objectsDir }, 'removed object files no index entry refers to (left by a crash)'))
            .catch((err: unknown) => env.log.error({ err }, 'sweeping unreferenced object files failed'));
          resolve();
        });
      });
      return listening;
    },

    async ping() {
      if (!listening) throw new StoreError('unavailable', 'the embedded S3 endpoint is not listening');
      await run('reaching the embedded store', async () => {
        await listening;
        store.hasBucket('wharf-ping');
      });
    },

    createBucket: (bucket) =>
      run(`creating bucket ${bucket}`, () => {
        store.createBucket(bucket);
        bucketKey(bucket);
      }),

    checkBucket: (bucket) => run(`checking bucket ${bucket}`, () => store.requireBucket(bucket)),

    emptyBucket: (bucket, onDeleted) =>
      run(`emptying bucket ${bucket}`, async () => {
        if (!store.hasBucket(bucket)) return;
        for (;;) {
          const { uploads } = store.listUploads(bucket, { prefix: '', keyMarker: '', uploadIdMarker: '', max: 1000 });
          for (const u of uploads) await store.abort(u.id);
          if (uploads.length < 1000) break;
        }
        for (;;) {
          const keys = store.keysAfter(bucket, '', 1000);
          if (!keys.length) return;
          await store.deleteMany(bucket, keys);
          await onDeleted(keys);
        }
      }),

    deleteBucket: (bucket) =>
      run(`deleting bucket ${bucket}`, () => {
        if (!store.hasBucket(bucket)) return;
        const key = store.keyOfBucket(bucket);
        store.deleteBucket(bucket);
        if (key) secrets.forget(key.accessKey);
      }),

    statObject: (bucket, key) =>
      run(`checking object "${key}"`, () => {
        const row = store.head(bucket, key);
        return row ? { size: row.size, lastModified: row.lastModified } : undefined;
      }),

    listObjects: (bucket, onPage) =>
      run(`listing objects of ${bucket}`, async () => {
        store.requireBucket(bucket);
        for (let after = ''; ; ) {
          const page = store.objectsAfter(bucket, after, 1000);
          if (page.length) await onPage(page.map(({ key, size }) => ({ key, size })));
          if (page.length < 1000) return;
          after = page[page.length - 1]!.key;
          // A page at a time, like a remote listing: requests go on between pages.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }),

    live: {
      usage: (bucket, reservations) => quota.usage(bucket, reservations),
      objectSize: (bucket, key) => store.head(bucket, key)?.size,
    },

    expireUploads:
      config.abort_incomplete_uploads_after_days > 0
        ? () =>
            run('aborting expired multipart uploads', async () => {
              const cutoff = Date.now() - config.abort_incomplete_uploads_after_days * 86_400_000;
              let aborted = 0;
              for (;;) {
                const batch = await store.abortInitiatedBefore(cutoff, 100);
                for (const { bucket, key } of batch)
                  env.log.info(
                    { bucket, key, days: config.abort_incomplete_uploads_after_days },
                    'aborted an unfinished multipart upload older than abort_incomplete_uploads_after_days',
                  );
                aborted += batch.length;
                if (batch.length < 100) return aborted;
              }
            })
        : undefined,

    async deleteObjects(bucket, keys) {
      // One transaction per batch: all of its keys are deleted, or none (each reported failed).
      const outcome: { deleted: string[]; failed: { key: string; reason: string; failure: StoreError['failure'] }[] } = { deleted: [], failed: [] };
      for (let i = 0; i < keys.length; i += 1000) {
        const batch = keys.slice(i, i + 1000);
        try {
          await store.deleteMany(bucket, batch);
          outcome.deleted.push(...batch);
        } catch (err) {
          const e = toStoreError(err, `deleting ${batch.length} objects`);
          for (const key of batch) outcome.failed.push({ key, reason: e.message, failure: e.failure });
        }
      }
      return outcome;
    },

    presignPut: ({ bucket, key, size, contentType, expiresInSeconds }) =>
      run('presigning', () => presign('PUT', bucket, key, expiresInSeconds, { 'content-length': String(size), 'content-type': contentType }, {})),

    presignGet: ({ bucket, key, expiresInSeconds, downloadName }) =>
      run('presigning', () =>
        presign(
          'GET',
          bucket,
          key,
          expiresInSeconds,
          {},
          downloadName === undefined ? {} : { 'response-content-disposition': contentDisposition('attachment', downloadName) },
        ),
      ),

    connectionFor(bucket): StorageConnection {
      const key = bucketKey(bucket);
      return { ...publicEndpoint().parts, accessKey: key.accessKey, secretKey: key.secretKey };
    },

    close() {
      server.close();
      server.closeAllConnections();
      store.close();
    },
  };
}

/**
 * A stand-alone embedded endpoint over an objects directory, with only a root key: what the test
 * harness and the benchmarks start when they want the embedded store as "an S3 server".
 */
export async function startStandaloneStore(options: {
  objectsDir: string;
  listen: string;
  region: string;
  root: RootKey;
  /** The data-dir keys of the servers sharing the directory: their service and bucket keys work too. */
  keys?: Keys;
  log: Logger;
}): Promise<{ url: string; close(): Promise<void> }> {
  const store = new ObjectStore(options.objectsDir);
  const lookup = keyLookup(store, options.root, options.keys && new SecretCache(options.keys), options.log);
  const server = createEndpoint({
    store,
    verifier: new Verifier(lookup, options.region),
    region: options.region,
    log: options.log,
    quota: new BucketQuota(store, undefined),
  });
  const at = options.listen.lastIndexOf(':');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(options.listen.slice(at + 1)), options.listen.slice(0, at), () => resolve());
  });
  const a = server.address() as AddressInfo;
  return {
    url: `http://${a.address}:${a.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        store.close();
      }),
  };
}
