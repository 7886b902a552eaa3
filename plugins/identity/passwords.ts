/**
 * Password hashes with scrypt (node:crypto), parameters and salt stored in each hash:
 * `scrypt$<N>$<r>$<p>$<salt>$<hash>` (base64url). Hashing runs on libuv's thread pool.
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const KEY_LENGTH = 32;

function scrypt(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(password.normalize('NFKC'), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string, cost: number): Promise<string> {
  const salt = randomBytes(16);
  const r = 8;
  const p = 1;
  const key = await scrypt(password, salt, { N: cost, r, p, maxmem: 256 * cost * r });
  return `scrypt$${cost}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/** Constant-time check of a password against a stored hash; false for a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  const salt = Buffer.from(parts[4]!, 'base64url');
  const expected = Buffer.from(parts[5]!, 'base64url');
  if (!N || !r || !p || expected.length !== KEY_LENGTH) return false;
  const key = await scrypt(password, salt, { N, r, p, maxmem: 256 * N * r });
  return timingSafeEqual(key, expected);
}
