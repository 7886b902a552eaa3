/** The storage plugin's SQL: apps, file records, upload reservations. */
import type { Database } from '../../core/db.ts';
import type BetterSqlite3 from 'better-sqlite3';
import { type Direction, FILE_COLUMNS, type FileRow, orderBy, toFile } from './file-rows.ts';
import { FileSearch } from './store-search.ts';
import type { AppRecord, FileRecord } from './types.ts';

export type { Direction } from './file-rows.ts';

interface AppRow {
  id: string;
  seq: number;
  org_id: string;
  name: string;
  bucket_name: string;
  storage_limit: number | null;
  stored_bytes: number;
  file_count: number;
  unregistered_bytes: number;
  unregistered_count: number;
  usage_checked_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface UploadRow {
  app_id: string;
  key: string;
  size: number;
  type: string;
  state: 'pending' | 'reaping';
  expires_at: string;
}

/** An app with what is kept beside it: its number (the rowid range of its files) and counters. */
export interface AppState extends AppRecord {
  seq: number;
  storedBytes: number;
  fileCount: number;
  /** From the last reconciliation (s3 driver): objects with neither a record nor an unfinished upload. */
  unregisteredBytes: number;
  unregisteredCount: number;
  /** When that reconciliation's listing started; null before the first. */
  usageCheckedAt: string | null;
}

/** An object's size as the store reports it, for records to follow. */
export interface SizeChange {
  key: string;
  /** Undefined: the object is gone. */
  size: number | undefined;
}

const toApp = (r: AppRow): AppState => ({
  id: r.id,
  orgId: r.org_id,
  name: r.name,
  bucketName: r.bucket_name,
  storageLimit: r.storage_limit,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  seq: r.seq,
  storedBytes: r.stored_bytes,
  fileCount: r.file_count,
  unregisteredBytes: r.unregistered_bytes,
  unregisteredCount: r.unregistered_count,
  usageCheckedAt: r.usage_checked_at,
});

/** The file list's page for one sort direction: its rowids come from the covering (app_id, uploaded_at, id, name) index alone; only the page's rows are read from the table. */
function pageStatement(db: Database, dir: Direction) {
  return db.prepare(
    `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.seq IN (
       SELECT f.seq FROM storage_files f WHERE f.app_id = ? ${orderBy(dir)} LIMIT ? OFFSET ?
     ) ${orderBy(dir)}`,
  );
}

export class StorageStore {
  readonly #db: Database;
  readonly #s;
  readonly #pages: Record<Direction, BetterSqlite3.Statement>;
  readonly #search: FileSearch;

  constructor(db: Database) {
    this.#db = db;
    this.#pages = { asc: pageStatement(db, 'asc'), desc: pageStatement(db, 'desc') };
    this.#search = new FileSearch(db);
    this.#s = {
      app: db.prepare('SELECT * FROM storage_apps WHERE id = ? AND deleting = 0'),
      appInOrg: db.prepare('SELECT * FROM storage_apps WHERE id = ? AND org_id = ? AND deleting = 0'),
      appsOfOrg: db.prepare('SELECT * FROM storage_apps WHERE org_id = ? AND deleting = 0 ORDER BY created_at DESC, id DESC'),
      appAny: db.prepare('SELECT * FROM storage_apps WHERE id = ?'),
      bucketOf: db.prepare('SELECT bucket_name FROM storage_apps WHERE id = ?'),
      appOfBucket: db.prepare('SELECT id, storage_limit FROM storage_apps WHERE bucket_name = ?'),
      liveApps: db.prepare('SELECT id, bucket_name FROM storage_apps WHERE deleting = 0 ORDER BY seq'),
      setUnregistered: db.prepare(
        'UPDATE storage_apps SET unregistered_bytes = @bytes, unregistered_count = @count, usage_checked_at = @checkedAt WHERE id = @id',
      ),
      lessUnregistered: db.prepare(
        'UPDATE storage_apps SET unregistered_bytes = max(0, unregistered_bytes - @bytes), unregistered_count = max(0, unregistered_count - @count) WHERE id = @id',
      ),
      insertApp: db.prepare(
        `INSERT INTO storage_apps (id, seq, org_id, name, bucket_name, storage_limit, created_at, updated_at)
         VALUES (@id, (SELECT coalesce(max(seq), 0) + 1 FROM storage_apps), @orgId, @name, @bucketName, @storageLimit, @now, @now)`,
      ),
      updateApp: db.prepare('UPDATE storage_apps SET name = @name, storage_limit = @storageLimit, updated_at = @now WHERE id = @id AND deleting = 0'),
      setDeleting: db.prepare('UPDATE storage_apps SET deleting = ? WHERE id = ?'),
      deleteApp: db.prepare('DELETE FROM storage_apps WHERE id = ?'),

      upsertFile: db.prepare(
        `INSERT INTO storage_files (seq, id, app_id, key, name, size, type, uploaded_at)
         VALUES ((SELECT seq * 4294967296 + next_file FROM storage_apps WHERE id = @appId), @id, @appId, @key, @name, @size, @type, @now)
         ON CONFLICT (app_id, key) DO UPDATE SET name = excluded.name, size = excluded.size, type = excluded.type, uploaded_at = excluded.uploaded_at
         RETURNING id, app_id, key, name, size, type, uploaded_at`,
      ),
      fileInOrg: db.prepare(
        `SELECT ${FILE_COLUMNS} FROM storage_files f JOIN storage_apps a ON a.id = f.app_id
         WHERE f.id = ? AND a.org_id = ? AND a.deleting = 0`,
      ),
      fileKeyExists: db.prepare('SELECT 1 FROM storage_files WHERE app_id = ? AND key = ?'),
      deleteFileByKey: db.prepare('DELETE FROM storage_files WHERE app_id = ? AND key = ?'),
      fileSize: db.prepare('SELECT size FROM storage_files WHERE app_id = ? AND key = ?').pluck(),
      setFileSize: db.prepare('UPDATE storage_files SET size = @size WHERE app_id = @appId AND key = @key AND size != @size'),
      // Not a record written since `before`: it describes a newer object than a listing may have seen.
      correctFileSize: db.prepare('UPDATE storage_files SET size = @size WHERE app_id = @appId AND key = @key AND size != @size AND uploaded_at < @before'),
      // One look-up for a page of listed keys (json_each: the keys as one JSON array).
      filesOfKeys: db.prepare('SELECT f.key, f.size FROM json_each(?) j JOIN storage_files f ON f.app_id = ? AND f.key = j.value'),

      upload: db.prepare('SELECT * FROM storage_uploads WHERE app_id = ? AND key = ?'),
      insertUpload: db.prepare(
        `INSERT INTO storage_uploads (app_id, key, size, type, state, created_at, expires_at)
         VALUES (@appId, @key, @size, @type, 'pending', @now, @expiresAt)`,
      ),
      deleteUpload: db.prepare('DELETE FROM storage_uploads WHERE app_id = ? AND key = ?'),
      reservations: db.prepare("SELECT key, size FROM storage_uploads WHERE app_id = ? AND state = 'pending' AND expires_at > ?").raw(),
      reservedOfKeys: db
        .prepare("SELECT u.key FROM json_each(?) j JOIN storage_uploads u ON u.app_id = ? AND u.key = j.value WHERE u.state = 'pending' AND u.expires_at > ?")
        .pluck(),
      expiredUploads: db.prepare("SELECT app_id, key FROM storage_uploads WHERE expires_at <= ? OR state = 'reaping' ORDER BY expires_at LIMIT ?"),
      markReaping: db.prepare("UPDATE storage_uploads SET state = 'reaping' WHERE app_id = ? AND key = ?"),
    };
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn).immediate();
  }

  // ---------------------------------------------------------------- apps

  app(id: string): AppState | undefined {
    const row = this.#s.app.get(id) as AppRow | undefined;
    return row && toApp(row);
  }

  appInOrg(id: string, orgId: string): AppState | undefined {
    const row = this.#s.appInOrg.get(id, orgId) as AppRow | undefined;
    return row && toApp(row);
  }

  appsOfOrg(orgId: string): AppState[] {
    return (this.#s.appsOfOrg.all(orgId) as AppRow[]).map(toApp);
  }

  /** The bucket of an app even while it is being deleted (for the reaper). */
  bucketOf(id: string): string | undefined {
    return (this.#s.bucketOf.get(id) as { bucket_name: string } | undefined)?.bucket_name;
  }

  /** The app owning a bucket (even while it is being deleted) and its limit. */
  appOfBucket(bucket: string): { id: string; storageLimit: number | null } | undefined {
    const row = this.#s.appOfBucket.get(bucket) as { id: string; storage_limit: number | null } | undefined;
    return row && { id: row.id, storageLimit: row.storage_limit };
  }

  /** Every app not being deleted, with its bucket (for the reconciliation). */
  liveApps(): { id: string; bucketName: string }[] {
    return (this.#s.liveApps.all() as { id: string; bucket_name: string }[]).map((r) => ({ id: r.id, bucketName: r.bucket_name }));
  }

  /** Stores what a reconciliation found besides the records. */
  setUnregistered(id: string, measured: { bytes: number; count: number; checkedAt: string }): void {
    this.#s.setUnregistered.run({ id, ...measured });
  }

  /** Objects counted unregistered that have just been recorded. */
  lessUnregistered(id: string, bytes: number, count: number): void {
    this.#s.lessUnregistered.run({ id, bytes, count });
  }

  insertApp(input: { id: string; orgId: string; name: string; bucketName: string; storageLimit: number | null; now: string }): AppState {
    this.#s.insertApp.run(input);
    return toApp(this.#s.appAny.get(input.id) as AppRow);
  }

  updateApp(input: { id: string; name: string; storageLimit: number | null; now: string }): AppState | undefined {
    this.#s.updateApp.run(input);
    return this.app(input.id);
  }

  /** Marks an app as being deleted; false when it is missing or already being deleted. */
  markDeleting(id: string, orgId: string): boolean {
    return this.transaction(() => {
      if (!this.#s.appInOrg.get(id, orgId)) return false;
      this.#s.setDeleting.run(1, id);
      return true;
    });
  }

  unmarkDeleting(id: string): void {
    this.#s.setDeleting.run(0, id);
  }

  /** Deletes the app row; its files and uploads go with it (foreign keys). */
  deleteApp(id: string): void {
    this.#s.deleteApp.run(id);
  }

  // ---------------------------------------------------------------- files

  upsertFile(input: { id: string; appId: string; key: string; name: string; size: number; type: string; now: string }): FileRecord {
    return toFile(this.#s.upsertFile.get(input) as FileRow);
  }

  fileInOrg(id: string, orgId: string): FileRecord | undefined {
    const row = this.#s.fileInOrg.get(id, orgId) as FileRow | undefined;
    return row && toFile(row);
  }

  hasFileKey(appId: string, key: string): boolean {
    return this.#s.fileKeyExists.get(appId, key) !== undefined;
  }

  /** The recorded size of a key, or undefined when it has no record. */
  fileSize(appId: string, key: string): number | undefined {
    return this.#s.fileSize.get(appId, key) as number | undefined;
  }

  /** Records follow their objects: a new size replaces the recorded one, a removed object takes its record. */
  followObjects(appId: string, changes: readonly SizeChange[]): void {
    // Most writes touch no record (uploads not registered yet): a read each, and no transaction.
    const due = changes.filter((c) => {
      const recorded = this.fileSize(appId, c.key);
      return recorded !== undefined && recorded !== c.size;
    });
    if (!due.length) return;
    this.transaction(() => {
      for (const c of due) {
        if (c.size === undefined) this.#s.deleteFileByKey.run(appId, c.key);
        else this.#s.setFileSize.run({ appId, key: c.key, size: c.size });
      }
    });
  }

  /** Recorded sizes of a page of keys (absent keys have no record). */
  filesOfKeys(appId: string, keys: readonly string[]): Map<string, number> {
    const rows = this.#s.filesOfKeys.all(JSON.stringify(keys), appId) as { key: string; size: number }[];
    return new Map(rows.map((r) => [r.key, r.size]));
  }

  /** Sets listed sizes on records older than `before`; returns how many changed. */
  correctFileSizes(appId: string, sizes: readonly { key: string; size: number }[], before: string): number {
    return this.transaction(() => {
      let changed = 0;
      for (const { key, size } of sizes) changed += this.#s.correctFileSize.run({ appId, key, size, before }).changes;
      return changed;
    });
  }

  deleteFilesByKeys(appId: string, keys: readonly string[]): void {
    this.transaction(() => {
      for (const key of keys) this.#s.deleteFileByKey.run(appId, key);
    });
  }

  /** One page of an app's files, newest or oldest first, optionally filtered by a case-sensitive substring of the name. */
  listFiles(app: AppState, options: { search?: string; dir: Direction; limit: number; offset: number }): { files: FileRecord[]; total: number } {
    const { search, dir, limit, offset } = options;
    if (search) return this.#search.search(app, search, { dir, limit, offset });
    return { files: (this.#pages[dir].all(app.id, limit, offset) as FileRow[]).map(toFile), total: app.fileCount };
  }

  // ---------------------------------------------------------------- uploads

  upload(appId: string, key: string): UploadRow | undefined {
    return this.#s.upload.get(appId, key) as UploadRow | undefined;
  }

  insertUpload(input: { appId: string; key: string; size: number; type: string; now: string; expiresAt: string }): void {
    this.#s.insertUpload.run(input);
  }

  deleteUpload(appId: string, key: string): void {
    this.#s.deleteUpload.run(appId, key);
  }

  /** Unfinished, unexpired uploads of an app: key -> bytes reserved. */
  reservations(appId: string, now: string): Map<string, number> {
    return new Map(this.#s.reservations.all(appId, now) as [string, number][]);
  }

  /** Which of `keys` are unfinished, unexpired uploads of the app. */
  reservedOfKeys(appId: string, keys: readonly string[], now: string): Set<string> {
    return new Set(this.#s.reservedOfKeys.all(JSON.stringify(keys), appId, now) as string[]);
  }

  /** Marks up to `limit` expired reservations as being reaped and returns them (with those left from an earlier run). */
  claimExpired(now: string, limit: number): { app_id: string; key: string }[] {
    return this.transaction(() => {
      const rows = this.#s.expiredUploads.all(now, limit) as { app_id: string; key: string }[];
      for (const r of rows) this.#s.markReaping.run(r.app_id, r.key);
      return rows;
    });
  }

  deleteUploads(appId: string, keys: readonly string[]): void {
    this.transaction(() => {
      for (const key of keys) this.#s.deleteUpload.run(appId, key);
    });
  }
}
