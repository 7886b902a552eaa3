/**
 * The database remembers which keys it was set up with: `core_keys_check` holds one row, a known
 * text sealed with the instance's secret key and the fingerprint of its signing key, written by
 * the first start. Each start after that (of this instance, or of another on a shared PostgreSQL
 * database, or after `wharf migrate-data`) opens the row with its own keys and refuses to start
 * when they are not the database's: an instance whose `keys/` was not copied would otherwise
 * answer ready and then fail every request that decrypts a stored secret (session API keys,
 * webhook secrets, bucket keys) and every cookie another instance signed.
 */
import { createHash } from 'node:crypto';
import type { Db } from './db.ts';
import type { Keys } from './keys.ts';
import type { Migration } from './plugin.ts';

/** The core's own migrations (recorded under the name `core`). */
export const CORE_MIGRATIONS: readonly Migration[] = [
  {
    id: '001_keys_check',
    sql: 'CREATE TABLE IF NOT EXISTS core_keys_check (id INTEGER PRIMARY KEY, sealed TEXT NOT NULL, signing_key TEXT NOT NULL)',
  },
];

const KNOWN = 'wharf keys check v1';
const CONTEXT = 'core:keys-check';

/** The SHA-256 of the public signing key (SPKI DER), hex. */
function fingerprint(keys: Keys): string {
  return createHash('sha256')
    .update(keys.verifyKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

function opens(keys: Keys, sealed: string): boolean {
  try {
    return keys.decrypt(sealed, CONTEXT) === KNOWN;
  } catch {
    return false;
  }
}

/**
 * Checks the keys against the database's row, writing it when there is none yet (the first
 * start; concurrent first starts keep the first row written). Returns null when they match, else
 * what does not match, in words.
 */
export async function keysMismatch(data: Db, keys: Keys): Promise<string | null> {
  const signingKey = fingerprint(keys);
  const read = () => data.one<{ sealed: string; signing_key: string }>('SELECT sealed, signing_key FROM core_keys_check WHERE id = 1');
  // Read first: every start but the first finds the row (one round trip on PostgreSQL, not two).
  let row = await read();
  if (!row) {
    await data.run('INSERT INTO core_keys_check (id, sealed, signing_key) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING', [
      keys.encrypt(KNOWN, CONTEXT),
      signingKey,
    ]);
    row = await read();
  }
  if (!row) return 'the database has no keys check row';
  const problems: string[] = [];
  if (!opens(keys, row.sealed)) problems.push('secret.key cannot decrypt the secrets stored in it');
  if (row.signing_key !== signingKey) problems.push("signing-ed25519.pem is not the key that signs its sessions' cookies");
  return problems.length ? problems.join(', and ') : null;
}
