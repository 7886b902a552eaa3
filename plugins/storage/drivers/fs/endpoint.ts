/**
 * The embedded store's S3-compatible HTTP endpoint (path-style: `/<bucket>/<key>`). Every request
 * but a CORS preflight must carry an AWS signature (V4 or V2, header or presigned query); a
 * bucket key may touch its own bucket only, the root key everything. Errors are S3's XML bodies
 * and codes.
 *
 * Limits: a declared body over 5 GiB is refused before it is read; a request that sends (or
 * reads) nothing for `requestTimeoutMs` is answered RequestTimeout and closed; headers must
 * arrive within `headersTimeoutMs`. `Expect: 100-continue` is answered only once the request is
 * accepted and its body is wanted; other Expect values are ignored, as S3 does.
 *
 * Each write path (PutObject, CopyObject, UploadPart, UploadPartCopy, CompleteMultipartUpload)
 * is one function below that knows how many bytes it is about to store before it stores them.
 */
import { createHash, randomBytes } from 'node:crypto';
import type fsp from 'node:fs/promises';
import http from 'node:http';
import type { Logger } from '../../../../core/logger.ts';
import { answerMalformed } from '../../../../core/malformed.ts';
import { redactUrl } from '../../../../core/redact.ts';
import type { Authenticated, Principal, Verifier } from './auth.ts';
import { type Checksums, checkChecksums, checkSha256, declaredChecksums, dechunk, exactLength, readSmall } from './body.ts';
import {
  MAX_KEY_BYTES,
  MAX_PARTS,
  multipartEtag,
  noSuchUpload,
  type ObjectMeta,
  type ObjectRow,
  type ObjectStore,
  S3Error,
  type UploadRow,
} from './objects.ts';
import type { BucketQuota, QuotaHold } from './quota.ts';
import { child, childrenNamed, el, esc, parseXml, S3_NS, XML_HEAD, type XmlNode } from './xml.ts';

/** S3's largest single PUT (and part). */
export const MAX_PUT_BYTES = 5 * 1024 ** 3;
/** Defaults of the endpoint's timeouts ([plugins.storage.fs] request_timeout_ms, headers_timeout_ms). */
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
const DEFAULT_HEADERS_TIMEOUT_MS = 60_000;
const MAX_XML_BYTES = 2 * 1024 * 1024;
/** An object up to this size is read whole (synchronously, see ObjectStore.readSmall) and answered in one piece instead of a stream. */
const SMALL_READ_BYTES = 256 * 1024;
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
  /** A request that sends or reads nothing for this long is answered RequestTimeout and closed. */
  requestTimeoutMs?: number;
  /** The most a client may take to send a request's headers. */
  headersTimeoutMs?: number;
  /** The app storage limits every write is admitted against. */
  quota: BucketQuota;
}

interface Target {
  bucket: string;
  key: string;
  query: URLSearchParams;
}

const malformed = () => new S3Error('MalformedXML', 400, 'The XML you provided was not well-formed or did not validate against our published schema.');
const tooLarge = () => new S3Error('EntityTooLarge', 400, 'Your proposed upload exceeds the maximum allowed object size.');
const invalidPartNumber = (value: string | null) =>
  new S3Error('InvalidArgument', 400, 'Part number must be an integer between 1 and 10000, inclusive', {
    ArgumentName: 'partNumber',
    ArgumentValue: value ?? '',
  });
const copyRangeForm = (value: string) =>
  new S3Error(
    'InvalidArgument',
    400,
    'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
    {
      ArgumentName: 'x-amz-copy-source-range',
      ArgumentValue: value,
    },
  );

/** Errors a client causes by going away mid-request: not the server's failure. */
const GONE_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE']);

/** `partNumber=` of a GET or HEAD: 1..10000, and not with a Range. */
function partNumberOf(req: http.IncomingMessage, query: URLSearchParams): number | undefined {
  const v = query.get('partNumber');
  if (v === null) return undefined;
  if (!/^\d{1,5}$/.test(v) || Number(v) < 1 || Number(v) > MAX_PARTS) throw invalidPartNumber(v);
  if (req.headers.range !== undefined) throw new S3Error('InvalidRequest', 400, 'Cannot specify both Range header and partNumber query parameter');
  return Number(v);
}

/** A declared `Content-MD5`: 16 bytes in base64, else InvalidDigest; undefined when absent. */
function contentMd5Of(req: http.IncomingMessage): Buffer | undefined {
  const v = req.headers['content-md5'];
  if (v === undefined) return undefined;
  if (!/^[A-Za-z0-9+/]{22}==$/.test(String(v).trim())) throw new S3Error('InvalidDigest', 400, 'The Content-MD5 you specified was invalid.');
  return Buffer.from(String(v).trim(), 'base64');
}

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
  // User metadata names are the client's (x-amz-meta-__proto__): no prototype to reach.
  const user: Record<string, string> = Object.create(null);
  const stored: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const v = Array.isArray(value) ? value.join(',') : value;
    if (name.startsWith('x-amz-meta-')) user[name.slice(11)] = v;
    else if (STORED_HEADERS.includes(name)) stored[name] = v;
  }
  // aws-chunked is how the body travelled, not how the object is encoded.
  if (stored['content-encoding']) {
    const rest = stored['content-encoding']
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s && s !== 'aws-chunked');
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

/** Bytes of one read of a large object's body (GET). */
const READ_BYTES = 1 << 20;

/**
 * Sends bytes `start`..`end` (inclusive) of an open file as the response body, then ends it:
 * reads of {@link READ_BYTES} into two buffers used in turn, the next read in the thread pool
 * while the socket takes the one before; a buffer is read into again only after its write has
 * completed (its bytes are in the kernel). A read stream piped to the response allocated a
 * buffer per read and read the next one only once the socket had drained. A client that goes
 * away ends it quietly (the connection is dropped); a file shorter than its row throws.
 */
async function sendRange(handle: fsp.FileHandle, res: http.ServerResponse, start: number, end: number): Promise<void> {
  const length = end - start + 1;
  const buffers = Array.from({ length: length > READ_BYTES ? 2 : 1 }, () => Buffer.allocUnsafeSlow(Math.min(READ_BYTES, length)));
  /** Fills `buffer` from `at`, as many bytes as are left up to its size. */
  const read = async (buffer: Buffer, at: number): Promise<Buffer> => {
    const want = Math.min(buffer.length, end + 1 - at);
    for (let got = 0; got < want; ) {
      const { bytesRead } = await handle.read(buffer, got, want - got, at + got);
      if (!bytesRead) throw new Error(`the object's file ends at ${at + got} of ${end + 1} bytes`);
      got += bytesRead;
    }
    return buffer.subarray(0, want);
  };
  /** Resolves once `data` is in the kernel: true, or false when the response was destroyed (the client went away). */
  const write = (data: Buffer) => new Promise<boolean>((resolve) => res.write(data, (err) => resolve(!err)));
  let at = start;
  let current = await read(buffers[0]!, at);
  at += current.length;
  for (let k = 0; ; k = 1 - k) {
    const sent = write(current);
    // The other buffer is free: its write was awaited in the turn before.
    const ahead = at <= end ? read(buffers[1 - k]!, at) : undefined;
    ahead?.catch(() => undefined);
    if (!(await sent)) {
      await ahead?.catch(() => undefined);
      res.destroy();
      return;
    }
    if (!ahead) break;
    current = await ahead;
    at += current.length;
  }
  res.end();
}

/** S3's words for a connection silent past its timeout (onSilence; the parser's header timeout). */
const REQUEST_TIMEOUT_MESSAGE =
  'Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.';

/** S3's error document: the error, its details, the resource (the path, when known) and the request id. */
function errorDocument(e: S3Error, resource: string | undefined, requestId: string): string {
  const details = Object.entries(e.details)
    .map(([k, v]) => el(k, v))
    .join('');
  return `${XML_HEAD}<Error>${el('Code', e.code)}${el('Message', e.message)}${details}${resource === undefined ? '' : el('Resource', resource)}${el('RequestId', requestId)}</Error>`;
}

/** Whether a GET or HEAD asks for the object's stored checksum (as the AWS SDKs do by default). */
const asksChecksum = (req: http.IncomingMessage) => String(req.headers['x-amz-checksum-mode'] ?? '').toUpperCase() === 'ENABLED';

export function createEndpoint({
  store,
  verifier,
  region,
  log,
  quota,
  requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  headersTimeoutMs = DEFAULT_HEADERS_TIMEOUT_MS,
}: EndpointOptions): http.Server {
  // Node enforces headersTimeout on this interval: a quarter of it keeps the limit close.
  const server = http.createServer({ connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(headersTimeoutMs / 4))) }, (req, res) =>
    onRequest(req, res, false),
  );
  server.keepAliveTimeout = 30_000;
  server.headersTimeout = headersTimeoutMs;
  // No limit on a whole request (a 5 GiB upload takes long); silence is what is limited.
  server.requestTimeout = 0;
  // `Expect: 100-continue`: the body is asked for only once the request is accepted (bodyOf).
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest(req, res, true));
  // Any other expectation: S3 ignores it and answers the request (Node would answer 417).
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest(req, res, false));
  // What Node's parser refuses gets S3's error document (S3 answers all of these 400).
  answerMalformed(server, ({ status, path, reason, message: described }) => {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    const e =
      status === 408
        ? new S3Error('RequestTimeout', 400, REQUEST_TIMEOUT_MESSAGE)
        : status === 431
          ? new S3Error('RequestHeaderSectionTooLarge', 400, 'Your request header section exceeds the maximum allowed size.')
          : new S3Error('InvalidRequest', 400, `${described}.`);
    log.debug({ requestId, status, path, reason }, 'object store request refused by the HTTP parser');
    return {
      status: e.status,
      headers: { 'content-type': 'application/xml', 'x-amz-request-id': requestId, server: 'Wharf' },
      body: errorDocument(e, path, requestId),
    };
  });

  /** Requests whose client waits for `100 Continue` before it sends the body. */
  const awaitingContinue = new WeakMap<http.IncomingMessage, http.ServerResponse>();
  /** Requests answered RequestTimeout: their end is expected, not an abort to report. */
  const timedOut = new WeakSet<http.IncomingMessage>();

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse, wantsContinue: boolean): void {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('server', 'Wharf');
    const origin = req.headers.origin;
    if (origin) {
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader(
        'access-control-expose-headers',
        'ETag, Content-Length, Content-Range, x-amz-request-id, x-amz-version-id, x-amz-checksum-crc32, x-amz-checksum-crc32c, x-amz-checksum-crc64nvme, x-amz-checksum-sha1, x-amz-checksum-sha256, x-amz-checksum-type, x-amz-mp-parts-count',
      );
    }
    if (wantsContinue) awaitingContinue.set(req, res);
    res.setTimeout(requestTimeoutMs, () => onSilence(req, res, requestId));
    handle(req, res, requestId).catch((err: unknown) => sendError(req, res, err, requestId));
  }

  /** Nothing received or sent for requestTimeoutMs: S3's RequestTimeout, then the connection closed. */
  function onSilence(req: http.IncomingMessage, res: http.ServerResponse, requestId: string): void {
    timedOut.add(req);
    log.debug(
      { method: req.method, url: redactUrl(req.url ?? ''), requestId, timeoutMs: requestTimeoutMs },
      'object store request timed out (the client was silent)',
    );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(req, res, new S3Error('RequestTimeout', 400, REQUEST_TIMEOUT_MESSAGE), requestId);
    // The handler may still be waiting for the body. Node no longer tracks a request once its
    // response is finished, so closing the socket alone would leave that wait (and its temporary
    // file) forever: the request itself is destroyed.
    res.once('finish', () => {
      req.destroy();
      req.socket.destroy();
    });
  }

  function sendError(req: http.IncomingMessage, res: http.ServerResponse, err: unknown, requestId: string): void {
    let e: S3Error;
    const code = (err as NodeJS.ErrnoException)?.code;
    if (err instanceof S3Error) e = err;
    else if (code === 'ENOSPC' || code === 'EDQUOT') {
      e = new S3Error('XWharfStorageFull', 507, 'The disk of the object store is full; nothing was stored.');
      log.error({ err }, 'object store disk full');
    } else if (timedOut.has(req)) {
      // Answered already (onSilence); the wait for the body has now ended.
      res.destroy();
      return;
    } else if ((!req.complete && (req.destroyed || req.socket.destroyed)) || (code !== undefined && GONE_CODES.has(code))) {
      // The client went away (an aborted upload, a closed connection): no stack, never the
      // URL's signature or credential.
      log.debug(
        { method: req.method, url: redactUrl(req.url ?? ''), requestId, reason: code ?? (err as Error)?.message },
        'object store client went away mid-request',
      );
      res.destroy();
      return;
    } else {
      e = new S3Error('InternalError', 500, 'We encountered an internal error. Please try again.');
      log.error({ err, method: req.method, url: redactUrl(req.url ?? ''), requestId }, 'object store request failed');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body = req.method === 'HEAD' ? '' : errorDocument(e, (req.url ?? '').split('?')[0], requestId);
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

  /**
   * Work of the server's own (joining parts, copying) during which the client rightly sends and
   * reads nothing: the silence timeout is off meanwhile, then counts again.
   */
  async function working<T>(res: http.ServerResponse, fn: () => Promise<T>): Promise<T> {
    res.socket?.setTimeout(0);
    try {
      return await fn();
    } finally {
      res.socket?.setTimeout(requestTimeoutMs);
    }
  }

  /** The request's body from here on: `100 Continue` first if the client waits for it. */
  function reading(req: http.IncomingMessage): http.IncomingMessage {
    const res = awaitingContinue.get(req);
    if (res) {
      awaitingContinue.delete(req);
      if (!res.headersSent) res.writeContinue();
    }
    return req;
  }

  /**
   * The number of bytes the body will store, as declared (Content-Length, or the decoded length
   * of an aws-chunked body); over 5 GiB is EntityTooLarge, before anything is read.
   */
  function declaredSize(req: http.IncomingMessage, auth: Authenticated): number | undefined {
    const text = auth.payload.startsWith('STREAMING-') ? req.headers['x-amz-decoded-content-length'] : req.headers['content-length'];
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!(Number.isSafeInteger(n) && n >= 0))
      throw new S3Error(
        'InvalidArgument',
        400,
        `${auth.payload.startsWith('STREAMING-') ? 'x-amz-decoded-content-length' : 'Content-Length'} is not a number.`,
      );
    if (n > MAX_PUT_BYTES) throw tooLarge();
    return n;
  }

  /** The body as bytes, decoded and checked per the signing mode (the checksums that matched told to `verified`). */
  function bodyOf(req: http.IncomingMessage, auth: Authenticated, verified?: Checksums): AsyncIterable<Buffer> {
    const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
    const encodings = String(req.headers['content-encoding'] ?? '')
      .split(',')
      .map((s) => s.trim());
    const streaming = auth.payload.startsWith('STREAMING-');
    const size = declaredSize(req, auth);
    if (streaming) {
      const signed = auth.payload.startsWith('STREAMING-AWS4-HMAC-SHA256-PAYLOAD');
      const trailerHeader = req.headers['x-amz-trailer'];
      const trailer = auth.payload.endsWith('-TRAILER') || trailerHeader !== undefined;
      const announced = typeof trailerHeader === 'string' ? trailerHeader : undefined;
      return withChecksums(exactLength(dechunk(reading(req), { signer: signed ? auth.chunks : undefined, trailer, announced, verified }), size, MAX_PUT_BYTES));
    }
    // aws-chunked framing is only decoded for a streaming x-amz-content-sha256 (signed as part of
    // the request, as S3 requires). Decoding it otherwise would let anyone holding a presigned URL,
    // whose signature binds Content-Length, store a body of another size.
    if (encodings.includes('aws-chunked'))
      throw new S3Error('InvalidArgument', 400, 'aws-chunked encoding is not supported with the specified x-amz-content-sha256 value.');
    if (declared === undefined && req.headers['transfer-encoding'] === undefined)
      throw new S3Error('MissingContentLength', 411, 'You must provide the Content-Length HTTP header.');
    const plain = exactLength(reading(req), declared, MAX_PUT_BYTES);
    return withChecksums(/^[0-9a-fA-F]{64}$/.test(auth.payload) ? checkSha256(plain, auth.payload) : plain);

    /** The body with the checksums its headers declare (x-amz-checksum-*) checked at its end. */
    function withChecksums(body: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
      const checksums = declaredChecksums(req.headers);
      return checksums.length ? checkChecksums(body, checksums, verified) : body;
    }
  }

  /** Receives an object's or part's body into a temporary file, through the quota's meter, its Content-MD5 checked. */
  async function receiveChecked(req: http.IncomingMessage, auth: Authenticated, hold: QuotaHold, verified?: Checksums) {
    const md5 = contentMd5Of(req);
    const received = await store.receive(hold.meter(bodyOf(req, auth, verified)));
    if (md5 !== undefined && !md5.equals(received.md5)) {
      await store.discard(received);
      throw new S3Error('BadDigest', 400, 'The Content-MD5 you specified did not match what we received.');
    }
    return received;
  }

  async function readXml(req: http.IncomingMessage, auth: Authenticated): Promise<XmlNode> {
    const md5 = contentMd5Of(req);
    const raw = await readSmall(bodyOf(req, auth), MAX_XML_BYTES);
    if (md5 !== undefined && !md5.equals(createHash('md5').update(raw).digest()))
      throw new S3Error('BadDigest', 400, 'The Content-MD5 you specified did not match what we received.');
    try {
      return parseXml(raw.toString('utf8'));
    } catch {
      throw malformed();
    }
  }

  /** `withChecksum`: the stored checksum asked for, of the whole object (as S3: not for a range or a part). */
  function objectHeaders(res: http.ServerResponse, row: ObjectRow, query: URLSearchParams, withChecksum: boolean): void {
    res.setHeader('etag', quoted(row.etag));
    const { checksum } = row.meta;
    if (checksum && withChecksum) {
      res.setHeader(`x-amz-checksum-${checksum.algorithm}`, checksum.value);
      res.setHeader('x-amz-checksum-type', 'FULL_OBJECT');
    }
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
    if (
      ifMatch !== undefined &&
      ifMatch !== '*' &&
      !ifMatch
        .split(',')
        .map((s) => s.trim())
        .includes(etag)
    )
      return 412;
    const ifNone = req.headers['if-none-match'];
    if (
      ifNone !== undefined &&
      (ifNone === '*' ||
        ifNone
          .split(',')
          .map((s) => s.trim())
          .includes(etag))
    )
      return 304;
    const since = req.headers['if-modified-since'];
    if (ifNone === undefined && since !== undefined && Math.floor(row.lastModified / 1000) * 1000 <= Date.parse(since)) return 304;
    return undefined;
  }

  /** The bytes a GET or HEAD asks for: a part (`partNumber`), a Range, or all of them. */
  function rangeOf(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    row: ObjectRow,
    partNumber: number | undefined,
  ): { start: number; end: number; partial: boolean } {
    if (partNumber !== undefined) {
      // A single-part object has one part: itself.
      const sizes = row.parts ?? [row.size];
      if (partNumber > sizes.length) {
        res.setHeader('content-range', `bytes */${row.size}`);
        throw new S3Error('InvalidPartNumber', 416, 'The requested partnumber is not satisfiable');
      }
      let start = 0;
      for (let i = 0; i < partNumber - 1; i++) start += sizes[i]!;
      return { start, end: start + sizes[partNumber - 1]! - 1, partial: row.size > 0 };
    }
    const range = req.headers.range;
    const m = range === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    // A Range that is not one byte range is ignored (the whole object), as S3 does.
    if (!m || !(m[1] || m[2])) return { start: 0, end: row.size - 1, partial: false };
    let start: number;
    let end: number;
    if (m[1]) {
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]), row.size - 1) : row.size - 1;
    } else {
      start = Math.max(0, row.size - Number(m[2]));
      end = row.size - 1;
    }
    if (start >= row.size || start > end) {
      res.setHeader('content-range', `bytes */${row.size}`);
      throw new S3Error('InvalidRange', 416, 'The requested range is not satisfiable');
    }
    return { start, end, partial: true };
  }

  async function getObject(req: http.IncomingMessage, res: http.ServerResponse, t: Target, head: boolean): Promise<void> {
    const partNumber = partNumberOf(req, t.query);
    let row: ObjectRow;
    let handle: fsp.FileHandle | undefined;
    let whole: Buffer | undefined;
    if (head) {
      const found = store.head(t.bucket, t.key);
      if (!found) {
        store.requireBucket(t.bucket);
        throw new S3Error('NoSuchKey', 404, 'Not Found');
      }
      row = found;
    } else {
      const small = store.readSmall(t.bucket, t.key, SMALL_READ_BYTES);
      if (small) ({ row, body: whole } = small);
      else ({ row, handle } = await store.open(t.bucket, t.key));
    }
    try {
      const pre = precondition(req, row);
      if (pre === 304 && !head) {
        res.statusCode = 304;
        res.setHeader('etag', quoted(row.etag));
        res.end();
        return;
      }
      if (pre) throw new S3Error(pre === 304 ? 'NotModified' : 'PreconditionFailed', pre, 'At least one of the preconditions you specified did not hold.');
      const { start, end, partial } = rangeOf(req, res, row, partNumber);
      objectHeaders(res, row, t.query, !partial && partNumber === undefined && asksChecksum(req));
      if (partNumber !== undefined && row.parts) res.setHeader('x-amz-mp-parts-count', row.parts.length);
      const length = row.size === 0 ? 0 : end - start + 1;
      res.setHeader('content-length', length);
      if (partial) {
        res.statusCode = 206;
        res.setHeader('content-range', `bytes ${start}-${end}/${row.size}`);
      }
      if (head || length === 0) {
        res.end();
        return;
      }
      if (whole) {
        // A small object, read whole: one answer instead of a stream.
        res.end(whole.subarray(start, end + 1));
        return;
      }
      await sendRange(handle!, res, start, end);
    } finally {
      // Closed once its bytes are in the kernel, or on any error: never left open.
      await handle?.close().catch(() => undefined);
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
        .map(
          (o) =>
            `<Contents>${el('Key', k(o.key))}${el('LastModified', iso(o.lastModified))}${el('ETag', quoted(o.etag))}${el('Size', o.size)}${owner}<StorageClass>STANDARD</StorageClass></Contents>`,
        )
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
    const skipUnder =
      delimiter !== '' &&
      marker.endsWith(delimiter) &&
      marker.startsWith(prefix) &&
      marker.indexOf(delimiter, prefix.length) === marker.length - delimiter.length;
    const out = store.list(t.bucket, { prefix, delimiter, startAfter: marker, skipUnder, maxKeys });
    const k = (s: string) => (encode ? urlEncodeKey(s) : s);
    sendXml(
      res,
      `<ListBucketResult xmlns="${S3_NS}">${el('Name', t.bucket)}${el('Prefix', k(prefix))}${el('Marker', k(marker))}${delimiter ? el('Delimiter', k(delimiter)) : ''}${el('MaxKeys', maxKeys)}${el('IsTruncated', out.truncated)}${out.truncated && out.last !== undefined ? el('NextMarker', k(out.last)) : ''}${encode ? el('EncodingType', 'url') : ''}${out.contents
        .map(
          (o) =>
            `<Contents>${el('Key', k(o.key))}${el('LastModified', iso(o.lastModified))}${el('ETag', quoted(o.etag))}${el('Size', o.size)}<Owner><ID>wharf</ID><DisplayName>wharf</DisplayName></Owner><StorageClass>STANDARD</StorageClass></Contents>`,
        )
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

  /** The source of a copy (`x-amz-copy-source: [/]bucket/key[?versionId=]`), which the key must reach. */
  function copySourceOf(req: http.IncomingMessage, principal: Principal): { bucket: string; key: string } {
    const source = String(req.headers['x-amz-copy-source']).split('?')[0]!;
    let decoded: string;
    try {
      decoded = decodeURIComponent(source).replace(/^\//, '');
    } catch {
      throw new S3Error('InvalidArgument', 400, 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey.');
    }
    const slash = decoded.indexOf('/');
    if (slash <= 0 || slash === decoded.length - 1)
      throw new S3Error('InvalidArgument', 400, 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey.');
    const src = { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1) };
    if (!may(principal, src.bucket, false)) throw new S3Error('AccessDenied', 403, 'Access Denied');
    return src;
  }

  /** PutObject: stores the body (checked against Content-MD5 and the signed payload) as the object. */
  async function putObject(req: http.IncomingMessage, res: http.ServerResponse, t: Target, auth: Authenticated): Promise<void> {
    store.requireBucket(t.bucket);
    const verified: Checksums = [];
    const row = await quota.write(auth.principal, t.bucket, { kind: 'object', key: t.key }, declaredSize(req, auth), async (hold) => {
      const received = await receiveChecked(req, auth, hold, verified);
      // S3 takes one checksum algorithm a request: the first checked is the object's.
      const checksum = verified[0] && { algorithm: verified[0][0], value: verified[0][1] };
      return store.commit(t.bucket, t.key, received, { ...metaFrom(req.headers), ...(checksum ? { checksum } : {}) });
    });
    const checksum = row.meta.checksum;
    sendEmpty(res, 200, { etag: quoted(row.etag), ...(checksum ? { [`x-amz-checksum-${checksum.algorithm}`]: checksum.value } : {}) });
  }

  /** CopyObject: the source's bytes (its size known from its row) as a new single-part object. */
  async function copyObject(req: http.IncomingMessage, res: http.ServerResponse, t: Target, principal: Principal): Promise<void> {
    const src = copySourceOf(req, principal);
    const replace = String(req.headers['x-amz-metadata-directive'] ?? 'COPY').toUpperCase() === 'REPLACE';
    if (!replace && src.bucket === t.bucket && src.key === t.key) {
      throw new S3Error(
        'InvalidRequest',
        400,
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
      );
    }
    const row = await quota.write(principal, t.bucket, { kind: 'object', key: t.key }, store.head(src.bucket, src.key)?.size ?? 0, (hold) =>
      working(res, () => store.copy(src, { bucket: t.bucket, key: t.key }, replace ? metaFrom(req.headers) : undefined, (body) => hold.meter(body))),
    );
    sendXml(res, `<CopyObjectResult xmlns="${S3_NS}">${el('LastModified', iso(row.lastModified))}${el('ETag', quoted(row.etag))}</CopyObjectResult>`);
  }

  /** UploadPart: stores the body as part `n` of the upload; a part sent again replaces the earlier one. */
  async function uploadPart(req: http.IncomingMessage, res: http.ServerResponse, auth: Authenticated, upload: UploadRow, n: number): Promise<void> {
    const part = await quota.write(auth.principal, upload.bucket, { kind: 'part', upload: upload.id, part: n }, declaredSize(req, auth), async (hold) =>
      store.putPart(upload, n, await receiveChecked(req, auth, hold)),
    );
    sendEmpty(res, 200, { etag: quoted(part.etag) });
  }

  /**
   * UploadPartCopy: bytes of an existing object (all of it, or `x-amz-copy-source-range:
   * bytes=first-last`, both inclusive and within the source) as part `n`. Ranges are refused as S3
   * refuses them: 400 InvalidArgument, for their form or for reaching past the source.
   */
  async function uploadPartCopy(req: http.IncomingMessage, res: http.ServerResponse, principal: Principal, upload: UploadRow, n: number): Promise<void> {
    const src = copySourceOf(req, principal);
    const rangeHeader = req.headers['x-amz-copy-source-range'];
    /** The bytes of the source to copy, decided on its row (its size) once it is open. */
    const bytesToCopy = (row: ObjectRow): { start: number; end: number } | undefined => {
      if (rangeHeader === undefined) {
        if (row.size > MAX_PUT_BYTES)
          throw new S3Error('InvalidRequest', 400, `The specified copy source is larger than the maximum allowable size for a copy source: ${MAX_PUT_BYTES}`);
        return undefined;
      }
      const m = /^bytes=(\d{1,16})-(\d{1,16})$/.exec(String(rangeHeader).trim());
      if (!m || Number(m[1]) > Number(m[2])) throw copyRangeForm(String(rangeHeader));
      const start = Number(m[1]);
      const end = Number(m[2]);
      if (end >= row.size) {
        throw new S3Error('InvalidArgument', 400, `Range specified is not valid for source object of size: ${row.size}`, {
          ArgumentName: 'x-amz-copy-source-range',
          ArgumentValue: String(rangeHeader),
        });
      }
      if (end - start + 1 > MAX_PUT_BYTES) throw tooLarge();
      return { start, end };
    };
    // Admitted for what the range (or the whole source) holds now; metered on the way, so a source
    // that grows meanwhile cannot slip past the limit.
    const source = store.head(src.bucket, src.key);
    const size = source
      ? (() => {
          const r = bytesToCopy(source);
          return r ? r.end - r.start + 1 : source.size;
        })()
      : 0;
    const part = await quota.write(principal, upload.bucket, { kind: 'part', upload: upload.id, part: n }, size, async (hold) =>
      store.putPart(upload, n, await working(res, () => store.receiveFrom(src, bytesToCopy, (body) => hold.meter(body)))),
    );
    sendXml(res, `<CopyPartResult xmlns="${S3_NS}">${el('LastModified', iso(part.lastModified))}${el('ETag', quoted(part.etag))}</CopyPartResult>`);
  }

  /**
   * CompleteMultipartUpload: joins the listed parts. Idempotent, as a client whose first answer
   * was lost needs: an upload completed (within a day) with the same parts is answered again.
   */
  async function completeUpload(req: http.IncomingMessage, res: http.ServerResponse, t: Target, auth: Authenticated, uploadId: string): Promise<void> {
    let upload: UploadRow | undefined;
    try {
      upload = store.upload(t.bucket, t.key, uploadId);
    } catch (err) {
      if (!(err instanceof S3Error && err.code === 'NoSuchUpload') || !store.completedUpload(t.bucket, t.key, uploadId)) throw err;
    }
    const doc = await readXml(req, auth);
    if (doc.name !== 'CompleteMultipartUpload') throw malformed();
    const parts = childrenNamed(doc, 'Part').map((p) => {
      const n = child(p, 'PartNumber')?.text.trim() ?? '';
      const etag = child(p, 'ETag')?.text.trim();
      if (!/^\d{1,5}$/.test(n) || etag === undefined) throw malformed();
      return { partNumber: Number(n), etag };
    });
    if (!parts.length) throw malformed();
    /** The ETag of a completion already done with these very parts, if there was one. */
    const again = (): string | undefined => {
      const done = store.completedUpload(t.bucket, t.key, uploadId);
      return done && /^[0-9a-f]{32}$/.test(parts[0]!.etag.replace(/"/g, '')) && multipartEtag(parts.map((p) => p.etag)) === done.etag ? done.etag : undefined;
    };
    let etag: string | undefined;
    if (upload) {
      try {
        const joining = upload;
        const listed = [...new Set(parts.map((p) => p.partNumber))].reduce((sum, n) => sum + store.partSize(joining.id, n), 0);
        const row = await quota.write(auth.principal, t.bucket, { kind: 'complete', key: t.key, upload: joining.id }, listed, () =>
          working(res, () => store.complete(joining, parts)),
        );
        etag = row.etag;
      } catch (err) {
        // Completed by a concurrent identical request meanwhile.
        if (!(err instanceof S3Error && err.code === 'NoSuchUpload')) throw err;
      }
    }
    etag ??= again();
    if (etag === undefined) throw noSuchUpload();
    const host = req.headers.host ?? '';
    sendXml(
      res,
      `<CompleteMultipartUploadResult xmlns="${S3_NS}">${el('Location', `http://${host}/${t.bucket}/${urlEncodeKey(t.key)}`)}${el('Bucket', t.bucket)}${el('Key', t.key)}${el('ETag', quoted(etag))}</CompleteMultipartUploadResult>`,
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
        .map(
          (p) => `<Part>${el('PartNumber', p.partNumber)}${el('LastModified', iso(p.lastModified))}${el('ETag', quoted(p.etag))}${el('Size', p.size)}</Part>`,
        )
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
      if (!req.headers.origin || !req.headers['access-control-request-method'])
        throw new S3Error('BadRequest', 400, 'Insufficient information. Origin request header needed.');
      sendEmpty(res, 200, {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, PUT, HEAD, POST, DELETE',
        'access-control-allow-headers': String(req.headers['access-control-request-headers'] ?? '*'),
        'access-control-max-age': '3600',
      });
      return;
    }
    const t = parseTarget(req.url ?? '/');
    const auth = await verifier.verify({ method, url: req.url ?? '/', headers: req.headers, headersDistinct: req.headersDistinct as Record<string, string[]> });
    const principal = auth.principal;
    const deny = () => new S3Error('AccessDenied', 403, 'Access Denied');
    const q = t.query;
    void requestId;

    if (!t.bucket) {
      if (method !== 'GET') throw new S3Error('MethodNotAllowed', 405, 'The specified method is not allowed against this resource.');
      // ListBuckets: everything for the root key; an app key sees its own bucket (as MinIO lists
      // the buckets a key may use), so `aws s3 ls` and `s3cmd ls` work with it.
      const buckets = may(principal, undefined, true)
        ? store.listBuckets()
        : store.listBuckets().filter((b) => principal.kind === 'bucket' && b.name === principal.bucket);
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
        // CreateBucket of the app's own bucket is S3's "already yours" (rclone, for one, sends it
        // before its first upload and takes 409 BucketAlreadyOwnedByYou as success).
        const own = principal.kind === 'bucket' && principal.bucket === t.bucket && store.hasBucket(t.bucket);
        if (!own && !may(principal, t.bucket, true)) throw deny();
        // Drain a CreateBucketConfiguration, if any.
        await readSmall(reading(req), MAX_XML_BYTES);
        if (own) throw new S3Error('BucketAlreadyOwnedByYou', 409, 'Your previous request to create the named bucket succeeded and you already own it.');
        if (!store.createBucket(t.bucket))
          throw new S3Error('BucketAlreadyOwnedByYou', 409, 'Your previous request to create the named bucket succeeded and you already own it.');
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
        const sub = [
          'acl',
          'cors',
          'policy',
          'lifecycle',
          'tagging',
          'encryption',
          'object-lock',
          'notification',
          'website',
          'logging',
          'replication',
          'accelerate',
          'requestPayment',
        ].find((s) => q.has(s));
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
        if (['acl', 'tagging', 'attributes', 'retention', 'legal-hold', 'torrent'].some((s) => q.has(s)))
          throw new S3Error('NotImplemented', 501, 'This object subresource is not supported by this store.');
        return getObject(req, res, t, false);
      case 'HEAD':
        return getObject(req, res, t, true);
      case 'PUT': {
        if (uploadId !== null) {
          const n = Number(q.get('partNumber'));
          if (!/^\d{1,5}$/.test(q.get('partNumber') ?? '') || n < 1 || n > MAX_PARTS) throw invalidPartNumber(q.get('partNumber'));
          const upload = store.upload(t.bucket, t.key, uploadId);
          if (req.headers['x-amz-copy-source'] !== undefined) return uploadPartCopy(req, res, principal, upload, n);
          return uploadPart(req, res, auth, upload, n);
        }
        if (req.headers['x-amz-copy-source'] !== undefined) return copyObject(req, res, t, principal);
        if (['acl', 'tagging', 'retention', 'legal-hold'].some((s) => q.has(s)))
          throw new S3Error('NotImplemented', 501, 'This object subresource is not supported by this store.');
        return putObject(req, res, t, auth);
      }
      case 'POST':
        if (q.has('uploads')) {
          const id = store.createUpload(t.bucket, t.key, metaFrom(req.headers));
          sendXml(
            res,
            `<InitiateMultipartUploadResult xmlns="${S3_NS}">${el('Bucket', t.bucket)}${el('Key', t.key)}${el('UploadId', id)}</InitiateMultipartUploadResult>`,
          );
          return;
        }
        if (uploadId !== null) return completeUpload(req, res, t, auth, uploadId);
        throw new S3Error('NotImplemented', 501, 'POST object uploads (browser forms) are not supported by this store; use presigned PUT URLs.');
      case 'DELETE':
        if (uploadId !== null) {
          const upload = store.upload(t.bucket, t.key, uploadId);
          await store.abort(upload.id);
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
