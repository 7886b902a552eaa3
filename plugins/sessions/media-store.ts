/**
 * The public, expiring media URLs of the messaging API (`sessions_media`): uploaded files
 * (`GET /api/media/{id}`, bytes kept by the network adapter) and decrypted media
 * (`GET /api/decrypted-media/{id}`, plaintext kept here). The id is the URL's only credential,
 * so it is always unguessable.
 */
import type { Db } from '../../core/db.ts';

export type MediaKind = 'upload' | 'decrypted';

export interface MediaRow {
  id: string;
  kind: MediaKind;
  org_id: string;
  session_id: number;
  mimetype: string;
  file_name: string | null;
  size: number;
  bytes: Buffer | null;
  expires_at: string;
  created_at: string;
}

export class MediaStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async insert(row: MediaRow): Promise<void> {
    await this.#db.run(
      `INSERT INTO sessions_media (id, kind, org_id, session_id, mimetype, file_name, size, bytes, expires_at, created_at)
       VALUES (@id, @kind, @org_id, @session_id, @mimetype, @file_name, @size, @bytes, @expires_at, @created_at)`,
      row as unknown as Record<string, unknown>,
    );
  }

  /** The row of a URL that has not expired at `now` (ISO 8601); undefined otherwise. */
  live(id: string, kind: MediaKind, now: string): Promise<MediaRow | undefined> {
    return this.#db.one<MediaRow>('SELECT * FROM sessions_media WHERE id = ? AND kind = ? AND expires_at > ?', [id, kind, now]);
  }

  /** Deletes expired rows; returns how many. */
  async prune(now: string): Promise<number> {
    return (await this.#db.run('DELETE FROM sessions_media WHERE expires_at <= ?', [now])).changes;
  }
}
