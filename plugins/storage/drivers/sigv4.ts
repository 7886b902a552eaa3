/**
 * AWS Signature Version 4 presigned S3 URLs (query-string authentication), signed by
 * `@smithy/signature-v4`, the signer inside the AWS SDK, used directly. The SDK's own presigner
 * builds a whole client middleware stack and resolves endpoint rules for every URL (about 250 us
 * each); calling its signer directly keeps the canonicalization in the well-kept library and
 * costs a fraction of that. test/plugins/storage/sigv4.test.ts checks the URLs are byte for byte
 * the SDK presigner's. Reference: https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';

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
  /** Headers the uploader must send exactly (lowercase names; `host` is always signed). */
  headers?: Record<string, string>;
  /** Extra query parameters, signed (for example `response-content-disposition`). */
  query?: Record<string, string>;
  /** Signing time; now by default. */
  date?: Date;
}

/** RFC 3986 percent-encoding, as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ */
function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** An object key as a canonical path: each segment encoded, `/` kept. */
function encodeKey(key: string): string {
  return key.split('/').map(uriEncode).join('/');
}

type Secret = string | ArrayBuffer | ArrayBufferView;

function keyBytes(secret: Secret): string | Uint8Array {
  if (typeof secret === 'string') return secret;
  return ArrayBuffer.isView(secret) ? new Uint8Array(secret.buffer, secret.byteOffset, secret.byteLength) : new Uint8Array(secret);
}

/** node:crypto as the signer's SHA-256, plain or keyed (HMAC). */
class NodeSha256 {
  readonly #key: string | Uint8Array | undefined;
  #hash: Hash | Hmac;
  constructor(secret?: Secret) {
    this.#key = secret === undefined ? undefined : keyBytes(secret);
    this.#hash = this.#fresh();
  }
  #fresh(): Hash | Hmac {
    return this.#key === undefined ? createHash('sha256') : createHmac('sha256', this.#key);
  }
  update(data: Uint8Array | string): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return this.#hash.digest();
  }
  reset(): void {
    this.#hash = this.#fresh();
  }
}

export class SigV4Presigner {
  readonly #signer: SignatureV4;
  readonly #pathStyle: boolean;

  constructor(options: { credentials: SigV4Credentials; region: string; forcePathStyle: boolean }) {
    this.#signer = new SignatureV4({
      service: 's3',
      region: options.region,
      credentials: options.credentials,
      sha256: NodeSha256,
      // S3 paths are encoded once, by us (encodeKey), not a second time by the signer.
      uriEscapePath: false,
      applyChecksum: false,
    });
    this.#pathStyle = options.forcePathStyle;
  }

  async presign(request: PresignRequest): Promise<string> {
    const { endpoint, bucket, key } = request;
    const hostname = this.#pathStyle ? endpoint.hostname : `${bucket}.${endpoint.hostname}`;
    const host = endpoint.port ? `${hostname}:${endpoint.port}` : hostname;
    const basePath = endpoint.pathname.replace(/\/+$/, '');
    const path = `${basePath}${this.#pathStyle ? `/${uriEncode(bucket)}` : ''}/${encodeKey(key)}`;
    // Spelled as the SDK's presigner spells it: the signer hoists it into the query unchanged.
    const headers: Record<string, string> = { host, 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD' };
    for (const [name, value] of Object.entries(request.headers ?? {})) headers[name.toLowerCase()] = String(value);
    const signed = await this.#signer.presign(
      {
        method: request.method,
        protocol: endpoint.protocol,
        hostname,
        port: endpoint.port ? Number(endpoint.port) : undefined,
        path,
        query: { ...request.query },
        headers,
      },
      { expiresIn: request.expiresInSeconds, signingDate: request.date ?? new Date() },
    );
    const query = Object.entries(signed.query as Record<string, string>)
      .map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`)
      .join('&');
    return `${endpoint.protocol}//${host}${path}?${query}`;
  }
}
