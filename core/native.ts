/**
 * Loading better-sqlite3's native addon inside the single executable. Node's SEA `require`
 * sees builtins only and better-sqlite3's own loader cannot find its file there, so the
 * addon travels as an asset: written once to a cache folder (temp file + rename), loaded with
 * `process.dlopen`. The build stores the addon's sha256 as a second asset, so a start does not
 * hash the 2 MB asset; the extracted file is hashed once and then trusted through a stamp file
 * recording its inode, size, mtime and ctime (which no write can keep), and only while the file
 * and its folder belong to this user and nobody else may write them: a changed binary names
 * another folder (its sha), a changed file no longer matches its stamp and is hashed again.
 * Outside the binary this does nothing and better-sqlite3 loads its prebuilt addon itself.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';

/** The asset name the build gives the addon (build/build.ts). */
export const SQLITE_ASSET = 'better_sqlite3.node';
/** The asset holding the addon's sha256 (hex), written by the build. */
export const SQLITE_SHA_ASSET = 'better_sqlite3.node.sha256';

let cached: object | undefined;
let cachedFile: string | undefined;

/** `node:sea` when running as the single executable, else undefined. */
export function seaModule(): typeof import('node:sea') | undefined {
  try {
    // node:sea exists on Node 20+; under vitest or plain node, isSea() is false.
    const sea = createRequire(process.execPath)('node:sea') as typeof import('node:sea');
    return sea.isSea() ? sea : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Evaluates a CommonJS bundle the executable carries as an asset (the WhatsApp runtime, the
 * packages loaded on first use) and returns its exports. Such a bundle requires Node's built-in
 * modules only; the require given to it resolves them inside the executable.
 */
export function evaluateBundle(code: string, name: string): unknown {
  const filename = path.join(path.dirname(process.execPath), name);
  const module = { exports: {} as unknown };
  const wrapper = vm.compileFunction(code, ['exports', 'require', 'module', '__filename', '__dirname'], { filename });
  wrapper(module.exports, createRequire(process.execPath), module, filename, path.dirname(filename));
  return module.exports;
}

export function nativeSqliteBinding(): object | undefined {
  if (cached) return cached;
  const sea = seaModule();
  if (!sea) return undefined;
  const bytes = Buffer.from(sea.getRawAsset(SQLITE_ASSET) as ArrayBuffer);
  let sha: string;
  try {
    sha = (sea.getAsset(SQLITE_SHA_ASSET, 'utf8') as string).trim();
  } catch {
    sha = sha256(bytes); // a binary built before the sha asset
  }
  const file = extract(bytes, sha);
  const mod = { exports: {} as object };
  process.dlopen(mod, file);
  cached = mod.exports;
  cachedFile = file;
  return cached;
}

/** The file `nativeSqliteBinding` loaded the addon from (for a worker thread to load the same one); undefined outside the executable. */
export function nativeSqliteFile(): string | undefined {
  nativeSqliteBinding();
  return cachedFile;
}

function cacheDirs(sha: string): string[] {
  const leaf = path.join('wharf', `${process.platform}-${process.arch}-${sha.slice(0, 16)}`);
  const dirs: string[] = [];
  if (process.env.XDG_CACHE_HOME) dirs.push(path.join(process.env.XDG_CACHE_HOME, leaf));
  const home = os.homedir();
  if (home) dirs.push(path.join(home, '.cache', leaf));
  dirs.push(path.join(os.tmpdir(), `wharf-${process.getuid?.() ?? 'u'}`, leaf));
  return dirs;
}

function extract(bytes: Buffer, sha: string): string {
  const problems: string[] = [];
  for (const dir of cacheDirs(sha)) {
    const file = path.join(dir, SQLITE_ASSET);
    try {
      if (fs.existsSync(file)) {
        if (stamped(dir, file, sha)) return file;
        if (sha256(fs.readFileSync(file)) === sha) {
          stamp(dir, file, sha);
          return file;
        }
      }
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, bytes, { mode: 0o500 });
      fs.renameSync(tmp, file);
      stamp(dir, file, sha);
      return file;
    } catch (err) {
      problems.push(`${dir}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot extract the SQLite addon to any cache folder (${problems.join('; ')})`);
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** What identifies the file's current content without reading it (ctime changes on any write). */
function identity(sha: string, st: fs.BigIntStats): string {
  return JSON.stringify({ sha, dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtime: String(st.mtimeNs), ctime: String(st.ctimeNs) });
}

/** Ours alone: owned by this user, writable by nobody else. */
function ownedPrivately(st: fs.BigIntStats): boolean {
  const uid = process.getuid?.();
  return (uid === undefined || Number(st.uid) === uid) && (Number(st.mode) & 0o022) === 0;
}

/** True when the file is the one hashed and stamped before, unchanged since. */
function stamped(dir: string, file: string, sha: string): boolean {
  try {
    const st = fs.lstatSync(file, { bigint: true });
    if (!st.isFile() || !ownedPrivately(st) || !ownedPrivately(fs.lstatSync(dir, { bigint: true }))) return false;
    return fs.readFileSync(path.join(dir, STAMP), 'utf8') === identity(sha, st);
  } catch {
    return false;
  }
}

function stamp(dir: string, file: string, sha: string): void {
  try {
    const tmp = path.join(dir, `${STAMP}.${process.pid}.tmp`);
    fs.writeFileSync(tmp, identity(sha, fs.lstatSync(file, { bigint: true })), { mode: 0o600 });
    fs.renameSync(tmp, path.join(dir, STAMP));
  } catch {
    // Without a stamp the next start hashes the file again.
  }
}

const STAMP = `${SQLITE_ASSET}.stamp`;
