/**
 * The public, expiring media URLs of the messaging API (`sessions_media`): uploaded files
 * (`GET /api/media/{id}`, bytes kept by the network adapter) and decrypted media
 * (`GET /api/decrypted-media/{id}`, plaintext kept here). The id is the URL's only credential,
 * so it is always unguessable.
 */
import type { Database } from '../../core/db.ts';

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
  readonly #s;

  constructor(db: Database) {
    this.#s = {
      insert: db.prepare(
        `INSERT INTO sessions_media (id, kind, org_id, session_id, mimetype, file_name, size, bytes, expires_at, created_at)
         VALUES (@id, @kind, @org_id, @session_id, @mimetype, @file_name, @size, @bytes, @expires_at, @created_at)`,
      ),
      live: db.prepare('SELECT * FROM sessions_media WHERE id = ? AND kind = ? AND expires_at > ?'),
      prune: db.prepare('DELETE FROM sessions_media WHERE expires_at <= ?'),
    };
  }

  insert(row: MediaRow): void {
    this.#s.insert.run(row);
  }

  /** The row of a URL that has not expired at `now` (ISO 8601); undefined otherwise. */
  live(id: string, kind: MediaKind, now: string): MediaRow | undefined {
    return this.#s.live.get(id, kind, now) as MediaRow | undefined;
  }

  /** Deletes expired rows; returns how many. */
  prune(now: string): number {
    return this.#s.prune.run(now).changes;
  }
}
