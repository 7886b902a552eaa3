/**
 * `wharf files upload`: what to upload (files, and folders walked recursively), and the transfer
 * itself, straight to the app's bucket with the key `POST /api/tokens/validate` hands out.
 *
 * - Small files go up in one PUT; files from `threshold` bytes up go through S3 multipart, so an
 *   interrupted upload is continued by the next run: the unfinished upload of the same key is
 *   found with ListMultipartUploads, its parts with ListParts, and each part whose size and MD5
 *   (its ETag) match the local bytes is kept; the others are sent again. Nothing is aborted on
 *   failure, for that reason.
 * - A file whose object is already in the store with the same bytes (size and ETag, computed
 *   the way the store computes it) is not sent again, so re-running a folder upload only sends
 *   what is missing; it is recorded again, which is harmless (records are keyed by key).
 * - At most `concurrency` transfers (PUTs and parts) run at once, whatever mix of files.
 */
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { ClientError } from './errors.ts';

export const MiB = 1024 * 1024;
/** The smallest part S3 accepts (but the last). */
export const MIN_PART_BYTES = 5 * MiB;
/** The most parts S3 accepts in one upload. */
export const MAX_PARTS = 10_000;
/** The longest key S3 accepts, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024;

const TYPES: Record<string, string> = {
  '.txt': 'text/plain',
  '.html': 'text/html',
  '.css': 'text/css',
  '.js': 'text/javascript',
  '.json': 'application/json',
  '.xml': 'application/xml',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.svg': 'image/svg+xml',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
  '.zip': 'application/zip',
  '.gz': 'application/gzip',
  '.tar': 'application/x-tar',
  '.csv': 'text/csv',
  '.md': 'text/markdown',
};

export function contentType(name: string): string {
  return TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/** `8MiB`, `8M`, `512k`, `1G`, `1048576`: a size in bytes (binary units). */
export function parseSize(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$/i.exec(text);
  if (!m) throw new ClientError(`${what}: not a size: ${text} (for example 8MiB, 512KiB, 1GiB or bytes)`);
  const unit = { '': 1, k: 1024, m: MiB, g: 1024 * MiB, t: 1024 * 1024 * MiB }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  return Math.round(Number(m[1]) * unit);
}

export interface PlannedFile {
  /** Local path. */
  path: string;
  /** The record's name: the file name. */
  name: string;
  size: number;
  type: string;
  key: string;
  /**
   * For a file named on its own, the key holds a fresh UUID; a later run finds an unfinished
   * upload of the same file under any UUID with this pattern, listed under `listPrefix` (and
   * checks its bytes before it continues it).
   */
  keyPattern?: RegExp;
  listPrefix?: string;
}

export interface Plan {
  files: PlannedFile[];
  /** Entries inside folders that are not regular files (symbolic links, sockets...), skipped. */
  skipped: string[];
}

/** `docs`, `/docs/`, `docs//a` -> `docs/`, `docs/a/`; empty stays empty. */
export function normalizePrefix(prefix: string): string {
  const clean = prefix.split('/').filter(Boolean).join('/');
  return clean ? `${clean}/` : '';
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function checkKey(key: string, local: string): void {
  const control = [...key].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);
  if (control) throw new ClientError(`${local}: the name holds control characters, which S3 keys cannot carry; rename it`);
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new ClientError(`${local}: its key would be longer than ${MAX_KEY_BYTES} bytes: ${key.slice(0, 60)}...`);
}

function statOf(p: string): fs.Stats {
  try {
    return fs.statSync(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ClientError(`${p}: ${code === 'ENOENT' ? 'no such file or folder' : code === 'EACCES' ? 'permission denied' : (err as Error).message}`);
  }
}

/**
 * Turns the paths given into files to upload, before anything is sent: a file gets the key
 * `<prefix><uuid>/<safe name>`; a folder gives each regular file under it the key
 * `<prefix><path relative to the folder>`, so the folder's tree is kept and a re-run maps each
 * file to the same key. Missing paths, unreadable entries, empty folders and two files with one
 * key are refused here, in one line.
 */
export function planUploads(paths: readonly string[], prefixOption: string): Plan {
  const prefix = normalizePrefix(prefixOption);
  const files: PlannedFile[] = [];
  const skipped: string[] = [];
  for (const p of paths) {
    const stat = statOf(p);
    if (stat.isFile()) {
      const name = path.basename(p);
      const safe = name.replace(/[^\w.-]+/g, '_');
      const key = `${prefix}${randomUUID()}/${safe}`;
      checkKey(key, p);
      const keyPattern = new RegExp(`^${escapeRegExp(prefix)}[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/${escapeRegExp(safe)}$`);
      files.push({ path: p, name, size: stat.size, type: contentType(name), key, keyPattern, listPrefix: prefix });
      continue;
    }
    if (!stat.isDirectory()) throw new ClientError(`${p}: not a file or a folder`);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(p, { withFileTypes: true, recursive: true });
    } catch (err) {
      throw new ClientError(`${p}: cannot read the folder: ${(err as Error).message}`);
    }
    const inFolder: PlannedFile[] = [];
    for (const entry of entries) {
      if (entry.isDirectory()) continue;
      const local = path.join(entry.parentPath, entry.name);
      if (!entry.isFile()) {
        skipped.push(local);
        continue;
      }
      const rel = path.relative(p, local).split(path.sep).join('/');
      const key = `${prefix}${rel}`;
      checkKey(key, local);
      inFolder.push({ path: local, name: entry.name, size: statOf(local).size, type: contentType(entry.name), key });
    }
    if (!inFolder.length) throw new ClientError(`${p}: no files to upload in this folder`);
    // Walk order is the file system's; a sorted plan reads (and resumes) the same way every time.
    inFolder.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    files.push(...inFolder);
  }
  const seen = new Map<string, string>();
  for (const f of files) {
    const other = seen.get(f.key);
    if (other !== undefined) throw new ClientError(`${f.path} and ${other} would both be stored as ${f.key}; upload them with different --prefix values`);
    seen.set(f.key, f.path);
  }
  return { files, skipped };
}

/** At most `n` holders at once; the others wait in order. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];
  constructor(n: number) {
    this.#free = n;
  }
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}

export interface TransferOptions {
  s3: S3Client;
  bucket: string;
  /** Files from this size up go through multipart. */
  threshold: number;
  /** Preferred part size (grown for files that would need more than 10,000 parts). */
  partSize: number;
  concurrency: number;
  /** Bytes sent or found already in the store. */
  onBytes(n: number): void;
  /**
   * Ctrl-C: aborts the requests in flight and starts no more; a file it stops is neither done
   * nor failed (its multipart upload stays, for the next run to continue).
   */
  signal?: AbortSignal;
}

export type Outcome =
  | { file: PlannedFile; result: 'uploaded' | 'unchanged'; detail: string }
  | { file: PlannedFile; result: 'resumed'; detail: string; kept: number; parts: number }
  | { file: PlannedFile; result: 'failed'; detail: string };

const unquote = (etag: string | undefined) => (etag ?? '').replace(/"/g, '').toLowerCase();

/** The part size for a file: the preferred one, grown (to whole MiB) so the parts fit in 10,000. */
export function partSizeFor(size: number, preferred: number): number {
  const needed = Math.ceil(size / MAX_PARTS / MiB) * MiB;
  return Math.max(preferred, needed, MIN_PART_BYTES);
}

async function readRange(fd: fs.promises.FileHandle, start: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fd.read(buf, done, length - done, start + done);
    if (bytesRead === 0) throw new ClientError('the file got shorter while it was being uploaded');
    done += bytesRead;
  }
  return buf;
}

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

function storeError(err: unknown): string {
  const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  return `${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${e.message ?? String(err)}${status ? ` (HTTP ${status})` : ''}`;
}

const isNotFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
};

/** The object's size and ETag, or null when there is none. */
export async function headObject(s3: S3Client, bucket: string, key: string, signal?: AbortSignal): Promise<{ size: number; etag: string } | null> {
  const { HeadObjectCommand } = await import('@aws-sdk/client-s3');
  try {
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: signal });
    return { size: head.ContentLength ?? -1, etag: unquote(head.ETag) };
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** The parts' MD5s of a local file cut at `partSize`. */
async function partMd5s(fd: fs.promises.FileHandle, size: number, partSize: number): Promise<string[]> {
  const out: string[] = [];
  for (let start = 0; start < size; start += partSize) out.push(md5(await readRange(fd, start, Math.min(partSize, size - start))));
  return out;
}

interface Unfinished {
  key: string;
  uploadId: string;
  parts: Map<number, { size: number; etag: string }>;
}

/** The unfinished multipart uploads whose key is `key` (or matches the pattern), newest first. */
async function unfinishedUploads(s3: S3Client, bucket: string, file: PlannedFile, signal?: AbortSignal): Promise<{ key: string; uploadId: string }[]> {
  const { ListMultipartUploadsCommand } = await import('@aws-sdk/client-s3');
  const prefix = file.listPrefix ?? file.key;
  const found: { key: string; uploadId: string; initiated: number }[] = [];
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  for (let page = 0; page < 100; page++) {
    const out = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }), {
      abortSignal: signal,
    });
    for (const u of out.Uploads ?? []) {
      if (!u.Key || !u.UploadId) continue;
      if (u.Key === file.key || file.keyPattern?.test(u.Key)) found.push({ key: u.Key, uploadId: u.UploadId, initiated: u.Initiated?.getTime() ?? 0 });
    }
    if (!out.IsTruncated) break;
    keyMarker = out.NextKeyMarker;
    uploadIdMarker = out.NextUploadIdMarker;
  }
  return found.sort((a, b) => b.initiated - a.initiated);
}

async function listParts(
  s3: S3Client,
  bucket: string,
  key: string,
  uploadId: string,
  signal?: AbortSignal,
): Promise<Map<number, { size: number; etag: string }>> {
  const { ListPartsCommand } = await import('@aws-sdk/client-s3');
  const parts = new Map<number, { size: number; etag: string }>();
  let marker: string | undefined;
  for (let page = 0; page < MAX_PARTS / 1000 + 1; page++) {
    const out = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumberMarker: marker }), { abortSignal: signal });
    for (const p of out.Parts ?? []) if (p.PartNumber !== undefined) parts.set(p.PartNumber, { size: p.Size ?? -1, etag: unquote(p.ETag) });
    if (!out.IsTruncated) break;
    marker = out.NextPartNumberMarker;
  }
  return parts;
}

/**
 * Uploads every planned file, `concurrency` transfers at a time, and calls `done` as each one
 * ends (uploaded, unchanged, resumed or failed). A failure of one file does not stop the others;
 * `options.signal` stops them all, and the files it stops are not reported.
 */
export async function transfer(plan: readonly PlannedFile[], options: TransferOptions, done: (outcome: Outcome) => Promise<void> | void): Promise<void> {
  const slots = new Slots(options.concurrency);
  const queue = [...plan];
  const worker = async () => {
    for (let file = queue.shift(); file && !options.signal?.aborted; file = queue.shift()) {
      let outcome: Outcome;
      try {
        outcome = file.size >= options.threshold ? await multipart(file, options, slots) : await single(file, options, slots);
      } catch (err) {
        if (options.signal?.aborted) return;
        outcome = { file, result: 'failed', detail: err instanceof ClientError ? err.message : storeError(err) };
      }
      await done(outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, plan.length) }, worker));
}

async function single(file: PlannedFile, options: TransferOptions, slots: Slots): Promise<Outcome> {
  const { s3, bucket, signal } = options;
  const { PutObjectCommand } = await import('@aws-sdk/client-s3');
  return slots.run(async () => {
    signal?.throwIfAborted();
    const body = await fs.promises.readFile(file.path);
    if (body.length !== file.size) throw new ClientError(`${file.path}: the file changed size while it was being uploaded`);
    if (!file.keyPattern) {
      const head = await headObject(s3, bucket, file.key, signal);
      if (head && head.size === body.length && head.etag === md5(body)) {
        options.onBytes(body.length);
        return { file, result: 'unchanged', detail: 'already in the store' };
      }
    }
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: file.key, Body: body, ContentType: file.type, ContentLength: body.length }), {
      abortSignal: signal,
    });
    options.onBytes(body.length);
    return { file, result: 'uploaded', detail: '' };
  });
}

async function multipart(file: PlannedFile, options: TransferOptions, slots: Slots): Promise<Outcome> {
  const { s3, bucket, signal } = options;
  const sdk = await import('@aws-sdk/client-s3');
  const partSize = partSizeFor(file.size, options.partSize);
  const count = Math.ceil(file.size / partSize);
  const fd = await fs.promises.open(file.path, 'r');
  try {
    const sizeOf = (n: number) => Math.min(partSize, file.size - (n - 1) * partSize);
    let local: string[] | undefined;
    const localMd5s = async () => (local ??= await partMd5s(fd, file.size, partSize));

    // Already complete with these bytes (a re-run after the last step): nothing to send.
    if (!file.keyPattern) {
      const head = await headObject(s3, bucket, file.key, signal);
      if (head && head.size === file.size) {
        const md5s = await localMd5s();
        const etag = `${createHash('md5')
          .update(Buffer.concat(md5s.map((h) => Buffer.from(h, 'hex'))))
          .digest('hex')}-${count}`;
        if (head.etag === etag) {
          options.onBytes(file.size);
          return { file, result: 'unchanged', detail: 'already in the store' };
        }
      }
    }

    // An unfinished upload of this file: keep the parts whose size and MD5 match.
    let upload: Unfinished | undefined;
    for (const candidate of await unfinishedUploads(s3, bucket, file, signal)) {
      const listed = await listParts(s3, bucket, candidate.key, candidate.uploadId, signal);
      const md5s = await localMd5s();
      const kept = new Map([...listed].filter(([n, p]) => n <= count && p.size === sizeOf(n) && p.etag === md5s[n - 1]));
      // A UUID key is someone else's file unless its bytes prove otherwise.
      if (file.keyPattern && candidate.key !== file.key && kept.size === 0) continue;
      upload = { key: candidate.key, uploadId: candidate.uploadId, parts: kept };
      break;
    }
    // Continuing an upload made under another UUID: the file keeps that key.
    if (upload) file.key = upload.key;
    else {
      const created = await s3.send(new sdk.CreateMultipartUploadCommand({ Bucket: bucket, Key: file.key, ContentType: file.type }), { abortSignal: signal });
      if (!created.UploadId) throw new ClientError(`${file.key}: the store started no multipart upload`);
      upload = { key: file.key, uploadId: created.UploadId, parts: new Map() };
    }
    const kept = upload.parts.size;
    for (const [n] of upload.parts) options.onBytes(sizeOf(n));

    const etags = new Map<number, string>([...upload.parts].map(([n, p]) => [n, p.etag]));
    const missing = Array.from({ length: count }, (_, i) => i + 1).filter((n) => !etags.has(n));
    const { uploadId } = upload;
    // Every part settles before the file is closed; the first failure is the file's.
    const sent = await Promise.allSettled(
      missing.map((n) =>
        slots.run(async () => {
          signal?.throwIfAborted();
          const body = await readRange(fd, (n - 1) * partSize, sizeOf(n));
          const out = await s3.send(
            new sdk.UploadPartCommand({ Bucket: bucket, Key: file.key, UploadId: uploadId, PartNumber: n, Body: body, ContentLength: body.length }),
            { abortSignal: signal },
          );
          etags.set(n, unquote(out.ETag));
          options.onBytes(body.length);
        }),
      ),
    );
    const failed = sent.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const parts = [...etags].sort(([a], [b]) => a - b).map(([PartNumber, etag]) => ({ PartNumber, ETag: `"${etag}"` }));
    await s3.send(new sdk.CompleteMultipartUploadCommand({ Bucket: bucket, Key: file.key, UploadId: uploadId, MultipartUpload: { Parts: parts } }), {
      abortSignal: signal,
    });
    if (kept) return { file, result: 'resumed', detail: `${kept} of ${count} parts were already in the store`, kept, parts: count };
    return { file, result: 'uploaded', detail: `${count} parts` };
  } finally {
    await fd.close();
  }
}
