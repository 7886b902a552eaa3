/** File records as SQLite stores them, and the one mapping to the API's shape (store.ts and store-search.ts). */
import type { FileRecord } from './types.ts';

export interface FileRow {
  id: string;
  app_id: string;
  key: string;
  name: string;
  size: number;
  type: string;
  uploaded_at: string;
}

export type Direction = 'asc' | 'desc';

/** The columns of a FileRow, from `storage_files f`. */
export const FILE_COLUMNS = 'f.id, f.app_id, f.key, f.name, f.size, f.type, f.uploaded_at';

/** The list's order: uploadedAt, the id breaking ties so pages never repeat or skip a file. */
export const orderBy = (dir: Direction, alias = 'f.') => `ORDER BY ${alias}uploaded_at ${dir.toUpperCase()}, ${alias}id ${dir.toUpperCase()}`;

export const toFile = (r: FileRow): FileRecord => ({
  id: r.id,
  appId: r.app_id,
  key: r.key,
  name: r.name,
  size: r.size,
  type: r.type,
  uploadedAt: r.uploaded_at,
});
