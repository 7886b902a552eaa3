/** Helpers for opaque secrets: generation, and the hash stored in place of a secret. */
import { hash, randomBytes } from 'node:crypto';

/** `bytes` random bytes as URL-safe text. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/**
 * SHA-256 of a secret, hex: what is stored and looked up instead of the secret. Node's one-shot
 * `hash` makes no Hash object: a third of `createHash().update().digest()`'s time, on every
 * token a request presents.
 */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}
