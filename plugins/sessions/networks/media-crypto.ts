/**
 * WhatsApp's media encryption, which the sandbox reproduces so that received media nodes look
 * and decrypt like real ones: a random 32-byte mediaKey is expanded with HKDF-SHA256 (info
 * "WhatsApp <Type> Keys") into an IV, an AES-256-CBC key and an HMAC key; the stored file is the
 * ciphertext followed by the first 10 bytes of HMAC-SHA256(iv || ciphertext).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { MediaType } from './types.ts';

const INFO: Readonly<Record<MediaType, string>> = {
  image: 'WhatsApp Image Keys',
  sticker: 'WhatsApp Image Keys',
  video: 'WhatsApp Video Keys',
  audio: 'WhatsApp Audio Keys',
  document: 'WhatsApp Document Keys',
};

function expand(mediaKey: Buffer, type: MediaType): { iv: Buffer; cipherKey: Buffer; macKey: Buffer } {
  const expanded = Buffer.from(hkdfSync('sha256', mediaKey, Buffer.alloc(0), INFO[type], 112));
  return { iv: expanded.subarray(0, 16), cipherKey: expanded.subarray(16, 48), macKey: expanded.subarray(48, 80) };
}

export interface EncryptedMedia {
  mediaKey: Buffer;
  file: Buffer;
  fileSha256: Buffer;
  fileEncSha256: Buffer;
}

export function encryptMedia(plain: Buffer, type: MediaType): EncryptedMedia {
  const mediaKey = randomBytes(32);
  const { iv, cipherKey, macKey } = expand(mediaKey, type);
  const cipher = createCipheriv('aes-256-cbc', cipherKey, iv);
  const enc = Buffer.concat([cipher.update(plain), cipher.final()]);
  const mac = createHmac('sha256', macKey).update(iv).update(enc).digest().subarray(0, 10);
  const file = Buffer.concat([enc, mac]);
  return {
    mediaKey,
    file,
    fileSha256: createHash('sha256').update(plain).digest(),
    fileEncSha256: createHash('sha256').update(file).digest(),
  };
}

/** The plaintext, or null when the key does not match the file (MAC check failed). */
export function decryptMedia(file: Buffer, mediaKey: Buffer, type: MediaType): Buffer | null {
  if (file.length < 26 || mediaKey.length !== 32) return null;
  const { iv, cipherKey, macKey } = expand(mediaKey, type);
  const enc = file.subarray(0, file.length - 10);
  const mac = createHmac('sha256', macKey).update(iv).update(enc).digest().subarray(0, 10);
  if (!timingSafeEqual(mac, file.subarray(file.length - 10))) return null;
  try {
    const decipher = createDecipheriv('aes-256-cbc', cipherKey, iv);
    return Buffer.concat([decipher.update(enc), decipher.final()]);
  } catch {
    return null;
  }
}
