/**
 * Loading better-sqlite3's native addon inside the single executable. Node's SEA `require`
 * sees builtins only and better-sqlite3's own loader cannot find its file there, so the
 * addon travels as an asset: written once to a cache folder (temp file + rename), checked by
 * sha256 on later starts, loaded with `process.dlopen`. Outside the binary this does nothing
 * and better-sqlite3 loads its prebuilt addon itself.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** The asset name the build gives the addon (build/build.ts). */
export const SQLITE_ASSET = 'better_sqlite3.node';

let cached: object | undefined;

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

export function nativeSqliteBinding(): object | undefined {
  if (cached) return cached;
  const sea = seaModule();
  if (!sea) return undefined;
  const bytes = Buffer.from(sea.getRawAsset(SQLITE_ASSET) as ArrayBuffer);
  const sha = createHash('sha256').update(bytes).digest('hex');
  const file = extract(bytes, sha);
  const mod = { exports: {} as object };
  process.dlopen(mod, file);
  cached = mod.exports;
  return cached;
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
      if (fs.existsSync(file) && createHash('sha256').update(fs.readFileSync(file)).digest('hex') === sha) return file;
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, bytes, { mode: 0o500 });
      fs.renameSync(tmp, file);
      return file;
    } catch (err) {
      problems.push(`${dir}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot extract the SQLite addon to any cache folder (${problems.join('; ')})`);
}
