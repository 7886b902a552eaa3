/**
 * Request bodies as the S3 API sends them: plain (optionally with its SHA-256 declared in
 * `x-amz-content-sha256`, checked at the end), or `aws-chunked` (Content-Encoding) as current
 * SDKs stream them: `<hex size>[;chunk-signature=<sig>]\r\n<bytes>\r\n ... 0[;...]\r\n`, then
 * optional trailers (`x-amz-checksum-crc32:...`, `x-amz-trailer-signature:...`) and `\r\n`.
 * Chunk and trailer signatures are checked when the payload is signed. The checksums S3 clients
 * add (`x-amz-checksum-<name>`, the digest in base64), as a header or a trailer, are checked, every
 * kind S3 checks: crc32, sha1 and sha256 by node:zlib and node:crypto, crc32c and crc64nvme (the
 * AWS CLI's default) by the AWS SDK's own implementations; a mismatch is BadDigest before anything
 * is stored. Only the kinds a request declares are computed.
 */
import { createHash } from 'node:crypto';
import zlib from 'node:zlib';
import type { ChunkSigner } from './auth.ts';
import { S3Error } from './objects.ts';

const incomplete = () => new S3Error('IncompleteBody', 400, 'You did not provide the number of bytes specified by the Content-Length HTTP header.');
const badChunk = (why: string) => new S3Error('InvalidRequest', 400, `Malformed aws-chunked body: ${why}.`);

/** The checksum kinds checked, by the name in `x-amz-checksum-<name>`. */
const CHECKED = ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const;
type Checked = (typeof CHECKED)[number];

/** A running checksum of one kind: its update and its digest as S3 writes it (base64). */
async function checksum(name: Checked): Promise<{ update(data: Buffer): void; base64(): Promise<string> }> {
  if (name === 'crc32') {
    let crc = 0;
    return {
      update: (data) => void (crc = zlib.crc32(data, crc)),
      base64: async () => {
        const b = Buffer.alloc(4);
        b.writeUInt32BE(crc >>> 0);
        return b.toString('base64');
      },
    };
  }
  if (name === 'crc32c' || name === 'crc64nvme') {
    // Loaded on the first upload that declares one (most clients send CRC32): not at start.
    const { Crc32c, Crc64Nvme } = await import('@aws-sdk/checksums/crc');
    const crc = name === 'crc32c' ? new Crc32c() : new Crc64Nvme();
    return { update: (data) => crc.update(data), base64: async () => Buffer.from(await crc.digest()).toString('base64') };
  }
  const hash = createHash(name);
  return { update: (data) => void hash.update(data), base64: async () => hash.digest('base64') };
}

const badDigest = (name: Checked) => new S3Error('BadDigest', 400, `The ${name} checksum you specified did not match the calculated checksum.`);

/** The checked kind an `x-amz-checksum-<name>` header or trailer name is, if any. */
function checkedKind(header: string): Checked | undefined {
  const name = header.toLowerCase().replace(/^x-amz-checksum-/, '');
  return (CHECKED as readonly string[]).includes(name) && header.length > name.length ? (name as Checked) : undefined;
}

/** Checksums as [kind, base64 digest]: those a request declares, or those a body matched (filled at its end). */
export type Checksums = [Checked, string][];

/** The checksum headers of a request this store checks: [kind, the declared base64 digest]. */
export function declaredChecksums(headers: Record<string, string | string[] | undefined>): Checksums {
  return CHECKED.flatMap((name) => {
    const value = headers[`x-amz-checksum-${name}`];
    return typeof value === 'string' ? [[name, value.trim()] as [Checked, string]] : [];
  });
}

/** Passes a body through, checking at its end the checksums its headers declared (BadDigest). */
export async function* checkChecksums(source: AsyncIterable<Buffer>, declared: Readonly<Checksums>, verified?: Checksums): AsyncGenerator<Buffer> {
  const sums = await Promise.all(declared.map(async ([name, value]) => ({ name, value, sum: await checksum(name) })));
  for await (const chunk of source) {
    for (const { sum } of sums) sum.update(chunk);
    yield chunk;
  }
  for (const { name, value, sum } of sums) if ((await sum.base64()) !== value) throw badDigest(name);
  for (const { name, value } of sums) verified?.push([name, value]);
}

/** Pulls bytes and lines out of an async stream of buffers. */
class Reader {
  readonly #it: AsyncIterator<Buffer>;
  #buf: Buffer = Buffer.alloc(0);
  #done = false;

  constructor(source: AsyncIterable<Buffer>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  async #fill(): Promise<boolean> {
    if (this.#done) return false;
    const next = await this.#it.next();
    if (next.done) {
      this.#done = true;
      return false;
    }
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, next.value]) : next.value;
    return true;
  }

  /** A line without its CRLF; at most `max` bytes. */
  async line(max = 4096): Promise<string> {
    for (;;) {
      const at = this.#buf.indexOf('\r\n');
      if (at >= 0) {
        const text = this.#buf.subarray(0, at).toString('latin1');
        this.#buf = this.#buf.subarray(at + 2);
        return text;
      }
      if (this.#buf.length > max) throw badChunk('line too long');
      if (!(await this.#fill())) throw incomplete();
    }
  }

  /** Yields exactly `n` bytes, as they come. */
  async *bytes(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (!this.#buf.length && !(await this.#fill())) throw incomplete();
      const take = Math.min(left, this.#buf.length);
      yield this.#buf.subarray(0, take);
      this.#buf = this.#buf.subarray(take);
      left -= take;
    }
  }

  async rest(): Promise<boolean> {
    if (this.#buf.length) return true;
    return this.#fill();
  }
}

export interface ChunkedOptions {
  /** Checks chunk signatures (signed streaming payloads). */
  signer?: ChunkSigner;
  /** Trailers announced in `x-amz-trailer`. */
  trailer: boolean;
  /** What `x-amz-trailer` names (comma-separated), if anything: only the checksums it announces are computed. */
  announced?: string;
  /** Where the trailing checksums that matched are told. */
  verified?: Checksums;
}

/** Decodes an aws-chunked body, checking signatures and trailing checksums. */
export async function* dechunk(source: AsyncIterable<Buffer>, opts: ChunkedOptions): AsyncGenerator<Buffer> {
  const reader = new Reader(source);
  // The kinds a trailer may carry: those announced, or all of them when nothing is announced.
  const announced = opts.announced?.split(',').flatMap((n) => checkedKind(n.trim()) ?? []);
  const sums = new Map(
    await Promise.all((opts.trailer ? (opts.announced === undefined ? CHECKED : announced!) : []).map(async (name) => [name, await checksum(name)] as const)),
  );
  for (;;) {
    const head = await reader.line();
    const m = /^([0-9a-fA-F]{1,16})(?:;chunk-signature=([0-9a-f]{64}))?$/.exec(head);
    if (!m) throw badChunk('bad chunk header');
    const size = parseInt(m[1]!, 16);
    if (opts.signer && !m[2]) throw new S3Error('SignatureDoesNotMatch', 403, 'A chunk of a signed streaming upload has no chunk-signature.');
    const chunkHash = opts.signer ? createHash('sha256') : undefined;
    for await (const piece of reader.bytes(size)) {
      chunkHash?.update(piece);
      for (const sum of sums.values()) sum.update(piece);
      if (piece.length) yield Buffer.from(piece);
    }
    if (opts.signer) await opts.signer.chunk(chunkHash!.digest('hex'), m[2]!);
    if (size === 0) break;
    if ((await reader.line()) !== '') throw badChunk('chunk not followed by CRLF');
  }
  // After the last (empty) chunk: nothing, a CRLF, or trailers ending with an empty line.
  if (!opts.trailer) {
    if (await reader.rest()) await reader.line();
    return;
  }
  const trailers = new Map<string, string>();
  let signature: string | undefined;
  let text = '';
  for (;;) {
    let line: string;
    try {
      line = await reader.line();
    } catch {
      break;
    }
    if (line === '') {
      if (trailers.size || signature) break;
      continue;
    }
    const at = line.indexOf(':');
    if (at < 0) throw badChunk('bad trailer');
    const name = line.slice(0, at).trim().toLowerCase();
    const value = line.slice(at + 1).trim();
    if (name === 'x-amz-trailer-signature') signature = value;
    else {
      trailers.set(name, value);
      text += `${name}:${value}\n`;
    }
  }
  if (opts.signer) {
    if (!signature) throw new S3Error('SignatureDoesNotMatch', 403, 'The trailer of a signed streaming upload has no signature.');
    await opts.signer.trailer(text, signature);
  }
  for (const [name, value] of trailers) {
    const kind = checkedKind(name);
    if (!kind) continue;
    const sum = sums.get(kind);
    // A checked kind in a trailer that x-amz-trailer did not announce: S3 refuses such a body.
    if (!sum) throw badChunk(`trailer ${name} not announced in x-amz-trailer`);
    if ((await sum.base64()) !== value) throw badDigest(kind);
    opts.verified?.push([kind, value]);
  }
}

/** Passes a plain body through, checking its declared SHA-256 (hex) at the end. */
export async function* checkSha256(source: AsyncIterable<Buffer>, expectedHex: string): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  for await (const chunk of source) {
    hash.update(chunk);
    yield chunk;
  }
  if (hash.digest('hex') !== expectedHex.toLowerCase()) {
    throw new S3Error('XAmzContentSHA256Mismatch', 400, "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
}

/** Counts bytes; throws IncompleteBody or a too-large error when the total differs from `expected`. */
export async function* exactLength(source: AsyncIterable<Buffer>, expected: number | undefined, max: number): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.length;
    if (total > max) throw new S3Error('EntityTooLarge', 400, 'Your proposed upload exceeds the maximum allowed object size.');
    if (expected !== undefined && total > expected) throw new S3Error('InvalidRequest', 400, 'The body is longer than its declared length.');
    yield chunk;
  }
  if (expected !== undefined && total !== expected) throw incomplete();
}

/** Reads a small body (XML) whole, at most `max` bytes. */
export async function readSmall(source: AsyncIterable<Buffer>, max: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of source) {
    total += chunk.length;
    if (total > max) throw new S3Error('MalformedXML', 400, 'The XML you provided was too large.');
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}
