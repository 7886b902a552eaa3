/**
 * `wharf backup DEST`: a copy of an instance's state, taken while the server runs.
 *
 * - The SQLite database through SQLite's online backup API (better-sqlite3's `db.backup`): a
 *   snapshot of one instant, whatever the server writes meanwhile. Every page is copied in one
 *   step, under one read transaction: in WAL mode that never blocks the server's writers, and a
 *   write by the server cannot restart the copy (it would between steps of a few pages).
 * - The keys directory (signing key, the secret that encrypts stored secrets, the embedded
 *   store's root key): without it the encrypted columns (session API keys, webhook secrets,
 *   bucket keys) cannot be read back.
 * - With `objects`, the embedded `fs` store: its index through the same online backup, then the
 *   blob of every object that snapshot lists. Blobs are immutable (each version is a new file,
 *   renamed into place before its row commits), so copying them after the snapshot is safe; one
 *   removed in between (the object was deleted or overwritten during the backup) is left out
 *   and its row dropped from the copied index, so the copy never lists an object it lacks.
 *
 * Everything is written into a temporary directory beside DEST (files 0600, directories 0700)
 * and renamed to DEST at the end: a failure leaves nothing half-written.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { CoreConfig } from './config.ts';
import { openDatabase, type Database } from './db.ts';

/** Refused or failed: one line for the operator. */
export class BackupError extends Error {
  override name = 'BackupError';
}

export interface BackupOptions {
  dataDir: string;
  database: Pick<CoreConfig['database'], 'engine' | 'path' | 'url'>;
  dest: string;
  /** Replace a DEST that exists and is not empty. */
  force?: boolean;
  /** The embedded store's objects directory, to copy its objects; undefined to leave them out. */
  objectsDir?: string;
}

export interface BackupResult {
  dest: string;
  /** `sqlite`: the bytes of the copied file; `postgres`: not copied, `pgDump` says how. */
  database: { engine: 'sqlite'; bytes: number } | { engine: 'postgres'; pgDump: string };
  keys: { files: number; bytes: number };
  /** Absent when the objects were not asked for. */
  objects?: { objects: number; bytes: number; leftOut: number };
  ms: number;
}

/** `postgres://user:***@host/db`: the URL with its password masked. */
export function maskPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'the configured [database] url';
  }
}

const errorCode = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

/** Checks DEST before anything is copied: a directory that does not exist, or is empty, or --force. */
function checkDest(dest: string, force: boolean): void {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(dest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new BackupError(`cannot write ${dest} (${errorCode(err)})`);
  }
  if (!stat.isDirectory()) throw new BackupError(`${dest} exists and is not a directory`);
  if (!force && fs.readdirSync(dest).length > 0) throw new BackupError(`${dest} exists and is not empty (--force replaces it)`);
}

/** Opens an existing SQLite file, or says there is no `what` there. */
function openExisting(file: string, what: string): Database {
  if (!fs.existsSync(file)) throw new BackupError(`no ${what} at ${file}: is the data dir right?`);
  try {
    return openDatabase(file, { mustExist: true });
  } catch (err) {
    throw new BackupError(`cannot open ${file}: ${(err as Error).message}`);
  }
}

/** The online backup of `source` into `file` (0600); returns its size. */
async function copyDatabase(source: Database, file: string): Promise<number> {
  // better-sqlite3's first step counts the pages; the number returned is the size of the next: all of them.
  await source.backup(file, { progress: () => 2 ** 30 });
  await fsp.chmod(file, 0o600);
  return (await fsp.stat(file)).size;
}

/** Copies a directory tree, files 0600 and directories 0700; skips temporary files of key writes. */
async function copyTree(from: string, to: string): Promise<{ files: number; bytes: number }> {
  await fsp.mkdir(to, { mode: 0o700 });
  let files = 0;
  let bytes = 0;
  for (const entry of await fsp.readdir(from, { withFileTypes: true })) {
    if (entry.name.endsWith('.tmp')) continue;
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      const sub = await copyTree(source, target);
      files += sub.files;
      bytes += sub.bytes;
    } else if (entry.isFile()) {
      await fsp.copyFile(source, target);
      await fsp.chmod(target, 0o600);
      files++;
      bytes += (await fsp.stat(target)).size;
    }
  }
  return { files, bytes };
}

/** The embedded store: its index (online backup), then the blobs that index lists. */
async function copyObjects(objectsDir: string, to: string): Promise<{ objects: number; bytes: number; leftOut: number }> {
  const indexFile = path.join(objectsDir, '.wharf', 'index.db');
  const source = openExisting(indexFile, 'embedded store index');
  const copiedIndex = path.join(to, '.wharf', 'index.db');
  await fsp.mkdir(path.dirname(copiedIndex), { recursive: true, mode: 0o700 });
  try {
    await copyDatabase(source, copiedIndex);
  } finally {
    source.close();
  }
  const index = openDatabase(copiedIndex, { mustExist: true });
  try {
    // Dropped rows must update the usage counters, as the store's own deletes do.
    index.pragma('recursive_triggers = ON');
    for (const { name } of index.prepare('SELECT name FROM buckets').all() as { name: string }[]) {
      await fsp.mkdir(path.join(to, name), { recursive: true, mode: 0o700 });
    }
    const rows = index.prepare('SELECT bucket, key, blob, size FROM objects').all() as { bucket: string; key: string; blob: string; size: number }[];
    const drop = index.prepare('DELETE FROM objects WHERE bucket = ? AND key = ? AND blob = ?');
    let objects = 0;
    let bytes = 0;
    let leftOut = 0;
    for (const row of rows) {
      const target = path.join(to, row.bucket, row.blob);
      await fsp.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
      try {
        await fsp.copyFile(path.join(objectsDir, row.bucket, row.blob), target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        drop.run(row.bucket, row.key, row.blob); // removed since the snapshot
        leftOut++;
        continue;
      }
      await fsp.chmod(target, 0o600);
      objects++;
      bytes += row.size;
    }
    // Unfinished multipart uploads are not copied: their parts live outside the buckets.
    index.exec('DELETE FROM parts; DELETE FROM uploads;');
    return { objects, bytes, leftOut };
  } finally {
    index.close();
  }
}

export async function backup(options: BackupOptions): Promise<BackupResult> {
  const started = performance.now();
  const dest = path.resolve(options.dest);
  checkDest(dest, options.force ?? false);
  const keysDir = path.join(options.dataDir, 'keys');
  const source = options.database.engine === 'sqlite' ? openExisting(options.database.path, 'Wharf database') : undefined;
  if (options.objectsDir && !fs.existsSync(path.join(options.objectsDir, '.wharf', 'index.db'))) {
    source?.close();
    throw new BackupError(`no embedded object store at ${options.objectsDir}`);
  }
  const tmp = path.join(path.dirname(dest), `.${path.basename(dest)}.partial-${process.pid}`);
  try {
    await fsp.mkdir(tmp, { mode: 0o700 });
  } catch (err) {
    source?.close();
    throw new BackupError(`cannot write ${dest} (${errorCode(err)})`);
  }
  try {
    let database: BackupResult['database'];
    if (source) {
      try {
        database = { engine: 'sqlite', bytes: await copyDatabase(source, path.join(tmp, path.basename(options.database.path))) };
      } finally {
        source.close();
      }
    } else {
      database = { engine: 'postgres', pgDump: `pg_dump --format=custom --file=wharf.pgdump '${maskPassword(options.database.url ?? '')}'` };
    }
    const keys = fs.existsSync(keysDir) ? await copyTree(keysDir, path.join(tmp, 'keys')) : { files: 0, bytes: 0 };
    const objects = options.objectsDir ? await copyObjects(options.objectsDir, path.join(tmp, 'objects')) : undefined;
    if (fs.existsSync(dest)) {
      // An empty directory, or one --force replaces: out of the way only once the copy is whole.
      const old = `${tmp}.old`;
      await fsp.rename(dest, old);
      try {
        await fsp.rename(tmp, dest);
      } catch (err) {
        await fsp.rename(old, dest);
        throw err;
      }
      await fsp.rm(old, { recursive: true, force: true });
    } else {
      await fsp.rename(tmp, dest);
    }
    return { dest, database, keys, ...(objects ? { objects } : {}), ms: Math.round(performance.now() - started) };
  } catch (err) {
    await fsp.rm(tmp, { recursive: true, force: true });
    if (err instanceof BackupError) throw err;
    throw new BackupError(`backup to ${dest} failed: ${(err as Error).message}`);
  }
}
