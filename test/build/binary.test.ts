/**
 * Builds the single executable and runs it from an empty directory with no node_modules:
 * `version` works, `serve` answers /healthz, SIGTERM exits 0.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/app.ts';
import { root, serve, wharf } from '../helpers/cli.ts';

let bin: string;
let cache: string;

beforeAll(() => {
  execFileSync(process.execPath, [path.join(root, 'build/build.ts')], { cwd: root, stdio: 'pipe', timeout: 180_000 });
  const dir = tempDir('wharf-bin-');
  bin = path.join(dir, 'wharf');
  fs.copyFileSync(path.join(root, 'dist/wharf'), bin);
  fs.chmodSync(bin, 0o755);
  cache = tempDir('wharf-cache-');
}, 240_000);

describe('the single executable', () => {
  it('prints its versions from an empty directory, extracting the SQLite addon once', () => {
    const cwd = tempDir('wharf-empty-');
    const env = { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin', NODE_OPTIONS: '' };
    const r = wharf(['version'], { bin, cwd, env });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^wharf \d+\.\d+\.\d+\nnode 24\.21\.0\nsqlite 3\.\d+\.\d+\n$/);
    expect(fs.readdirSync(cwd)).toEqual([]);
    const extracted = fs.readdirSync(path.join(cache, 'wharf'));
    expect(extracted).toHaveLength(1);
    expect(fs.existsSync(path.join(cache, 'wharf', extracted[0]!, 'better_sqlite3.node'))).toBe(true);
    // A second start reuses the extracted file.
    expect(wharf(['version'], { bin, cwd, env }).status).toBe(0);
    expect(fs.readdirSync(path.join(cache, 'wharf'))).toEqual(extracted);
  });

  it('serves /healthz on embedded defaults and exits 0 on SIGTERM', async () => {
    const cwd = tempDir('wharf-empty-');
    const server = await serve([], { bin, cwd, env: { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' } });
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
    // On embedded defaults every part is ready, file storage on the embedded object store included.
    const ready = await fetch(`${server.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { checks: Record<string, boolean> }).checks).toMatchObject({ database: true, storage: true });
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(fs.existsSync(path.join(cwd, 'wharf-data/wharf.db'))).toBe(true);
  });
});
