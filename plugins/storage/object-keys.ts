/**
 * Object keys for uploads: sanitized prefix + an unguessable unique part + sanitized file name,
 * `photos/2026/<22 random characters>/beach_day.jpg`. A key never holds `..`, never starts with
 * `/`, never holds control characters, and fits S3's 1024-byte limit.
 */
import { randomToken } from '../../core/tokens.ts';

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

/** A fresh key for an upload of `name` under `prefix`. */
export function uploadKey(prefix: string | undefined, name: string): string {
  const clean = sanitizePrefix(prefix);
  return `${clean ? `${clean}/` : ''}${randomToken(16)}/${sanitizeName(name)}`;
}
