/**
 * The storage plugin's SQL: apps, file records, upload reservations, on either engine (the data
 * layer). The SQL is the same on both but for a few statements: new rows' numbers (SQLite gives
 * each app a range of file numbers for its full-text index; PostgreSQL takes them from identity
 * columns) and lists of keys (json_each on SQLite, an array on PostgreSQL).
 */
import type { Db } from '../../core/db.ts';
import { type Direction, FILE_COLUMNS, type FileRow, orderBy, toFile } from './file-rows.ts';
import { searchFiles } from './store-search.ts';
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
const pageSql = (dir: Direction) =>
  `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.seq IN (
     SELECT f.seq FROM storage_files f WHERE f.app_id = ? ${orderBy(dir)} LIMIT ? OFFSET ?
   ) ${orderBy(dir)}`;
const PAGE_SQL: Record<Direction, string> = { asc: pageSql('asc'), desc: pageSql('desc') };

const APP = 'SELECT * FROM storage_apps WHERE id = ? AND deleting = 0';
const APP_IN_ORG = 'SELECT * FROM storage_apps WHERE id = ? AND org_id = ? AND deleting = 0';
const DELETE_FILE_BY_KEY = 'DELETE FROM storage_files WHERE app_id = ? AND key = ?';
const DELETE_UPLOAD = 'DELETE FROM storage_uploads WHERE app_id = ? AND key = ?';
const FILE_COLUMNS_RETURNED = 'RETURNING id, app_id, key, name, size, type, uploaded_at';

/** One reservation of phase 1. */
export interface UploadInput {
  key: string;
  size: number;
  type: string;
}

/** The statements that differ between the engines. */
const ENGINE_SQL = {
  sqlite: {
    insertApp: `INSERT INTO storage_apps (id, seq, org_id, name, bucket_name, storage_limit, created_at, updated_at)
       VALUES (@id, (SELECT coalesce(max(seq), 0) + 1 FROM storage_apps), @orgId, @name, @bucketName, @storageLimit, @now, @now)`,
    // The file's number in its app's range of the full-text index (next_file: the triggers).
    upsertFile: `INSERT INTO storage_files (seq, id, app_id, key, name, size, type, uploaded_at)
       VALUES ((SELECT seq * 4294967296 + next_file FROM storage_apps WHERE id = @appId), @id, @appId, @key, @name, @size, @type, @now)
       ON CONFLICT (app_id, key) DO UPDATE SET name = excluded.name, size = excluded.size, type = excluded.type, uploaded_at = excluded.uploaded_at
       ${FILE_COLUMNS_RETURNED}`,
    // One look-up for a page of listed keys (json_each: the keys as one JSON array).
    filesOfKeys: 'SELECT f.key, f.size FROM json_each(@keys) j JOIN storage_files f ON f.app_id = @appId AND f.key = j.value',
    reservedOfKeys:
      "SELECT u.key FROM json_each(@keys) j JOIN storage_uploads u ON u.app_id = @appId AND u.key = j.value WHERE u.state = 'pending' AND u.expires_at > @now",
    keys: (keys: readonly string[]): unknown => JSON.stringify(keys),
    // The reservations of one phase 1 as one statement over a JSON array of [key, size, type].
    insertUploads: `INSERT INTO storage_uploads (app_id, key, size, type, state, created_at, expires_at)
       SELECT @appId, j.value ->> 0, j.value ->> 1, j.value ->> 2, 'pending', @now, @expiresAt FROM json_each(@rows) j`,
    uploadRows: (files: readonly UploadInput[]): Record<string, unknown> => ({ rows: JSON.stringify(files.map((f) => [f.key, f.size, f.type])) }),
  },
  postgres: {
    // Numbers from identity columns: concurrent instances never compute the same one.
    insertApp: `INSERT INTO storage_apps (id, org_id, name, bucket_name, storage_limit, created_at, updated_at)
       VALUES (@id, @orgId, @name, @bucketName, @storageLimit, @now, @now)`,
    upsertFile: `INSERT INTO storage_files (id, app_id, key, name, size, type, uploaded_at)
       VALUES (@id, @appId, @key, @name, @size, @type, @now)
       ON CONFLICT (app_id, key) DO UPDATE SET name = excluded.name, size = excluded.size, type = excluded.type, uploaded_at = excluded.uploaded_at
       ${FILE_COLUMNS_RETURNED}`,
    filesOfKeys: 'SELECT f.key, f.size FROM storage_files f WHERE f.app_id = @appId AND f.key = ANY(@keys::text[])',
    reservedOfKeys:
      "SELECT u.key FROM storage_uploads u WHERE u.app_id = @appId AND u.key = ANY(@keys::text[]) AND u.state = 'pending' AND u.expires_at > @now",
    keys: (keys: readonly string[]): unknown => keys,
    insertUploads: `INSERT INTO storage_uploads (app_id, key, size, type, state, created_at, expires_at)
       SELECT @appId, u.key, u.size, u.type, 'pending', @now, @expiresAt FROM unnest(@keys::text[], @sizes::bigint[], @types::text[]) AS u(key, size, type)`,
    uploadRows: (files: readonly UploadInput[]): Record<string, unknown> => ({
      keys: files.map((f) => f.key),
      sizes: files.map((f) => f.size),
      types: files.map((f) => f.type),
    }),
  },
};

/**
 * The storage plugin's records on the data layer. A store made inside a transaction
 * (`transaction(fn)` hands one to `fn`) runs every query in it.
 */
export class StorageStore {
  readonly #db: Db;
  readonly #sql: (typeof ENGINE_SQL)['sqlite'];

  constructor(db: Db) {
    this.#db = db;
    this.#sql = ENGINE_SQL[db.engine];
  }

  /**
   * Runs `fn` in a transaction with a store bound to it. Keep it short: on SQLite the process's
   * other queries wait for it; on PostgreSQL `fn` may run again (a serialization failure), so it
   * has no effects outside the database.
   */
  transaction<T>(fn: (store: StorageStore) => Promise<T>): Promise<T> {
    return this.#db.transaction((tx) => fn(new StorageStore(tx)));
  }

  /** The data layer this store runs on (a transaction's, inside one): for what other plugins do in the same transaction. */
  get db(): Db {
    return this.#db;
  }

  // ---------------------------------------------------------------- apps

  async app(id: string): Promise<AppState | undefined> {
    const row = await this.#db.one<AppRow>(APP, [id]);
    return row && toApp(row);
  }

  async appInOrg(id: string, orgId: string): Promise<AppState | undefined> {
    const row = await this.#db.one<AppRow>(APP_IN_ORG, [id, orgId]);
    return row && toApp(row);
  }

  async appsOfOrg(orgId: string): Promise<AppState[]> {
    return (await this.#db.all<AppRow>('SELECT * FROM storage_apps WHERE org_id = ? AND deleting = 0 ORDER BY created_at DESC, id DESC', [orgId])).map(toApp);
  }

  /** The bucket of an app even while it is being deleted (for the reaper). */
  bucketOf(id: string): Promise<string | undefined> {
    return this.#db.value<string>('SELECT bucket_name FROM storage_apps WHERE id = ?', [id]);
  }

  /** The app owning a bucket (even while it is being deleted) and its limit. */
  async appOfBucket(bucket: string): Promise<{ id: string; storageLimit: number | null } | undefined> {
    const row = await this.#db.one<{ id: string; storage_limit: number | null }>('SELECT id, storage_limit FROM storage_apps WHERE bucket_name = ?', [bucket]);
    return row && { id: row.id, storageLimit: row.storage_limit };
  }

  /** Every app not being deleted, with its bucket (for the reconciliation). */
  async liveApps(): Promise<{ id: string; bucketName: string }[]> {
    const rows = await this.#db.all<{ id: string; bucket_name: string }>('SELECT id, bucket_name FROM storage_apps WHERE deleting = 0 ORDER BY seq');
    return rows.map((r) => ({ id: r.id, bucketName: r.bucket_name }));
  }

  /** Stores what a reconciliation found besides the records. */
  async setUnregistered(id: string, measured: { bytes: number; count: number; checkedAt: string }): Promise<void> {
    await this.#db.run('UPDATE storage_apps SET unregistered_bytes = @bytes, unregistered_count = @count, usage_checked_at = @checkedAt WHERE id = @id', {
      id,
      ...measured,
    });
  }

  /** Objects counted unregistered that have just been recorded. */
  async lessUnregistered(id: string, bytes: number, count: number): Promise<void> {
    await this.#db.run(
      `UPDATE storage_apps SET
         unregistered_bytes = CASE WHEN unregistered_bytes > @bytes THEN unregistered_bytes - @bytes ELSE 0 END,
         unregistered_count = CASE WHEN unregistered_count > @count THEN unregistered_count - @count ELSE 0 END
       WHERE id = @id`,
      { id, bytes, count },
    );
  }

  async insertApp(input: { id: string; orgId: string; name: string; bucketName: string; storageLimit: number | null; now: string }): Promise<AppState> {
    await this.#db.run(this.#sql.insertApp, input);
    return toApp((await this.#db.one<AppRow>('SELECT * FROM storage_apps WHERE id = ?', [input.id]))!);
  }

  async updateApp(input: { id: string; name: string; storageLimit: number | null; now: string }): Promise<AppState | undefined> {
    await this.#db.run('UPDATE storage_apps SET name = @name, storage_limit = @storageLimit, updated_at = @now WHERE id = @id AND deleting = 0', input);
    return this.app(input.id);
  }

  /** Marks an app as being deleted; false when it is missing or already being deleted. */
  async markDeleting(id: string, orgId: string): Promise<boolean> {
    const { changes } = await this.#db.run('UPDATE storage_apps SET deleting = 1 WHERE id = ? AND org_id = ? AND deleting = 0', [id, orgId]);
    return changes === 1;
  }

  async unmarkDeleting(id: string): Promise<void> {
    await this.#db.run('UPDATE storage_apps SET deleting = 0 WHERE id = ?', [id]);
  }

  /** Deletes the app row; its files and uploads go with it (foreign keys). */
  async deleteApp(id: string): Promise<void> {
    await this.#db.run('DELETE FROM storage_apps WHERE id = ?', [id]);
  }

  // ---------------------------------------------------------------- files

  async upsertFile(input: { id: string; appId: string; key: string; name: string; size: number; type: string; now: string }): Promise<FileRecord> {
    return toFile((await this.#db.one<FileRow>(this.#sql.upsertFile, input))!);
  }

  async fileInOrg(id: string, orgId: string): Promise<FileRecord | undefined> {
    const row = await this.#db.one<FileRow>(
      `SELECT ${FILE_COLUMNS} FROM storage_files f JOIN storage_apps a ON a.id = f.app_id
       WHERE f.id = ? AND a.org_id = ? AND a.deleting = 0`,
      [id, orgId],
    );
    return row && toFile(row);
  }

  async hasFileKey(appId: string, key: string): Promise<boolean> {
    return (await this.#db.value('SELECT 1 FROM storage_files WHERE app_id = ? AND key = ?', [appId, key])) !== undefined;
  }

  /** The recorded size of a key, or undefined when it has no record. */
  fileSize(appId: string, key: string): Promise<number | undefined> {
    return this.#db.value<number>('SELECT size FROM storage_files WHERE app_id = ? AND key = ?', [appId, key]);
  }

  /** Records follow their objects: a new size replaces the recorded one, a removed object takes its record. */
  async followObjects(appId: string, changes: readonly SizeChange[]): Promise<void> {
    // Most writes touch no record (uploads not registered yet): a read each, and no transaction.
    const due: SizeChange[] = [];
    for (const c of changes) {
      const recorded = await this.fileSize(appId, c.key);
      if (recorded !== undefined && recorded !== c.size) due.push(c);
    }
    if (!due.length) return;
    await this.#db.transaction(async (tx) => {
      for (const c of due) {
        if (c.size === undefined) await tx.run(DELETE_FILE_BY_KEY, [appId, c.key]);
        else await tx.run('UPDATE storage_files SET size = @size WHERE app_id = @appId AND key = @key AND size != @size', { appId, key: c.key, size: c.size });
      }
    });
  }

  /** Recorded sizes of a page of keys (absent keys have no record). */
  async filesOfKeys(appId: string, keys: readonly string[]): Promise<Map<string, number>> {
    const rows = await this.#db.all<{ key: string; size: number }>(this.#sql.filesOfKeys, { appId, keys: this.#sql.keys(keys) });
    return new Map(rows.map((r) => [r.key, r.size]));
  }

  /** Sets listed sizes on records older than `before`; returns how many changed. */
  correctFileSizes(appId: string, sizes: readonly { key: string; size: number }[], before: string): Promise<number> {
    return this.#db.transaction(async (tx) => {
      let changed = 0;
      for (const { key, size } of sizes) {
        // Not a record written since `before`: it describes a newer object than a listing may have seen.
        const sql = 'UPDATE storage_files SET size = @size WHERE app_id = @appId AND key = @key AND size != @size AND uploaded_at < @before';
        changed += (await tx.run(sql, { appId, key, size, before })).changes;
      }
      return changed;
    });
  }

  async deleteFilesByKeys(appId: string, keys: readonly string[]): Promise<void> {
    await this.#db.transaction(async (tx) => {
      for (const key of keys) await tx.run(DELETE_FILE_BY_KEY, [appId, key]);
    });
  }

  /** One page of an app's files, newest or oldest first, optionally filtered by a case-sensitive substring of the name. */
  async listFiles(app: AppState, options: { search?: string; dir: Direction; limit: number; offset: number }): Promise<{ files: FileRecord[]; total: number }> {
    const { search, dir, limit, offset } = options;
    if (search) return searchFiles(this.#db, app, search, { dir, limit, offset });
    return { files: (await this.#db.all<FileRow>(PAGE_SQL[dir], [app.id, limit, offset])).map(toFile), total: app.fileCount };
  }

  // ---------------------------------------------------------------- uploads

  upload(appId: string, key: string): Promise<UploadRow | undefined> {
    return this.#db.one<UploadRow>('SELECT * FROM storage_uploads WHERE app_id = ? AND key = ?', [appId, key]);
  }

  /**
   * Records the reservations of one phase 1, in the order given, with one statement: 100 of them
   * one statement each were most of phase 1's reservation transaction (BENCHMARKS.md, issue 16).
   * A key already reserved fails the whole statement, as the first duplicate insert would.
   */
  async insertUploads(appId: string, files: readonly UploadInput[], now: string, expiresAt: string): Promise<void> {
    if (files.length === 0) return;
    await this.#db.run(this.#sql.insertUploads, { appId, now, expiresAt, ...this.#sql.uploadRows(files) });
  }

  async deleteUpload(appId: string, key: string): Promise<void> {
    await this.#db.run(DELETE_UPLOAD, [appId, key]);
  }

  /** Unfinished, unexpired uploads of an app: key -> bytes reserved. */
  async reservations(appId: string, now: string): Promise<Map<string, number>> {
    const rows = await this.#db.all<{ key: string; size: number }>(
      "SELECT key, size FROM storage_uploads WHERE app_id = ? AND state = 'pending' AND expires_at > ?",
      [appId, now],
    );
    return new Map(rows.map((r) => [r.key, r.size]));
  }

  /** Which of `keys` are unfinished, unexpired uploads of the app. */
  async reservedOfKeys(appId: string, keys: readonly string[], now: string): Promise<Set<string>> {
    const rows = await this.#db.all<{ key: string }>(this.#sql.reservedOfKeys, { appId, keys: this.#sql.keys(keys), now });
    return new Set(rows.map((r) => r.key));
  }

  /** Marks up to `limit` expired reservations as being reaped and returns them (with those left from an earlier run). */
  claimExpired(now: string, limit: number): Promise<{ app_id: string; key: string }[]> {
    return this.#db.transaction(async (tx) => {
      const rows = await tx.all<{ app_id: string; key: string }>(
        "SELECT app_id, key FROM storage_uploads WHERE expires_at <= ? OR state = 'reaping' ORDER BY expires_at LIMIT ?",
        [now, limit],
      );
      for (const r of rows) await tx.run("UPDATE storage_uploads SET state = 'reaping' WHERE app_id = ? AND key = ?", [r.app_id, r.key]);
      return rows;
    });
  }

  async deleteUploads(appId: string, keys: readonly string[]): Promise<void> {
    await this.#db.transaction(async (tx) => {
      for (const key of keys) await tx.run(DELETE_UPLOAD, [appId, key]);
    });
  }
}
