/** The storage plugin's config: `[plugins.storage]` and `[plugins.storage.s3]`. */
import { z } from 'zod';
import type { CoreConfig } from '../../core/core-config.ts';
import type { ConfigProblem } from '../../core/plugin.ts';

/** A store's base URL: scheme, host and port only (a path cannot be expressed in StorageConfig). */
const storeUrl = z.url({ protocol: /^https?$/ }).refine((value) => {
  const url = new URL(value);
  return (url.pathname === '/' || url.pathname === '') && !url.search && !url.hash && !url.username && !url.password;
}, 'expected scheme, host and port only, for example http://127.0.0.1:9000 (no path, query or credentials)');

const s3Config = z
  .strictObject({
    endpoint: storeUrl
      .optional()
      .describe(
        'URL of the S3-compatible store as this server reaches it (scheme, host, port), for example http://127.0.0.1:9000 or https://s3.eu-west-1.amazonaws.com. Unset: storage is not configured; the server starts, /readyz reports storage not ready and creating an app answers 503.',
      ),
    public_endpoint: storeUrl
      .optional()
      .describe(
        'URL at which clients reach the store (scheme, host, port): presigned URLs are signed for it and POST /api/tokens/validate returns it. Default: endpoint. Set it when the server reaches the store on an internal name.',
      ),
    region: z
      .string()
      .min(1)
      .default('us-east-1')
      .describe(
        'Region that requests and presigned URLs are signed for (SigV4). MinIO and Ceph accept us-east-1 unless configured otherwise; Garage usually wants "garage".',
      ),
    access_key: z.string().min(1).optional().describe('Access key id the server uses for the store. Required when endpoint is set.'),
    secret_key: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Secret key the server uses for the store. Required when endpoint is set. Prefer the variable WHARF_PLUGINS__STORAGE__S3__SECRET_KEY to writing it in a file.',
      ),
    public_access_key: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Access key id that POST /api/tokens/validate hands to API token holders. Default: access_key. The s3 driver has no per-app keys: give here a key limited to buckets named <bucket_prefix>* if the store can express that.',
      ),
    public_secret_key: z.string().min(1).optional().describe('Secret key that goes with public_access_key. Required when public_access_key is set.'),
    force_path_style: z
      .boolean()
      .default(true)
      .describe(
        'Path-style addressing (http://host/bucket/key) rather than virtual-hosted (http://bucket.host/key). MinIO, Ceph and Garage need it unless their DNS serves bucket subdomains.',
      ),
    connect_timeout_ms: z
      .int()
      .min(100)
      .default(5000)
      .describe('How long to wait for a TCP connection to the store before calling it unreachable, in milliseconds.'),
    request_timeout_ms: z
      .int()
      .min(1000)
      .default(30_000)
      .describe('How long one request to the store may stay silent before it is abandoned, in milliseconds.'),
    max_attempts: z.int().min(1).max(10).default(3).describe('Attempts per store request, the first included (retries use exponential backoff).'),
  })
  .superRefine((s3, ctx) => {
    if (s3.endpoint && !s3.access_key) ctx.addIssue({ code: 'custom', path: ['access_key'], message: 'required when endpoint is set' });
    if (s3.endpoint && !s3.secret_key) ctx.addIssue({ code: 'custom', path: ['secret_key'], message: 'required when endpoint is set' });
    if (s3.public_access_key && !s3.public_secret_key) {
      ctx.addIssue({ code: 'custom', path: ['public_secret_key'], message: 'required when public_access_key is set' });
    }
    if (s3.public_secret_key && !s3.public_access_key) {
      ctx.addIssue({ code: 'custom', path: ['public_access_key'], message: 'required when public_secret_key is set' });
    }
  })
  .prefault({})
  .describe('The s3 driver: any S3-compatible store (MinIO, Garage, Ceph RGW, AWS S3, R2).');

/** HOST:PORT; port 0 picks a free port (tests). */
const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):\d{1,5}$/, 'expected HOST:PORT, for example 127.0.0.1:3900')
  .refine((s) => Number(s.slice(s.lastIndexOf(':') + 1)) <= 65535, 'port must be at most 65535');

const fsConfig = z
  .strictObject({
    listen: listenAddress
      .default('127.0.0.1:3900')
      .describe('Address and port (HOST:PORT) the embedded S3-compatible endpoint listens on, separately from the HTTP API. Port 0 picks a free port.'),
    public_url: storeUrl
      .optional()
      .describe(
        'URL at which clients reach the embedded S3 endpoint (scheme, host, port): presigned URLs are signed for it and POST /api/tokens/validate returns it. Default: http://<listen>. Set it when a reverse proxy or another host name fronts the endpoint.',
      ),
    region: z.string().min(1).default('us-east-1').describe('Region the endpoint expects in SigV4 credential scopes (clients must sign for it).'),
    objects_dir: z.string().min(1).optional().describe('Directory holding the objects and their index. Default: <data_dir>/objects.'),
    root_access_key: z
      .string()
      .min(3)
      .optional()
      .describe(
        'Access key id of the root key, which may list, create and delete every bucket (for administrators and their tools; no API returns it). Unset: a root key is generated into <data_dir>/keys/s3-root.json on first start.',
      ),
    root_secret_key: z
      .string()
      .min(8)
      .optional()
      .describe(
        'Secret of the root key; required with root_access_key. Prefer the variable WHARF_PLUGINS__STORAGE__FS__ROOT_SECRET_KEY to writing it in a file.',
      ),
    request_timeout_ms: z
      .int()
      .min(1000)
      .max(3_600_000)
      .default(60_000)
      .describe(
        'How long a request to the endpoint may send (or read) nothing before it is answered 400 RequestTimeout and its connection closed, in milliseconds. Only silence counts: a slow upload that keeps sending is never cut.',
      ),
    abort_incomplete_uploads_after_days: z
      .number()
      .min(0)
      .max(36_500)
      .default(7)
      .describe(
        "Unfinished multipart uploads initiated this many days ago or earlier are aborted and their parts deleted (checked every 10 minutes), as S3's lifecycle rule AbortIncompleteMultipartUpload does: until then their parts count against the app's storage limit. Fractions allowed; 0 keeps them until completed, aborted or the app is deleted.",
      ),
    headers_timeout_ms: z
      .int()
      .min(1000)
      .max(3_600_000)
      .default(60_000)
      .describe('How long a client may take to send the headers of a request to the endpoint before its connection is closed, in milliseconds.'),
  })
  .superRefine((fs, ctx) => {
    if (fs.root_access_key && !fs.root_secret_key) ctx.addIssue({ code: 'custom', path: ['root_secret_key'], message: 'required when root_access_key is set' });
    if (fs.root_secret_key && !fs.root_access_key) ctx.addIssue({ code: 'custom', path: ['root_access_key'], message: 'required when root_secret_key is set' });
  })
  .prefault({})
  .describe('The fs driver: the embedded object store and its S3-compatible endpoint.');

export const storageConfig = z.strictObject({
  driver: z
    .enum(['fs', 's3'])
    .optional()
    .describe(
      'Where objects live: "fs" is the embedded store (objects on local disk behind a built-in S3-compatible endpoint, configured in [plugins.storage.fs]); "s3" is any S3-compatible store, configured in [plugins.storage.s3]. Default: "s3" when [plugins.storage.s3] endpoint is set, otherwise "fs".',
    ),
  bucket_prefix: z
    .string()
    .regex(/^(?:[a-z0-9][a-z0-9-]{0,25})?$/, 'lowercase letters, digits and hyphens, starting with a letter or digit, at most 26 characters')
    .default('wharf-')
    .describe('Each app gets the bucket <bucket_prefix><app id>; at most 26 characters so the name fits the 63 allowed.'),
  reservation_ttl_seconds: z
    .int()
    .min(1)
    .default(7200)
    .describe(
      'How long bytes requested by upload phase 1 count against the storage limit while the upload is not completed, in seconds. Presigned PUT URLs are valid one hour, or this long when it is shorter; keep it above 3600 so slow uploads finish before their reservation expires.',
    ),
  reaper_interval_seconds: z
    .int()
    .min(1)
    .default(60)
    .describe('How often expired reservations are cleaned up, deleting the objects of uploads that were never completed, in seconds.'),
  usage_interval_seconds: z
    .int()
    .min(1)
    .default(300)
    .describe(
      "On the s3 driver, how often each app's bucket is listed (ListObjectsV2, one request per 1000 objects) to bring usage in line with what it holds: records of objects overwritten through S3 take their new size, and objects with no record count against the storage limit. In seconds. The fs driver counts usage live and does not list.",
    ),
  single_instance: z
    .boolean()
    .default(false)
    .describe(
      'With the fs driver and a PostgreSQL database ([database] url), say that one instance runs, so that objects on its local disk are the whole store; otherwise the server refuses to start, since instances sharing a database would each keep different objects. Ignored on SQLite and with the s3 driver.',
    ),
  s3: s3Config,
  fs: fsConfig,
});

export type StoragePluginConfig = z.output<typeof storageConfig>;
export type S3Config = StoragePluginConfig['s3'];
export type FsConfig = StoragePluginConfig['fs'];

/** The driver in effect: the one named, else s3 when an s3 endpoint is set, else the embedded store. */
export function driverOf(config: StoragePluginConfig): 'fs' | 's3' {
  return config.driver ?? (config.s3.endpoint ? 's3' : 'fs');
}

/** Rules across keys (the plugin's `validate`): each a line for the operator. */
export function driverProblems(config: StoragePluginConfig, core?: Readonly<CoreConfig>): ConfigProblem[] {
  // A shared database is what several instances have: objects on one's disk would not be shared.
  if (driverOf(config) === 'fs' && core?.database.engine === 'postgres' && !config.single_instance) {
    return [
      {
        key: 'driver',
        message:
          'is "fs", which keeps objects on this instance\'s disk, but the database is shared (PostgreSQL): set driver = "s3" with an S3-compatible store ([plugins.storage.s3]) shared by every instance, or single_instance = true if one instance runs',
      },
    ];
  }
  return [];
}
