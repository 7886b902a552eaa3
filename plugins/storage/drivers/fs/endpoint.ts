/**
 * The embedded store's S3-compatible HTTP endpoint (path-style: `/<bucket>/<key>`). Every request
 * but a CORS preflight must carry AWS Signature V4 (header or presigned query); a bucket key may
 * touch its own bucket only, the root key everything. Errors are S3's XML bodies and codes.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { Logger } from '../../../../core/logger.ts';
import { type Authenticated, type Principal, type Verifier } from './auth.ts';
import { checkSha256, dechunk, exactLength, readSmall } from './body.ts';
import { MAX_KEY_BYTES, MAX_PARTS, type ObjectMeta, type ObjectRow, type ObjectStore, S3Error } from './objects.ts';
import type { BucketQuota, QuotaHold } from './quota.ts';
import { child, childrenNamed, el, esc, parseXml, S3_NS, XML_HEAD, type XmlNode } from './xml.ts';

/** S3's largest single PUT (and part). */
export const MAX_PUT_BYTES = 5 * 1024 ** 3;
const MAX_XML_BYTES = 2 * 1024 * 1024;
const STORED_HEADERS = ['content-encoding', 'content-disposition', 'cache-control', 'content-language', 'expires'];
const RESPONSE_OVERRIDES: Record<string, string> = {
  'response-content-type': 'content-type',
  'response-content-disposition': 'content-disposition',
  'response-content-encoding': 'content-encoding',
  'response-content-language': 'content-language',
  'response-cache-control': 'cache-control',
  'response-expires': 'expires',
};

export interface EndpointOptions {
  store: ObjectStore;
  verifier: Verifier;
  region: string;
  log: Logger;
  /** The app storage limits every write is admitted against. */
  quota: BucketQuota;
}

interface Target {
  bucket: string;
  key: string;
  query: URLSearchParams;
}

const malformed = () => new S3Error('MalformedXML', 400, 'The XML you provided was not well-formed or did not validate against our published schema.');

function may(principal: Principal, bucket: string | undefined, admin: boolean): boolean {
  if (principal.kind === 'root' || principal.kind === 'service') return true;
  return !admin && bucket !== undefined && principal.bucket === bucket;
}

function parseTarget(url: string): Target {
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  if (!rawPath.startsWith('/')) throw new S3Error('InvalidURI', 400, "Couldn't parse the specified URI.");
  const slash = rawPath.indexOf('/', 1);
  let bucket: string;
  let key: string;
  try {
    bucket = decodeURIComponent(slash < 0 ? rawPath.slice(1) : rawPath.slice(1, slash));
    key = slash < 0 ? '' : decodeURIComponent(rawPath.slice(slash + 1));
  } catch {
    throw new S3Error('InvalidURI', 400, "Couldn't parse the specified URI.");
  }
  if (key.includes('\0')) throw new S3Error('InvalidArgument', 400, 'Object keys may not contain NUL characters.');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new S3Error('KeyTooLongError', 400, 'Your key is too long.');
  return { bucket, key, query };
}

function metaFrom(headers: http.IncomingHttpHeaders): ObjectMeta {
  const user: Record<string, string> = {};
  const stored: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const v = Array.isArray(value) ? value.join(',') : value;
    if (name.startsWith('x-amz-meta-')) user[name.slice(11)] = v;
    else if (STORED_HEADERS.includes(name)) stored[name] = v;
  }
  // aws-chunked is how the body travelled, not how the object is encoded.
  if (stored['content-encoding']) {
    const rest = stored['content-encoding'].split(',').map((s) => s.trim()).filter((s) => s && s !== 'aws-chunked');
    if (rest.length) stored['content-encoding'] = rest.join(', ');
    else delete stored['content-encoding'];
  }
  const type = headers['content-type'];
  return { contentType: type || 'application/octet-stream', user, headers: stored };
}

const iso = (ms: number) => new Date(ms).toISOString();
const quoted = (etag: string) => `"${etag}"`;

/** S3's `encoding-type=url`: each path segment percent-encoded, `/` kept. */
function urlEncodeKey(key: string): string {
  return key
    .split('/')
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
}

function intParam(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const v = query.get(name);
  if (v === null || v === '') return fallback;
  if (!/^\d+$/.test(v)) throw new S3Error('InvalidArgument', 400, `${name} must be a non-negative integer.`);
  return Math.min(Number(v), max);
}

export function createEndpoint({ store, verifier, region, log, quota }: EndpointOptions): http.Server {
  const server = http.createServer((req, res) => {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('server', 'Wharf');
    const origin = req.headers.origin;
    if (origin) {
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader('access-control-expose-headers', 'ETag, Content-Length, Content-Range, x-amz-request-id, x-amz-version-id, x-amz-checksum-crc32, x-amz-checksum-sha256');
    }
    handle(req, res, requestId).catch((err: unknown) => sendError(req, res, err, requestId));
  });
  server.keepAliveTimeout = 30_000;
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  // A client that sends `Expect: 100-continue` (the AWS SDK does from 2 MiB) is told to go on
  // only when its body is about to be read: after authentication and the storage limit, so a
  // refused upload is never sent at all.
  const awaitingContinue = new WeakMap<http.IncomingMessage, http.ServerResponse>();
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    awaitingContinue.set(req, res);
    server.emit('request', req, res);
  });
  function sendContinue(req: http.IncomingMessage): void {
    const res = awaitingContinue.get(req);
    if (!res) return;
    awaitingContinue.delete(req);
    res.writeContinue();
  }

  function sendError(req: http.IncomingMessage, res: http.ServerResponse, err: unknown, requestId: string): void {
    let e: S3Error;
    if (err instanceof S3Error) e = err;
    else if ((err as NodeJS.ErrnoException)?.code === 'ENOSPC' || (err as NodeJS.ErrnoException)?.code === 'EDQUOT') {
      e = new S3Error('XWharfStorageFull', 507, 'The disk of the object store is full; nothing was stored.');
      log.error({ err }, 'object store disk full');
    } else {
      e = new S3Error('InternalError', 500, 'We encountered an internal error. Please try again.');
      log.error({ err, method: req.method, url: req.url }, 'object store request failed');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body =
      req.method === 'HEAD'
        ? ''
        : `${XML_HEAD}<Error>${el('Code', e.code)}${el('Message', e.message)}${el('Resource', (req.url ?? '').split('?')[0])}${el('RequestId', requestId)}</Error>`;
    res.statusCode = e.status;
    res.setHeader('content-type', 'application/xml');
    res.setHeader('content-length', Buffer.byteLength(body));
    // Let the client stop sending a body we refused without reading it.
    if (!req.complete) res.setHeader('connection', 'close');
    res.end(body);
  }

  function sendXml(res: http.ServerResponse, body: string, status = 200): void {
    const text = `${XML_HEAD}${body}`;
    res.statusCode = status;
    res.setHeader('content-type', 'application/xml');
    res.setHeader('content-length', Buffer.byteLength(text));
    res.end(text);
  }

  function sendEmpty(res: http.ServerResponse, status = 200, headers: Record<string, string> = {}): void {
    res.statusCode = status;
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.setHeader('content-length', 0);
    res.end();
  }

  /** The body as bytes, decoded and checked per the signing mode. */
  function bodyOf(req: http.IncomingMessage, auth: Authenticated): AsyncIterable<Buffer> {
    sendContinue(req);
    const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
    const encodings = String(req.headers['content-encoding'] ?? '').split(',').map((s) => s.trim());
    const streaming = auth.payload.startsWith('STREAMING-');
    if (streaming || encodings.includes('aws-chunked')) {
      const decodedText = req.headers['x-amz-decoded-content-length'];
      const decoded = decodedText === undefined ? undefined : Number(decodedText);
      if (decoded !== undefined && !(Number.isSafeInteger(decoded) && decoded >= 0)) throw new S3Error('InvalidArgument', 400, 'x-amz-decoded-content-length is not a number.');
      const signed = auth.payload.startsWith('STREAMING-AWS4-HMAC-SHA256-PAYLOAD');
      const trailer = auth.payload.endsWith('-TRAILER') || req.headers['x-amz-trailer'] !== undefined;
      return exactLength(dechunk(req, { signer: signed ? auth.chunks : undefined, trailer }), decoded, MAX_PUT_BYTES);
    }
    if (declared === undefined && req.headers['transfer-encoding'] === undefined) throw new S3Error('MissingContentLength', 411, 'You must provide the Content-Length HTTP header.');
    const plain = exactLength(req, declared, MAX_PUT_BYTES);
    if (/^[0-9a-fA-F]{64}$/.test(auth.payload)) return checkSha256(plain, auth.payload);
    return plain;
  }

  /** The body's length as declared before it is read (decoded, for aws-chunked), or undefined when unknown. */
  function declaredLength(req: http.IncomingMessage, auth: Authenticated): number | undefined {
    const chunked = auth.payload.startsWith('STREAMING-') || String(req.headers['content-encoding'] ?? '').split(',').some((s) => s.trim() === 'aws-chunked');
    const text = chunked ? req.headers['x-amz-decoded-content-length'] : req.headers['content-length'];
    const n = text === undefined ? NaN : Number(text);
    return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
  }

  async function receiveChecked(req: http.IncomingMessage, auth: Authenticated, hold: QuotaHold) {
    const received = await store.receive(hold.meter(bodyOf(req, auth)));
    const md5 = req.headers['content-md5'];
    if (md5 !== undefined && Buffer.from(String(md5), 'base64').toString('hex') !== received.md5.toString('hex')) {
      await store.discard(received);
      throw new S3Error('BadDigest', 400, 'The Content-MD5 you specified did not match what we received.');
    }
    return received;
  }

  async function readXml(req: http.IncomingMessage, auth: Authenticated): Promise<XmlNode> {
    const raw = await readSmall(bodyOf(req, auth), MAX_XML_BYTES);
    try {
      return parseXml(raw.toString('utf8'));
    } catch {
      throw malformed();
    }
  }

  function objectHeaders(res: http.ServerResponse, row: ObjectRow, query: URLSearchParams): void {
    res.setHeader('etag', quoted(row.etag));
    res.setHeader('last-modified', new Date(row.lastModified).toUTCString());
    res.setHeader('accept-ranges', 'bytes');
    res.setHeader('content-type', row.meta.contentType);
    for (const [k, v] of Object.entries(row.meta.headers)) res.setHeader(k, v);
    for (const [k, v] of Object.entries(row.meta.user)) res.setHeader(`x-amz-meta-${k}`, v);
    for (const [param, name] of Object.entries(RESPONSE_OVERRIDES)) {
      const v = query.get(param);
      if (v !== null) res.setHeader(name, v);
    }
  }

  /** 304/412 for conditional requests, or undefined to go on. */
  function precondition(req: http.IncomingMessage, row: ObjectRow): number | undefined {
    const etag = quoted(row.etag);
    const ifMatch = req.headers['if-match'];
    if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.split(',').map((s) => s.trim()).includes(etag)) return 412;
    const ifNone = req.headers['if-none-match'];
    if (ifNone !== undefined && (ifNone === '*' || ifNone.split(',').map((s) => s.trim()).includes(etag))) return 304;
    const since = req.headers['if-modified-since'];
    if (ifNone === undefined && since !== undefined && Math.floor(row.lastModified / 1000) * 1000 <= Date.parse(since)) return 304;
    return undefined;
  }

  async function getObject(req: http.IncomingMessage, res: http.ServerResponse, t: Target, head: boolean): Promise<void> {
    if (head) {
      const row = store.head(t.bucket, t.key);
      if (!row) {
        store.requireBucket(t.bucket);
        throw new S3Error('NoSuchKey', 404, 'Not Found');
      }
      const pre = precondition(req, row);
      if (pre) throw new S3Error(pre === 304 ? 'NotModified' : 'PreconditionFailed', pre, 'At least one of the preconditions you specified did not hold.');
      objectHeaders(res, row, t.query);
      res.setHeader('content-length', row.size);
      res.end();
      return;
    }
    const { row, handle } = await store.open(t.bucket, t.key);
    try {
      const pre = precondition(req, row);
      if (pre === 304) {
        await handle.close();
        res.statusCode = 304;
        res.setHeader('etag', quoted(row.etag));
        res.end();
        return;
      }
      if (pre) throw new S3Error('PreconditionFailed', 412, 'At least one of the preconditions you specified did not hold.');
      let start = 0;
      let end = row.size - 1;
      const range = req.headers.range;
      let partial = false;
      if (range !== undefined) {
        const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
        if (m && (m[1] || m[2])) {
          if (m[1]) {
            start = Number(m[1]);
            end = m[2] ? Math.min(Number(m[2]), row.size - 1) : row.size - 1;
          } else {
            start = Math.max(0, row.size - Number(m[2]));
          }
          if (start >= row.size || start > end) {
            res.setHeader('content-range', `bytes */${row.size}`);
            throw new S3Error('InvalidRange', 416, 'The requested range is not satisfiable');
          }
          partial = true;
        }
      }
      objectHeaders(res, row, t.query);
      const length = row.size === 0 ? 0 : end - start + 1;
      res.setHeader('content-length', length);
      if (partial) {
        res.statusCode = 206;
        res.setHeader('content-range', `bytes ${start}-${end}/${row.size}`);
      }
      if (length === 0) {
        await handle.close();
        res.end();
        return;
      }
      const stream = handle.createReadStream({ start, end, highWaterMark: 1 << 20 });
      await new Promise<void>((resolve, reject) => {
        stream.on('error', reject);
        res.on('close', resolve);
        stream.pipe(res);
      });
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  function listV2(res: http.ServerResponse, t: Target): void {
    store.requireBucket(t.bucket);
    const q = t.query;
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const maxKeys = intParam(q, 'max-keys', 1000, 1000);
    const token = q.get('continuation-token');
    const startAfter = q.get('start-after') ?? '';
    const encode = q.get('encoding-type') === 'url';
    let from = startAfter;
    let skipUnder = false;
    if (token !== null) {
      const decoded = Buffer.from(token, 'base64url').toString('utf8');
      if (!/^[KP]/.test(decoded)) throw new S3Error('InvalidArgument', 400, 'The continuation token provided is incorrect');
      from = decoded.slice(1);
      skipUnder = decoded[0] === 'P';
    }
    const out = store.list(t.bucket, { prefix, delimiter, startAfter: from, skipUnder, maxKeys });
    const k = (s: string) => (encode ? urlEncodeKey(s) : s);
    const lastIsPrefix = out.last !== undefined && out.commonPrefixes[out.commonPrefixes.length - 1] === out.last;
    const next = out.truncated && out.last !== undefined ? Buffer.from(`${lastIsPrefix ? 'P' : 'K'}${out.last}`).toString('base64url') : undefined;
    const owner = q.get('fetch-owner') === 'true' ? '<Owner><ID>wharf</ID><DisplayName>wharf</DisplayName></Owner>' : '';
    sendXml(
      res,
      `<ListBucketResult xmlns="${S3_NS}">${el('Name', t.bucket)}${el('Prefix', k(prefix))}${delimiter ? el('Delimiter', k(delimiter)) : ''}${el('MaxKeys', maxKeys)}${el('KeyCount', out.contents.length + out.commonPrefixes.length)}${el('IsTruncated', out.truncated)}${token !== null ? el('ContinuationToken', token) : ''}${el('NextContinuationToken', next)}${startAfter ? el('StartAfter', k(startAfter)) : ''}${encode ? el('EncodingType', 'url') : ''}${out.contents
        .map((o) => `<Contents>${el('Key', k(o.key))}${el('LastModified', iso(o.lastModified))}${el('ETag', quoted(o.etag))}${el('Size', o.size)}${owner}<StorageClass>STANDARD</StorageClass></Contents>`)
        .join('')}${out.commonPrefixes.map((p) => `<CommonPrefixes>${el('Prefix', k(p))}</CommonPrefixes>`).join('')}</ListBucketResult>`,
    );
  }

  function listV1(res: http.ServerResponse, t: Target): void {
    store.requireBucket(t.bucket);
    const q = t.query;
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const maxKeys = intParam(q, 'max-keys', 1000, 1000);
    const marker = q.get('marker') ?? '';
    const encode = q.get('encoding-type') === 'url';
    const skipUnder = delimiter !== '' && marker.endsWith(delimiter) && marker.startsWith(prefix) && marker.indexOf(delimiter, prefix.length) === marker.length - delimiter.length;
    const out = store.list(t.bucket, { prefix, delimiter, startAfter: marker, skipUnder, maxKeys });
    const k = (s: string) => (encode ? urlEncodeKey(s) : s);
    sendXml(
      res,
      `<ListBucketResult xmlns="${S3_NS}">${el('Name', t.bucket)}${el('Prefix', k(prefix))}${el('Marker', k(marker))}${delimiter ? el('Delimiter', k(delimiter)) : ''}${el('MaxKeys', maxKeys)}${el('IsTruncated', out.truncated)}${out.truncated && out.last !== undefined ? el('NextMarker', k(out.last)) : ''}${encode ? el('EncodingType', 'url') : ''}${out.contents
        .map((o) => `<Contents>${el('Key', k(o.key))}${el('LastModified', iso(o.lastModified))}${el('ETag', quoted(o.etag))}${el('Size', o.size)}<Owner><ID>wharf</ID><DisplayName>wharf</DisplayName></Owner><StorageClass>STANDARD</StorageClass></Contents>`)
        .join('')}${out.commonPrefixes.map((p) => `<CommonPrefixes>${el('Prefix', k(p))}</CommonPrefixes>`).join('')}</ListBucketResult>`,
    );
  }

  async function deleteObjects(req: http.IncomingMessage, res: http.ServerResponse, t: Target, auth: Authenticated): Promise<void> {
    store.requireBucket(t.bucket);
    const doc = await readXml(req, auth);
    if (doc.name !== 'Delete') throw malformed();
    const objects = childrenNamed(doc, 'Object');
    if (!objects.length || objects.length > 1000) throw malformed();
    const quiet = child(doc, 'Quiet')?.text.trim() === 'true';
    const keys = objects.map((o) => {
      const key = child(o, 'Key');
      if (!key) throw malformed();
      return key.text;
    });
    let body = '';
    const valid: string[] = [];
    for (const key of keys) {
      if (key.includes('\0') || Buffer.byteLength(key) > MAX_KEY_BYTES) {
        body += `<Error>${el('Key', key.replace(/\0/g, ''))}<Code>InvalidArgument</Code><Message>Invalid key</Message></Error>`;
        continue;
      }
      valid.push(key);
    }
    await store.deleteMany(t.bucket, valid);
    if (!quiet) for (const key of valid) body += `<Deleted>${el('Key', key)}</Deleted>`;
    sendXml(res, `<DeleteResult xmlns="${S3_NS}">${body}</DeleteResult>`);
  }

  async function copyObject(req: http.IncomingMessage, res: http.ServerResponse, t: Target, principal: Principal): Promise<void> {
    let source = String(req.headers['x-amz-copy-source']);
    source = source.split('?')[0]!;
    let decoded: string;
    try {
      decoded = decodeURIComponent(source).replace(/^\//, '');
    } catch {
      throw new S3Error('InvalidArgument', 400, 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey.');
    }
    const slash = decoded.indexOf('/');
    if (slash <= 0) throw new S3Error('InvalidArgument', 400, 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey.');
    const src = { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1) };
    if (!may(principal, src.bucket, false)) throw new S3Error('AccessDenied', 403, 'Access Denied');
    const replace = String(req.headers['x-amz-metadata-directive'] ?? 'COPY').toUpperCase() === 'REPLACE';
    if (!replace && src.bucket === t.bucket && src.key === t.key) {
      throw new S3Error('InvalidRequest', 400, 'This copy request is illegal because it is trying to copy an object to itself without changing the object\'s metadata.');
    }
    const row = await quota.write(principal, t.bucket, { kind: 'object', key: t.key }, store.head(src.bucket, src.key)?.size ?? 0, (hold) =>
      store.copy(src, { bucket: t.bucket, key: t.key }, replace ? metaFrom(req.headers) : undefined, (body) => hold.meter(body)),
    );
    sendXml(res, `<CopyObjectResult xmlns="${S3_NS}">${el('LastModified', iso(row.lastModified))}${el('ETag', quoted(row.etag))}</CopyObjectResult>`);
  }

  async function completeUpload(req: http.IncomingMessage, res: http.ServerResponse, t: Target, auth: Authenticated, uploadId: string): Promise<void> {
    const upload = store.upload(t.bucket, t.key, uploadId);
    const doc = await readXml(req, auth);
    if (doc.name !== 'CompleteMultipartUpload') throw malformed();
    const parts = childrenNamed(doc, 'Part').map((p) => {
      const n = child(p, 'PartNumber')?.text.trim() ?? '';
      const etag = child(p, 'ETag')?.text.trim();
      if (!/^\d{1,5}$/.test(n) || etag === undefined) throw malformed();
      return { partNumber: Number(n), etag };
    });
    if (!parts.length) throw malformed();
    const listed = [...new Set(parts.map((p) => p.partNumber))].reduce((sum, n) => sum + store.partSize(upload.id, n), 0);
    const row = await quota.write(auth.principal, t.bucket, { kind: 'complete', key: t.key, upload: upload.id }, listed, () => store.complete(upload, parts));
    const host = req.headers.host ?? '';
    sendXml(
      res,
      `<CompleteMultipartUploadResult xmlns="${S3_NS}">${el('Location', `http://${host}/${t.bucket}/${urlEncodeKey(t.key)}`)}${el('Bucket', t.bucket)}${el('Key', t.key)}${el('ETag', quoted(row.etag))}</CompleteMultipartUploadResult>`,
    );
  }

  function listParts(res: http.ServerResponse, t: Target, uploadId: string): void {
    const upload = store.upload(t.bucket, t.key, uploadId);
    const marker = intParam(t.query, 'part-number-marker', 0, MAX_PARTS);
    const max = intParam(t.query, 'max-parts', 1000, 1000);
    const all = store.parts(upload.id).filter((p) => p.partNumber > marker);
    const page = all.slice(0, max);
    const truncated = all.length > max;
    sendXml(
      res,
      `<ListPartsResult xmlns="${S3_NS}">${el('Bucket', t.bucket)}${el('Key', t.key)}${el('UploadId', uploadId)}${el('PartNumberMarker', marker)}${el('NextPartNumberMarker', page.length ? page[page.length - 1]!.partNumber : marker)}${el('MaxParts', max)}${el('IsTruncated', truncated)}<StorageClass>STANDARD</StorageClass>${page
        .map((p) => `<Part>${el('PartNumber', p.partNumber)}${el('LastModified', iso(p.lastModified))}${el('ETag', quoted(p.etag))}${el('Size', p.size)}</Part>`)
        .join('')}</ListPartsResult>`,
    );
  }

  function listUploads(res: http.ServerResponse, t: Target): void {
    store.requireBucket(t.bucket);
    const q = t.query;
    const max = intParam(q, 'max-uploads', 1000, 1000);
    const prefix = q.get('prefix') ?? '';
    const keyMarker = q.get('key-marker') ?? '';
    const uploadIdMarker = q.get('upload-id-marker') ?? '';
    const { uploads, truncated } = store.listUploads(t.bucket, { prefix, keyMarker, uploadIdMarker, max });
    const last = uploads[uploads.length - 1];
    sendXml(
      res,
      `<ListMultipartUploadsResult xmlns="${S3_NS}">${el('Bucket', t.bucket)}${el('KeyMarker', keyMarker)}${el('UploadIdMarker', uploadIdMarker)}${el('NextKeyMarker', truncated ? last?.key : undefined)}${el('NextUploadIdMarker', truncated ? last?.id : undefined)}${el('Prefix', prefix)}${el('MaxUploads', max)}${el('IsTruncated', truncated)}${uploads
        .map((u) => `<Upload>${el('Key', u.key)}${el('UploadId', u.id)}${el('Initiated', iso(u.initiated))}<StorageClass>STANDARD</StorageClass></Upload>`)
        .join('')}</ListMultipartUploadsResult>`,
    );
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    if (method === 'OPTIONS') {
      // CORS preflight for browser uploads to presigned URLs: the signature is the credential.
      if (!req.headers.origin || !req.headers['access-control-request-method']) throw new S3Error('BadRequest', 400, 'Insufficient information. Origin request header needed.');
      sendEmpty(res, 200, {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, PUT, HEAD, POST, DELETE',
        'access-control-allow-headers': String(req.headers['access-control-request-headers'] ?? '*'),
        'access-control-max-age': '3600',
      });
      return;
    }
    const t = parseTarget(req.url ?? '/');
    const auth = await verifier.verify({ method, url: req.url ?? '/', headers: req.headers });
    const principal = auth.principal;
    const deny = () => new S3Error('AccessDenied', 403, 'Access Denied');
    const q = t.query;
    void requestId;

    if (!t.bucket) {
      if (method !== 'GET') throw new S3Error('MethodNotAllowed', 405, 'The specified method is not allowed against this resource.');
      if (!may(principal, undefined, true)) throw deny();
      const buckets = store.listBuckets();
      sendXml(
        res,
        `<ListAllMyBucketsResult xmlns="${S3_NS}"><Owner><ID>wharf</ID><DisplayName>wharf</DisplayName></Owner><Buckets>${buckets
          .map((b) => `<Bucket>${el('Name', b.name)}${el('CreationDate', iso(b.created))}</Bucket>`)
          .join('')}</Buckets></ListAllMyBucketsResult>`,
      );
      return;
    }

    if (!t.key) {
      // Bucket operations.
      if (method === 'PUT' && !q.has('cors') && !q.has('policy')) {
        if (!may(principal, t.bucket, true)) throw deny();
        // Drain a CreateBucketConfiguration, if any.
        sendContinue(req);
        await readSmall(req, MAX_XML_BYTES);
        if (!store.createBucket(t.bucket)) throw new S3Error('BucketAlreadyOwnedByYou', 409, 'Your previous request to create the named bucket succeeded and you already own it.');
        sendEmpty(res, 200, { location: `/${t.bucket}` });
        return;
      }
      if (method === 'DELETE' && q.size === 0) {
        if (!may(principal, t.bucket, true)) throw deny();
        store.deleteBucket(t.bucket);
        sendEmpty(res, 204);
        return;
      }
      if (!may(principal, t.bucket, false)) throw deny();
      if (method === 'HEAD') {
        store.requireBucket(t.bucket);
        sendEmpty(res, 200, { 'x-amz-bucket-region': region });
        return;
      }
      if (method === 'POST' && q.has('delete')) return deleteObjects(req, res, t, auth);
      if (method === 'GET') {
        if (q.has('location')) {
          store.requireBucket(t.bucket);
          sendXml(res, `<LocationConstraint xmlns="${S3_NS}">${region === 'us-east-1' ? '' : esc(region)}</LocationConstraint>`);
          return;
        }
        if (q.has('uploads')) return listUploads(res, t);
        if (q.has('versioning')) {
          store.requireBucket(t.bucket);
          sendXml(res, `<VersioningConfiguration xmlns="${S3_NS}"/>`);
          return;
        }
        const sub = ['acl', 'cors', 'policy', 'lifecycle', 'tagging', 'encryption', 'object-lock', 'notification', 'website', 'logging', 'replication', 'accelerate', 'requestPayment'].find((s) => q.has(s));
        if (sub) throw new S3Error('NotImplemented', 501, `The ${sub} subresource is not supported by this store.`);
        if (q.get('list-type') === '2') return listV2(res, t);
        return listV1(res, t);
      }
      throw new S3Error('NotImplemented', 501, 'A header or query you provided implies functionality this store does not support.');
    }

    // Object operations.
    if (!may(principal, t.bucket, false)) throw deny();
    const uploadId = q.get('uploadId');
    switch (method) {
      case 'GET':
        if (uploadId !== null) return listParts(res, t, uploadId);
        if (['acl', 'tagging', 'attributes', 'retention', 'legal-hold', 'torrent'].some((s) => q.has(s))) throw new S3Error('NotImplemented', 501, 'This object subresource is not supported by this store.');
        return getObject(req, res, t, false);
      case 'HEAD':
        return getObject(req, res, t, true);
      case 'PUT': {
        if (uploadId !== null) {
          const n = Number(q.get('partNumber'));
          if (!Number.isInteger(n) || n < 1 || n > MAX_PARTS) throw new S3Error('InvalidArgument', 400, 'Part number must be an integer between 1 and 10000, inclusive');
          const upload = store.upload(t.bucket, t.key, uploadId);
          if (req.headers['x-amz-copy-source'] !== undefined) throw new S3Error('NotImplemented', 501, 'UploadPartCopy is not supported by this store.');
          const part = await quota.write(principal, t.bucket, { kind: 'part', upload: upload.id, part: n }, declaredLength(req, auth), async (hold) =>
            store.putPart(upload, n, await receiveChecked(req, auth, hold)),
          );
          sendEmpty(res, 200, { etag: quoted(part.etag) });
          return;
        }
        if (req.headers['x-amz-copy-source'] !== undefined) return copyObject(req, res, t, principal);
        if (['acl', 'tagging', 'retention', 'legal-hold'].some((s) => q.has(s))) throw new S3Error('NotImplemented', 501, 'This object subresource is not supported by this store.');
        store.requireBucket(t.bucket);
        const row = await quota.write(principal, t.bucket, { kind: 'object', key: t.key }, declaredLength(req, auth), async (hold) =>
          store.commit(t.bucket, t.key, await receiveChecked(req, auth, hold), metaFrom(req.headers)),
        );
        sendEmpty(res, 200, { etag: quoted(row.etag) });
        return;
      }
      case 'POST':
        if (q.has('uploads')) {
          const id = store.createUpload(t.bucket, t.key, metaFrom(req.headers));
          sendXml(res, `<InitiateMultipartUploadResult xmlns="${S3_NS}">${el('Bucket', t.bucket)}${el('Key', t.key)}${el('UploadId', id)}</InitiateMultipartUploadResult>`);
          return;
        }
        if (uploadId !== null) return completeUpload(req, res, t, auth, uploadId);
        throw new S3Error('NotImplemented', 501, 'POST object uploads (browser forms) are not supported by this store; use presigned PUT URLs.');
      case 'DELETE':
        if (uploadId !== null) {
          const upload = store.upload(t.bucket, t.key, uploadId);
          store.abort(upload.id);
          sendEmpty(res, 204);
          return;
        }
        store.requireBucket(t.bucket);
        await store.delete(t.bucket, t.key);
        sendEmpty(res, 204);
        return;
      default:
        throw new S3Error('MethodNotAllowed', 405, 'The specified method is not allowed against this resource.');
    }
  }

  return server;
}

/** A hex MD5, for tests and benchmarks. */
export function md5Hex(data: Buffer): string {
  return createHash('md5').update(data).digest('hex');
}
