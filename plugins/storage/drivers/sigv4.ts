/**
 * AWS Signature Version 4 presigned S3 URLs (query-string authentication) on node:crypto:
 * https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html. The canonical
 * request is built directly and the signing key (four HMACs) is derived once per day, region and
 * credentials and kept (as a KeyObject: an HMAC under a Buffer key costs six times more in Node 24,
 * re-checking the key each time); each URL then costs one SHA-256 and one HMAC. The AWS SDK's presigner
 * costs about 250 us a URL (its middleware stack and endpoint rules) and its signer alone about
 * 70 us (an HMAC of the credentials per URL for its key cache, header cloning, promises);
 * profiles of phase 1 of an upload put that signing at a fifth of the request (issue 16).
 * test/plugins/storage/sigv4.test.ts checks the URLs are byte for byte the SDK presigner's.
 */
import { createHmac, createSecretKey, hash, type KeyObject } from 'node:crypto';

export interface SigV4Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface PresignRequest {
  method: 'GET' | 'PUT' | 'HEAD' | 'DELETE';
  /** The store's base URL (scheme, host, port). */
  endpoint: URL;
  bucket: string;
  key: string;
  expiresInSeconds: number;
  /** Headers the uploader must send exactly (`host` is always signed). */
  headers?: Record<string, string>;
  /** Extra query parameters, signed (for example `response-content-disposition`). */
  query?: Record<string, string>;
  /** Signing time; now by default. */
  date?: Date;
}

const RESERVED = /[!'()*]/g;
const percentEscape = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`;

/** RFC 3986 percent-encoding, as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ */
function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(RESERVED, percentEscape);
}

/** An object key as a canonical path: each segment encoded, `/` kept (a `%2F` in the key itself is `%252F` by then). */
function encodeKey(key: string): string {
  return uriEncode(key).replaceAll('%2F', '/');
}

/** A header value as SigV4 signs it: trimmed, inner runs of whitespace as one space. */
function headerValue(value: string): string {
  return /\s/.test(value) ? value.trim().replace(/\s+/g, ' ') : value;
}

const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
const byName = ([a]: [string, string], [b]: [string, string]) => (a < b ? -1 : a > b ? 1 : 0);

/** What one day's URLs share: the signing key, the credential scope and the encoded credential. */
interface DayKey {
  day: string;
  key: KeyObject;
  scope: string;
  /** `X-Amz-Credential`'s value, encoded. */
  credential: string;
}

export class SigV4Presigner {
  readonly #credentials: SigV4Credentials;
  readonly #region: string;
  readonly #pathStyle: boolean;
  /** The signing key of one day (`YYYYMMDD`): it depends only on the secret, the day, the region and the service. */
  #key: DayKey | undefined;
  /** The last second formatted (`20261122T070405Z`): a phase 1 signs its 100 URLs within one or two. */
  #time = { second: Number.NaN, text: '' };

  constructor(options: { credentials: SigV4Credentials; region: string; forcePathStyle: boolean }) {
    this.#credentials = { ...options.credentials };
    this.#region = options.region;
    this.#pathStyle = options.forcePathStyle;
  }

  #dayKey(day: string): DayKey {
    if (this.#key?.day !== day) {
      const dated = hmac(`AWS4${this.#credentials.secretAccessKey}`, day);
      const scope = `${day}/${this.#region}/s3/aws4_request`;
      this.#key = {
        day,
        // A KeyObject: createHmac with it costs about 2 us, with the same key as a Buffer about 12 us (Node 24).
        key: createSecretKey(hmac(hmac(hmac(dated, this.#region), 's3'), 'aws4_request')),
        scope,
        credential: uriEncode(`${this.#credentials.accessKeyId}/${scope}`),
      };
    }
    return this.#key;
  }

  /** `20261122T070405Z` of a date. */
  #amzDate(date: Date): string {
    const second = Math.floor(date.getTime() / 1000);
    if (this.#time.second !== second) this.#time = { second, text: date.toISOString().replace(/[-:]|\.\d{3}/g, '') };
    return this.#time.text;
  }

  async presign(request: PresignRequest): Promise<string> {
    return this.presignSync(request);
  }

  presignSync(request: PresignRequest): string {
    const { endpoint, bucket, key } = request;
    const hostname = this.#pathStyle ? endpoint.hostname : `${bucket}.${endpoint.hostname}`;
    const host = endpoint.port ? `${hostname}:${endpoint.port}` : hostname;
    const basePath = endpoint.pathname.length > 1 ? endpoint.pathname.replace(/\/+$/, '') : '';
    const path = `${basePath}${this.#pathStyle ? `/${uriEncode(bucket)}` : ''}/${encodeKey(key)}`;
    const time = this.#amzDate(request.date ?? new Date());
    const day = this.#dayKey(time.slice(0, 8));

    // Signed headers: host and the caller's, lowercase names in order, values trimmed with inner runs of whitespace as one space.
    const headers: [string, string][] = [['host', host]];
    for (const name in request.headers) {
      const lower = name.toLowerCase();
      const value = headerValue(String(request.headers[name]));
      const same = headers.findIndex(([n]) => n === lower);
      if (same === -1) headers.push([lower, value]);
      else headers[same] = [lower, value];
    }
    headers.sort(byName);
    let signedHeaders = '';
    let canonicalHeaders = '';
    for (const [name, value] of headers) {
      signedHeaders += signedHeaders ? `;${name}` : name;
      canonicalHeaders += `${name}:${value}\n`;
    }

    // Sorted by name (code points), then encoded: the order of the SDK's signer. The X-Amz-
    // parameters are in that order already; the caller's (if any) are merged in.
    let query =
      `X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Content-Sha256=UNSIGNED-PAYLOAD&X-Amz-Credential=${day.credential}` +
      `&X-Amz-Date=${time}&X-Amz-Expires=${request.expiresInSeconds}&X-Amz-SignedHeaders=${uriEncode(signedHeaders)}`;
    if (request.query && Object.keys(request.query).length) {
      const params: [string, string][] = [
        ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
        ['X-Amz-Content-Sha256', 'UNSIGNED-PAYLOAD'],
        ['X-Amz-Credential', `${this.#credentials.accessKeyId}/${day.scope}`],
        ['X-Amz-Date', time],
        ['X-Amz-Expires', String(request.expiresInSeconds)],
        ['X-Amz-SignedHeaders', signedHeaders],
      ];
      for (const [name, value] of Object.entries(request.query)) params.push([name, String(value)]);
      params.sort(byName);
      query = params.map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).join('&');
    }

    const canonical = `${request.method}\n${path}\n${query}\n${canonicalHeaders}\n${signedHeaders}\nUNSIGNED-PAYLOAD`;
    const toSign = `AWS4-HMAC-SHA256\n${time}\n${day.scope}\n${hash('sha256', canonical, 'hex')}`;
    const signature = createHmac('sha256', day.key).update(toSign).digest('hex');
    return `${endpoint.protocol}//${host}${path}?${query}&X-Amz-Signature=${signature}`;
  }
}
