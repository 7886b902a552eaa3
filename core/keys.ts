/**
 * The data directory and the keys kept in it: an Ed25519 signing key (JWTs) and a 256-bit
 * secret for encrypting stored secrets (AES-256-GCM) and deriving other keys. Generated on
 * first start, written with mode 0600 (temp file + rename, so a crash never leaves half a key),
 * and read on later starts.
 */
import { createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface Keys {
  /** Ed25519 private key for signing tokens (EdDSA). */
  signingKey: KeyObject;
  /** Its public half, for verification. */
  verifyKey: KeyObject;
  /** Encrypts a secret for storage; `context` binds the ciphertext to its purpose (AAD). */
  encrypt(plaintext: string, context: string): string;
  /** Reverses `encrypt`; throws on tampering or a wrong context. */
  decrypt(ciphertext: string, context: string): string;
  /** A 32-byte key derived for one purpose (HKDF-SHA256), stable across restarts. */
  derive(purpose: string): Buffer;
}

/** Creates the data directory (0700) and checks that it can be written, with a message naming it. */
export function prepareDataDir(dir: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const probe = path.join(dir, `.write-test-${process.pid}`);
    fs.writeFileSync(probe, '');
    fs.rmSync(probe);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new Error(`data dir ${dir} is not writable (${code}): ${(err as Error).message}`);
  }
}

/**
 * Writes a secret file once, mode 0600, atomically (temp file, fsync, link): a concurrent
 * writer that got there first keeps its content. The directory is created 0700.
 */
export function writeSecretFile(file: string, content: string | Buffer): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    fs.writeSync(fd, typeof content === 'string' ? Buffer.from(content) : content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  // Another process (a concurrent first start) may have won the race: keep its key.
  try {
    fs.linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

function readOrCreate(file: string, create: () => string | Buffer): Buffer {
  if (!fs.existsSync(file)) writeSecretFile(file, create());
  return fs.readFileSync(file);
}

/** Loads the keys from `<dataDir>/keys/`, generating any that are missing. */
export function loadKeys(dataDir: string): Keys {
  const dir = path.join(dataDir, 'keys');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pem = readOrCreate(path.join(dir, 'signing-ed25519.pem'), () =>
    generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  );
  const signingKey = createPrivateKey(pem);
  const secretText = readOrCreate(path.join(dir, 'secret.key'), () => `${randomBytes(32).toString('base64')}\n`);
  const secret = Buffer.from(secretText.toString().trim(), 'base64');
  if (secret.length !== 32) throw new Error(`${path.join(dir, 'secret.key')} does not hold a 32-byte base64 key`);
  return makeKeys(signingKey, secret);
}

function makeKeys(signingKey: KeyObject, secret: Buffer): Keys {
  const encryptionKey = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'wharf:encryption:v1', 32));
  return {
    signingKey,
    verifyKey: createPublicKey(signingKey),
    encrypt(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', encryptionKey, iv);
      cipher.setAAD(Buffer.from(context));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return `v1.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
    },
    decrypt(ciphertext, context) {
      if (!ciphertext.startsWith('v1.')) throw new Error('unknown ciphertext version');
      const raw = Buffer.from(ciphertext.slice(3), 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', encryptionKey, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
    derive(purpose) {
      return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `wharf:${purpose}`, 32));
    },
  };
}
