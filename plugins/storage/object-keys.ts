/**
 * Object keys for uploads: sanitized prefix + an unguessable unique part + sanitized file name,
 * `photos/2026/<22 characters>/beach_day.jpg`. A key never holds `..`, never starts with
 * `/`, never holds control characters, and fits S3's 1024-byte limit.
 */
import { randomFillSync } from 'node:crypto';

/** Most bytes (UTF-8) of the sanitized prefix and of the sanitized name. */
export const MAX_PREFIX_BYTES = 512;
export const MAX_NAME_BYTES = 255;
const MAX_PREFIX_SEGMENTS = 16;

/** Letters, marks and digits of any script, and a few punctuation marks safe in URLs and shells. */
const UNSAFE = /[^\p{L}\p{M}\p{N}._\-()!~+=,@]/gu;

/** The longest start of `text` that fits `bytes` in UTF-8, cut between code points. */
function clipBytes(text: string, bytes: number): string {
  let out = '';
  let used = 0;
  for (const ch of text) {
    const size = Buffer.byteLength(ch);
    if (used + size > bytes) break;
    out += ch;
    used += size;
  }
  return out;
}

/** One path segment made safe: unsafe characters become `_`, no runs of dots, no leading or trailing dots. */
function sanitizeSegment(raw: string): string {
  return raw
    .normalize('NFC')
    .replace(UNSAFE, '_')
    .replace(/\.{2,}/g, '.')
    .replace(/_{2,}/g, '_')
    .replace(/^[._]+/, '')
    .replace(/[._]+$/, '');
}

/** A file name as the last segment of a key: sanitized, at most 255 bytes, extension kept when cut. */
export function sanitizeName(name: string): string {
  const clean = sanitizeSegment(name) || 'file';
  if (Buffer.byteLength(clean) <= MAX_NAME_BYTES) return clean;
  const dot = clean.lastIndexOf('.');
  const ext = dot > 0 && clean.length - dot <= 16 ? clean.slice(dot) : '';
  return clipBytes(clean.slice(0, clean.length - ext.length), MAX_NAME_BYTES - Buffer.byteLength(ext)).replace(/[._]+$/, '') + ext;
}

/** A key prefix: `/` or `\` separate segments; empty, `.` and `..` segments vanish. Ends without `/`. */
export function sanitizePrefix(prefix: string | undefined): string {
  if (!prefix) return '';
  const segments = prefix
    .split(/[/\\]+/)
    .map(sanitizeSegment)
    .filter(Boolean)
    .slice(0, MAX_PREFIX_SEGMENTS);
  let out = '';
  for (const segment of segments) {
    const next = out ? `${out}/${segment}` : segment;
    if (Buffer.byteLength(next) > MAX_PREFIX_BYTES) break;
    out = next;
  }
  return out;
}

/** The 64 characters of base64url in byte order. */
const SORTED = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes for keys drawn from a pool filled 4 KiB at a time, as crypto.randomUUID does: one
 * call into the random generator per 372 keys instead of one per key (a phase 1 makes 100).
 */
const pool = Buffer.alloc(4092);
let poolUsed = pool.length;

/**
 * The unique part of a key: 22 characters of base64url's alphabet, the milliseconds of `now` in
 * the first 8 (in byte order: under one prefix, later keys sort after earlier ones) and 14
 * random ones (84 bits, unguessable). Sorted by time, a phase 1's 100 reservations, and later
 * their file records, go to the end of the (app, key) B-trees, a few pages; with random keys they
 * went to 100 pages scattered over the index, written to the WAL and checkpointed on every
 * commit, most of phase 1's cost (BENCHMARKS.md, issue 16 part 6).
 */
export function uniquePart(now = Date.now()): string {
  let time = '';
  for (let i = 0, t = now; i < 8; i++, t = Math.floor(t / 64)) time = SORTED[t % 64] + time;
  if (poolUsed + 11 > pool.length) {
    randomFillSync(pool);
    poolUsed = 0;
  }
  const random = pool.toString('base64url', poolUsed, poolUsed + 11);
  // Each byte used once: taken bytes are never handed out again.
  poolUsed += 11;
  return time + random.slice(0, 14);
}

/** A fresh key for an upload of `name` under `prefix`. */
export function uploadKey(prefix: string | undefined, name: string, now = Date.now()): string {
  return uploadKeys(prefix, [name], now)[0]!;
}

/** Fresh keys for the uploads of `names` under one `prefix` (sanitized once). */
export function uploadKeys(prefix: string | undefined, names: readonly string[], now = Date.now()): string[] {
  const clean = sanitizePrefix(prefix);
  const start = clean ? `${clean}/` : '';
  return names.map((name) => `${start}${uniquePart(now)}/${sanitizeName(name)}`);
}
