/**
 * The public, expiring media URLs of the messaging API: a file uploaded to send later (the
 * session's network keeps the bytes; the URL lives `upload_ttl_hours`) and the plaintext of a
 * received message's media (kept here; the URL lives `decrypted_media_ttl_minutes`). An URL's id
 * is its only credential, so it is always unguessable.
 */
import { WharfError } from '../../core/errors.ts';
import { randomToken } from '../../core/tokens.ts';
import type { MediaKind, MediaStore } from './media-store.ts';
import type { MessageKey, MessageNode, StoredMedia } from './networks/types.ts';
import type { ConnectedSession, Sessions } from './service.ts';

/** A public media URL handed out, and what it serves. */
export interface MediaUrl {
  id: string;
  publicUrl: string;
  mimetype: string;
  size: number;
  fileName: string | null;
  /** ISO 8601. */
  expiresAt: string;
}

/** Stored bytes and until when their URL answers. */
export interface ServedMedia {
  file: StoredMedia;
  expiresAt: string;
}

const EXTENSION: ReadonlyMap<string, string> = new Map(
  Object.entries({
    'image/jpeg': '.jpg',
    'image/png': '.png',
    'image/gif': '.gif',
    'image/webp': '.webp',
    'video/mp4': '.mp4',
    'video/3gpp': '.3gp',
    'video/quicktime': '.mov',
    'audio/mpeg': '.mp3',
    'audio/ogg': '.ogg',
    'audio/aac': '.aac',
    'audio/mp4': '.m4a',
    'audio/amr': '.amr',
    'application/pdf': '.pdf',
    'text/plain': '.txt',
    'text/csv': '.csv',
    'application/zip': '.zip',
  }),
);

/** The id a media URL's last segment names (`<id>` or `<id>.<ext>`), or undefined. */
const MEDIA_FILE = /^([A-Za-z0-9_-]{16,128})(?:\.[A-Za-z0-9]{1,10})?$/;

export class MediaUrls {
  readonly #sessions: Sessions;
  readonly #store: MediaStore;
  readonly #base: string;
  readonly #uploadTtlMs: number;
  readonly #decryptedTtlMs: number;

  constructor(sessions: Sessions, store: MediaStore, options: { publicUrl: string; uploadTtlHours: number; decryptedTtlMinutes: number }) {
    this.#sessions = sessions;
    this.#store = store;
    this.#base = options.publicUrl.replace(/\/+$/, '');
    this.#uploadTtlMs = options.uploadTtlHours * 3_600_000;
    this.#decryptedTtlMs = options.decryptedTtlMinutes * 60_000;
  }

  /** Hands an uploaded file to the session's network and gives it a public URL. */
  async upload({ session, network }: ConnectedSession, file: { bytes: Buffer; mimetype: string; fileName?: string }): Promise<MediaUrl> {
    const { id } = await network.uploadMedia(session, file);
    const essence = file.mimetype.split(';')[0]!.trim().toLowerCase();
    // The network keeps the bytes; this row only makes the URL live.
    return this.#record('upload', id, session, { ...file, fileName: file.fileName ?? null }, `/api/media/${id}${EXTENSION.get(essence) ?? ''}`);
  }

  /** The uploaded file a public URL names (its last segment); 404 when unknown or expired. */
  async uploaded(fileParam: string | undefined): Promise<ServedMedia> {
    const id = MEDIA_FILE.exec(fileParam ?? '')?.[1];
    const row = id ? await this.#store.live(id, 'upload', new Date().toISOString()) : undefined;
    const session = row && (await this.#sessions.get(row.session_id));
    const network = session && this.#sessions.network(session);
    const stored = network && (await network.uploadedMedia(session, row.id));
    if (!row || !stored) throw new WharfError('not_found', 'Media not found or expired');
    return { file: { ...stored, mimetype: row.mimetype, fileName: row.file_name ?? stored.fileName }, expiresAt: row.expires_at };
  }

  /** Downloads and decrypts a received message's media through the session's network; the plaintext gets a public URL. */
  async decrypt({ session, network }: ConnectedSession, node: MessageNode, key?: Partial<MessageKey>): Promise<MediaUrl> {
    const file = await network.decryptMedia(session, node, key);
    const id = randomToken(32);
    return this.#record('decrypted', id, session, file, `/api/decrypted-media/${id}`);
  }

  /** Makes a media URL live for its kind's lifetime; the plaintext of decrypted media is kept with it. */
  async #record(kind: MediaKind, id: string, session: { id: number; orgId: string }, file: StoredMedia, path: string): Promise<MediaUrl> {
    const now = new Date();
    const expiresAt = new Date(now.getTime() + (kind === 'upload' ? this.#uploadTtlMs : this.#decryptedTtlMs)).toISOString();
    await this.#store.insert({
      id,
      kind,
      org_id: session.orgId,
      session_id: session.id,
      mimetype: file.mimetype,
      file_name: file.fileName,
      size: file.bytes.length,
      bytes: kind === 'decrypted' ? file.bytes : null,
      expires_at: expiresAt,
      created_at: now.toISOString(),
    });
    return { id, publicUrl: `${this.#base}${path}`, mimetype: file.mimetype, size: file.bytes.length, fileName: file.fileName, expiresAt };
  }

  /** The plaintext a decrypted-media URL names; 404 when unknown or expired. */
  async decrypted(idParam: string | undefined): Promise<ServedMedia> {
    const id = MEDIA_FILE.exec(idParam ?? '')?.[1];
    const row = id ? await this.#store.live(id, 'decrypted', new Date().toISOString()) : undefined;
    if (!row?.bytes) throw new WharfError('not_found', 'Media not found or expired');
    return { file: { bytes: row.bytes, mimetype: row.mimetype, fileName: row.file_name }, expiresAt: row.expires_at };
  }
}
