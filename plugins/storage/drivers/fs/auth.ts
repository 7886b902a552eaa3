/**
 * Request signatures for the embedded endpoint, recomputed over the request as received and
 * compared in constant time.
 *
 * - AWS Signature V4, with @smithy/signature-v4 (the AWS SDK's own signer): headers
 *   (`Authorization: AWS4-HMAC-SHA256 ...`) and presigned query strings (`X-Amz-Signature`); the
 *   date must be within 15 minutes of ours, a presigned URL is refused once
 *   `X-Amz-Date + X-Amz-Expires` has passed. For `aws-chunked` bodies, each chunk's signature is
 *   chained from the seed signature (see {@link ChunkSigner}).
 * - AWS Signature V2 (HMAC-SHA1, as AWS documents it in "Signing and Authenticating REST
 *   Requests"): headers (`Authorization: AWS key:signature`) and query strings
 *   (`AWSAccessKeyId`, `Expires`, `Signature`). `s3cmd signurl` still makes only these, and s3cmd
 *   signs with V2 when configured to or when it falls back. V2 signs no payload and no host.
 */
import { createHash, createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { SignatureV4 } from '@smithy/signature-v4';
import { S3Error } from './objects.ts';

/**
 * smithy's signer, loaded with the first SigV4 request: evaluating it and the @smithy modules it
 * pulls in was 5% of the start's CPU in a profile of the binary, for a server that may never see
 * one (BENCHMARKS.md, issue 16).
 */
let smithy: typeof import('@smithy/signature-v4') | undefined;

/** Largest difference between a request's date and ours. */
const MAX_SKEW_MS = 15 * 60 * 1000;
/** Longest presigned URL validity SigV4 allows. */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/**
 * An HMAC key for createHmac: strings as they are, bytes as a KeyObject. createHmac under raw
 * bytes costs about 15 us in Node 24 (it checks the key's type at length), under a KeyObject made
 * from the same bytes about 4 us in all, under a string about 3 us.
 */
function hmacKey(secret: string | ArrayBuffer | ArrayBufferView): string | KeyObject {
  if (typeof secret === 'string') return secret;
  return createSecretKey(ArrayBuffer.isView(secret) ? new Uint8Array(secret.buffer, secret.byteOffset, secret.byteLength) : new Uint8Array(secret));
}

/** node:crypto as the hash constructor smithy expects (HMAC when given a key). */
export class NodeSha256 {
  #hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  readonly #key: string | KeyObject | undefined;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#key = secret === undefined ? undefined : hmacKey(secret);
    this.#hash = this.#key === undefined ? createHash('sha256') : createHmac('sha256', this.#key);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(
      typeof data === 'string'
        ? Buffer.from(data, 'utf8')
        : ArrayBuffer.isView(data)
          ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
          : new Uint8Array(data),
    );
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
  reset(): void {
    this.#hash = this.#key === undefined ? createHash('sha256') : createHmac('sha256', this.#key);
  }
}

/** Who may use a key: the root (everything), the server itself, or one bucket. */
export type Principal = { kind: 'root'; accessKey: string } | { kind: 'service'; accessKey: string } | { kind: 'bucket'; accessKey: string; bucket: string };

export interface Credential {
  principal: Principal;
  secret: string;
}

/** Finds the secret of an access key; undefined when no such key exists. */
export type KeyLookup = (accessKey: string) => Credential | undefined;

export interface SignedRequest {
  method: string;
  /** The raw request target: path and query as sent. */
  url: string;
  headers: IncomingHttpHeaders;
  /** Repeated headers kept apart (Node's `headersDistinct`): SigV2 joins their values with ",". */
  headersDistinct?: Record<string, string[]>;
}

export interface Authenticated {
  principal: Principal;
  /** The payload hash the client declared (`x-amz-content-sha256`), or UNSIGNED-PAYLOAD. */
  payload: string;
  /** For aws-chunked signed bodies: signs each chunk after the seed. */
  chunks?: ChunkSigner;
  /** Lower-case names of the headers the signature covers. */
  signedHeaders: ReadonlySet<string>;
}

const denied = (message: string) => new S3Error('AccessDenied', 403, message);

/** SigV4's URI encoding of one path segment (RFC 3986 unreserved kept). */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The decoded path, re-encoded as SigV4 canonical form (as MinIO does), so any client's escaping agrees. */
function canonicalPath(rawPath: string): string {
  return rawPath
    .split('/')
    .map((s) => {
      try {
        return encodeSegment(decodeURIComponent(s));
      } catch {
        throw new S3Error('InvalidURI', 400, "Couldn't parse the specified URI.");
      }
    })
    .join('/');
}

function parseQuery(search: string): Record<string, string | string[]> {
  // Parameter names are the client's: `constructor` or `__proto__` must be plain keys.
  const query: Record<string, string | string[]> = Object.create(null);
  for (const [k, v] of new URLSearchParams(search)) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return query;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

/** `20240101T000000Z` as a Date, or undefined. */
function parseAmzDate(text: string | undefined): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text ?? '');
  if (!m) return undefined;
  return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
}

/** Constant-time equality of two signatures (hex or base64 text). */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

interface Scope {
  accessKey: string;
  date: string;
  region: string;
  service: string;
}

function parseCredential(text: string): Scope {
  const parts = text.split('/');
  if (parts.length !== 5 || parts[4] !== 'aws4_request')
    throw new S3Error('AuthorizationHeaderMalformed', 400, 'The authorization header is malformed; the Credential is mal-formed.');
  return { accessKey: parts[0]!, date: parts[1]!, region: parts[2]!, service: parts[3]! };
}

/** Checks SigV4 signatures against keys from `lookup`, for one region. */
export class Verifier {
  readonly #lookup: KeyLookup;
  readonly #region: string;
  readonly #now: () => number;
  /** One signer per secret: smithy caches the day's signing key inside it. Bounded. */
  readonly #signers = new Map<string, SignatureV4>();

  constructor(lookup: KeyLookup, region: string, now: () => number = Date.now) {
    this.#lookup = lookup;
    this.#region = region;
    this.#now = now;
  }

  async #signer(accessKey: string, secret: string): Promise<SignatureV4> {
    const id = `${accessKey}\n${secret}`;
    let signer = this.#signers.get(id);
    if (!signer) {
      const { SignatureV4 } = smithy ?? (smithy = await import('@smithy/signature-v4'));
      if (this.#signers.size > 1000) this.#signers.clear();
      signer = new SignatureV4({
        credentials: { accessKeyId: accessKey, secretAccessKey: secret },
        region: this.#region,
        service: 's3',
        sha256: NodeSha256,
        uriEscapePath: false,
      });
      this.#signers.set(id, signer);
    }
    return signer;
  }

  #credential(scope: Scope, date: Date): Credential {
    const found = this.#lookup(scope.accessKey);
    if (!found) throw new S3Error('InvalidAccessKeyId', 403, 'The AWS Access Key Id you provided does not exist in our records.');
    if (scope.service !== 's3')
      throw new S3Error(
        'AuthorizationHeaderMalformed',
        400,
        `The authorization header is malformed; incorrect service "${scope.service}". This endpoint belongs to "s3".`,
      );
    if (scope.region !== this.#region) {
      // With the expected region as its own element, as AWS answers: s3cmd (whose default region
      // "US" is no region) reads it and signs again for it.
      throw new S3Error(
        'AuthorizationHeaderMalformed',
        400,
        `The authorization header is malformed; the region '${scope.region}' is wrong; expecting '${this.#region}'`,
        { Region: this.#region },
      );
    }
    if (scope.date !== date.toISOString().slice(0, 10).replace(/-/g, '')) {
      throw new S3Error('AuthorizationHeaderMalformed', 400, 'The authorization header is malformed; the credential date does not match the request date.');
    }
    return found;
  }

  /** The request's principal; throws S3Error (403 AccessDenied, SignatureDoesNotMatch, ...) otherwise. */
  async verify(req: SignedRequest): Promise<Authenticated> {
    const q = req.url.indexOf('?');
    const rawPath = q < 0 ? req.url : req.url.slice(0, q);
    const search = q < 0 ? '' : req.url.slice(q + 1);
    const query = parseQuery(search);
    const authorization = header(req.headers, 'authorization');
    if (authorization !== undefined) {
      if (/^AWS\s/.test(authorization)) return this.#verifyV2Header(req, authorization);
      return this.#verifyHeader(req, rawPath, query, authorization);
    }
    if (query['X-Amz-Signature'] !== undefined || query['X-Amz-Algorithm'] !== undefined || query['X-Amz-Credential'] !== undefined)
      return this.#verifyQuery(req, rawPath, query);
    if (query.Signature !== undefined || query.AWSAccessKeyId !== undefined) return this.#verifyV2Query(req, query);
    throw denied('Anonymous access is not allowed; sign the request (AWS Signature Version 4, or 2).');
  }

  #v2Credential(accessKey: string): Credential {
    const found = this.#lookup(accessKey);
    if (!found) throw new S3Error('InvalidAccessKeyId', 403, 'The AWS Access Key Id you provided does not exist in our records.');
    return found;
  }

  #v2Check(req: SignedRequest, cred: Credential, claimed: string, expires?: string): Authenticated {
    const text = stringToSignV2(req, expires);
    const mine = createHmac('sha1', cred.secret).update(text, 'utf8').digest('base64');
    if (!sameText(mine, claimed)) {
      throw new S3Error(
        'SignatureDoesNotMatch',
        403,
        'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
      );
    }
    const signed = new Set(['content-md5', 'content-type', ...Object.keys(req.headers).filter((h) => h.startsWith('x-amz-'))]);
    if (expires === undefined) signed.add('date');
    return { principal: cred.principal, payload: 'UNSIGNED-PAYLOAD', signedHeaders: signed };
  }

  /** `Authorization: AWS <key>:<base64 HMAC-SHA1>`, dated by x-amz-date or Date. */
  async #verifyV2Header(req: SignedRequest, authorization: string): Promise<Authenticated> {
    const m = /^AWS\s+([^:\s]+):(\S+)\s*$/.exec(authorization);
    if (!m) throw new S3Error('InvalidArgument', 400, 'AWS authorization header is invalid.  Expected AwsAccessKeyId:signature');
    const dateText = header(req.headers, 'x-amz-date') ?? header(req.headers, 'date');
    const date = dateText === undefined ? NaN : Date.parse(dateText);
    if (Number.isNaN(date)) throw denied('AWS authentication requires a valid Date or x-amz-date header');
    if (Math.abs(this.#now() - date) > MAX_SKEW_MS) {
      throw new S3Error('RequestTimeTooSkewed', 403, 'The difference between the request time and the current time is too large.');
    }
    return this.#v2Check(req, this.#v2Credential(m[1]!), m[2]!);
  }

  /** `?AWSAccessKeyId=&Expires=<epoch seconds>&Signature=`: a SigV2 presigned URL. */
  async #verifyV2Query(req: SignedRequest, query: Record<string, string | string[]>): Promise<Authenticated> {
    const [accessKey, expires, signature] = ['AWSAccessKeyId', 'Expires', 'Signature'].map((name) => query[name]);
    if (typeof accessKey !== 'string' || typeof expires !== 'string' || typeof signature !== 'string' || !accessKey || !signature) {
      throw denied('Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters');
    }
    if (!/^\d{1,12}$/.test(expires)) throw denied(`Invalid date (should be seconds since epoch): ${expires}`);
    const until = Number(expires) * 1000;
    const now = this.#now();
    if (now > until) throw denied('Request has expired');
    // V2 has no limit of its own; the V4 one keeps a leaked URL from living for years.
    if (until - now > MAX_PRESIGN_SECONDS * 1000 + MAX_SKEW_MS) {
      throw new S3Error('AuthorizationQueryParametersError', 400, 'Expires must be at most 604800 seconds (7 days) from now.');
    }
    return this.#v2Check(req, this.#v2Credential(accessKey), signature, expires);
  }

  #request(req: SignedRequest, rawPath: string, query: Record<string, string | string[]>, signed: string[]) {
    const headers: Record<string, string> = Object.create(null);
    for (const name of signed) {
      const value = header(req.headers, name);
      if (value === undefined)
        throw new S3Error(
          'SignatureDoesNotMatch',
          403,
          `The request signature we calculated does not match the signature you provided: signed header "${name}" is missing.`,
        );
      headers[name] = value;
    }
    const host = header(req.headers, 'host') ?? '';
    return { method: req.method, protocol: 'http:', hostname: host.replace(/:\d+$/, ''), path: canonicalPath(rawPath), query, headers };
  }

  async #verifyHeader(req: SignedRequest, rawPath: string, query: Record<string, string | string[]>, authorization: string): Promise<Authenticated> {
    const m = /^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})\s*$/.exec(authorization);
    if (!m) throw new S3Error('AuthorizationHeaderMalformed', 400, 'The authorization header is malformed.');
    const scope = parseCredential(m[1]!);
    const signed = m[2]!.split(';');
    const date = parseAmzDate(header(req.headers, 'x-amz-date'));
    if (!date) throw denied('AWS authentication requires a valid x-amz-date header.');
    if (Math.abs(this.#now() - date.getTime()) > MAX_SKEW_MS) {
      throw new S3Error('RequestTimeTooSkewed', 403, 'The difference between the request time and the server time is too large.');
    }
    const cred = this.#credential(scope, date);
    if (!signed.includes('host')) throw denied('The host header must be signed.');
    const payload = header(req.headers, 'x-amz-content-sha256') ?? EMPTY_SHA256;
    const request = this.#request(
      req,
      rawPath,
      query,
      signed.filter((h) => h !== 'x-amz-date'),
    );
    request.headers['x-amz-content-sha256'] ??= payload;
    const signer = await this.#signer(scope.accessKey, cred.secret);
    const unsignable = new Set(['x-amz-content-sha256'].filter((h) => !signed.includes(h)));
    const out = await signer.sign(request, { signingDate: date, signableHeaders: new Set(signed), unsignableHeaders: unsignable });
    const mine = /Signature=([0-9a-f]{64})/.exec(String(out.headers.authorization))?.[1] ?? '';
    const mineHeaders = /SignedHeaders=([^,\s]+)/.exec(String(out.headers.authorization))?.[1];
    if (!sameText(mine, m[3]!) || mineHeaders !== signed.join(';')) {
      throw new S3Error(
        'SignatureDoesNotMatch',
        403,
        'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
      );
    }
    const auth: Authenticated = { principal: cred.principal, payload, signedHeaders: new Set(signed) };
    if (payload.startsWith('STREAMING-AWS4-HMAC-SHA256-PAYLOAD')) {
      auth.chunks = new ChunkSigner(signer, date, `${scope.date}/${scope.region}/s3/aws4_request`, m[3]!);
    }
    return auth;
  }

  async #verifyQuery(req: SignedRequest, rawPath: string, query: Record<string, string | string[]>): Promise<Authenticated> {
    const one = (name: string): string => {
      const v = query[name];
      if (typeof v !== 'string')
        throw new S3Error('AuthorizationQueryParametersError', 400, `Query-string authentication requires exactly one ${name} parameter.`);
      return v;
    };
    if (one('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') throw new S3Error('AuthorizationQueryParametersError', 400, 'X-Amz-Algorithm must be AWS4-HMAC-SHA256.');
    const scope = parseCredential(one('X-Amz-Credential'));
    const date = parseAmzDate(one('X-Amz-Date'));
    if (!date) throw new S3Error('AuthorizationQueryParametersError', 400, 'X-Amz-Date must be in the ISO8601 long format (yyyyMMddTHHmmssZ).');
    const expiresText = one('X-Amz-Expires');
    const expires = /^\d{1,7}$/.test(expiresText) ? Number(expiresText) : NaN;
    if (!(expires >= 1 && expires <= MAX_PRESIGN_SECONDS)) {
      throw new S3Error('AuthorizationQueryParametersError', 400, 'X-Amz-Expires must be a number of seconds from 1 to 604800.');
    }
    const now = this.#now();
    if (date.getTime() - now > MAX_SKEW_MS) throw denied('Request is not valid yet');
    if (now > date.getTime() + expires * 1000) throw denied('Request has expired');
    const signature = one('X-Amz-Signature');
    const signed = one('X-Amz-SignedHeaders').split(';');
    if (!signed.includes('host')) throw denied('The host header must be signed.');
    const cred = this.#credential(scope, date);
    const rest: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(query)) {
      if (!['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-SignedHeaders', 'X-Amz-Signature'].includes(k)) rest[k] = v;
    }
    const request = this.#request(req, rawPath, rest, signed);
    // The payload of a presigned request is never hashed: UNSIGNED-PAYLOAD, or what the URL says.
    const payload = typeof rest['X-Amz-Content-Sha256'] === 'string' ? rest['X-Amz-Content-Sha256'] : 'UNSIGNED-PAYLOAD';
    const names = new Set(Object.keys(request.headers));
    request.headers['x-amz-content-sha256'] = payload;
    const signer = await this.#signer(scope.accessKey, cred.secret);
    const out = await signer.presign(request, {
      signingDate: date,
      expiresIn: expires,
      signableHeaders: new Set(signed),
      unsignableHeaders: new Set(['x-amz-content-sha256'].filter((h) => !signed.includes(h))),
      unhoistableHeaders: new Set([...names, 'x-amz-content-sha256']),
    });
    const mine = String(out.query?.['X-Amz-Signature'] ?? '');
    if (!sameText(mine, signature) || out.query?.['X-Amz-SignedHeaders'] !== signed.join(';')) {
      // The usual cause with a URL from upload phase 1: a Content-Type or size other than the
      // declared one, both of which the URL signs. Say which headers count, not their values.
      const headers = signed.filter((h) => h !== 'host');
      throw new S3Error(
        'SignatureDoesNotMatch',
        403,
        `The request signature we calculated does not match the signature you provided. Check your key and signing method.${headers.length ? ` This URL signs ${headers.join(', ')}: send exactly the values it was made for.` : ''}`,
      );
    }
    return { principal: cred.principal, payload: 'UNSIGNED-PAYLOAD', signedHeaders: new Set(signed) };
  }
}

/**
 * Query parameters that are part of a SigV2 CanonicalizedResource: the sub-resources and the
 * response overrides (AWS's list, with the ones botocore and s3cmd add). Others are not signed.
 */
const V2_SUBRESOURCES = new Set([
  'accelerate',
  'acl',
  'analytics',
  'cors',
  'delete',
  'inventory',
  'lifecycle',
  'location',
  'logging',
  'metrics',
  'notification',
  'object-lock',
  'partNumber',
  'policy',
  'replication',
  'requestPayment',
  'restore',
  'select',
  'select-type',
  'storageClass',
  'tagging',
  'torrent',
  'uploadId',
  'uploads',
  'versionId',
  'versioning',
  'versions',
  'website',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'response-content-language',
  'response-content-type',
  'response-expires',
]);

/**
 * The SigV2 StringToSign of a path-style request: verb, Content-MD5, Content-Type, the date
 * (`expires` for a query-signed URL; empty when x-amz-date is sent, which is then signed with the
 * other x-amz-* headers), the x-amz-* headers (lower-case, sorted, repeated values joined by ","),
 * and the resource: the path as sent, with the sub-resources sorted by name, values decoded.
 */
export function stringToSignV2(req: SignedRequest, expires?: string): string {
  const q = req.url.indexOf('?');
  const rawPath = q < 0 ? req.url : req.url.slice(0, q);
  const subresources: [string, string][] = [];
  // Only the names whose presence matters: a valueless `?acl` signs as "acl", not "acl=".
  for (const pair of q < 0 ? [] : req.url.slice(q + 1).split('&')) {
    if (!pair) continue;
    const at = pair.indexOf('=');
    let name: string;
    let value: string | undefined;
    try {
      name = decodeURIComponent((at < 0 ? pair : pair.slice(0, at)).replace(/\+/g, ' '));
      value = at < 0 ? undefined : decodeURIComponent(pair.slice(at + 1).replace(/\+/g, ' '));
    } catch {
      throw new S3Error('InvalidURI', 400, "Couldn't parse the specified URI.");
    }
    if (V2_SUBRESOURCES.has(name)) subresources.push([name, value === undefined || value === '' ? name : `${name}=${value}`]);
  }
  subresources.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const resource = subresources.length ? `${rawPath}?${subresources.map(([, s]) => s).join('&')}` : rawPath;
  const amz = Object.keys(req.headers)
    .map((h) => h.toLowerCase())
    .filter((h) => h.startsWith('x-amz-'))
    .sort()
    .map((h) => {
      const values = req.headersDistinct?.[h] ?? [header(req.headers, h) ?? ''];
      return `${h}:${values.map((v) => v.trim().replace(/\s*\r?\n\s*/g, ' ')).join(',')}\n`;
    })
    .join('');
  const date = expires ?? (header(req.headers, 'x-amz-date') !== undefined ? '' : (header(req.headers, 'date') ?? ''));
  return `${req.method}\n${header(req.headers, 'content-md5') ?? ''}\n${header(req.headers, 'content-type') ?? ''}\n${date}\n${amz}${resource}`;
}

/**
 * Signatures of the chunks of a `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` body: each one signs the
 * previous signature and the chunk's SHA-256 with the request's signing key (via smithy's
 * signString). The string to sign is the one AWS documents for chunked uploads.
 */
export class ChunkSigner {
  readonly #signer: SignatureV4;
  readonly #date: Date;
  readonly #longDate: string;
  readonly #scope: string;
  #previous: string;

  constructor(signer: SignatureV4, date: Date, scope: string, seed: string) {
    this.#signer = signer;
    this.#date = date;
    this.#longDate = date
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d{3}/, '');
    this.#scope = scope;
    this.#previous = seed;
  }

  /** Checks the signature of the next chunk (its bytes' SHA-256 as hex). */
  async chunk(sha256Hex: string, claimed: string): Promise<void> {
    const text = ['AWS4-HMAC-SHA256-PAYLOAD', this.#longDate, this.#scope, this.#previous, EMPTY_SHA256, sha256Hex].join('\n');
    await this.#check(text, claimed);
  }

  /** Checks the trailer's signature (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER). */
  async trailer(trailerText: string, claimed: string): Promise<void> {
    const hash = createHash('sha256').update(trailerText, 'utf8').digest('hex');
    const text = ['AWS4-HMAC-SHA256-TRAILER', this.#longDate, this.#scope, this.#previous, hash].join('\n');
    await this.#check(text, claimed);
  }

  async #check(text: string, claimed: string): Promise<void> {
    const region = this.#scope.split('/')[1];
    const mine = await this.#signer.sign(text, { signingDate: this.#date, signingRegion: region });
    if (!sameText(mine, claimed))
      throw new S3Error('SignatureDoesNotMatch', 403, 'The chunk signature we calculated does not match the signature you provided.');
    this.#previous = mine;
  }
}
