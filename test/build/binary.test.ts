/**
 * Builds the single executable and runs it from an empty directory with no node_modules:
 * `version` works, `serve` answers /healthz, SIGTERM exits 0; and it loads a plugin built
 * outside the tree from `[plugins] dir`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PLUGIN_CONTRACT } from '../../core/plugin.ts';
import { tempDir } from '../helpers/app.ts';
import { root, serve, wharf } from '../helpers/cli.ts';
import { buildPluginProject } from '../helpers/plugin-project.ts';

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
    // The dashboard's files travel inside the binary: the page, and the script and stylesheet it names.
    const page = await fetch(`${server.url}/`);
    expect(page.status).toBe(200);
    const html = await page.text();
    const assets = [...html.matchAll(/\/assets\/(main-[A-Za-z0-9]+\.(?:js|css))/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(2);
    for (const name of assets) {
      const res = await fetch(`${server.url}/assets/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect((await res.text()).length).toBeGreaterThan(1000);
    }
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(fs.existsSync(path.join(cwd, 'wharf-data/wharf.db'))).toBe(true);
  });
});

describe('the single executable and a plugin built outside the tree', () => {
  let work: string;
  let built: string;
  const env = () => ({ XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' });

  it('writes a plugin project (wharf plugins new) that builds with tsc and esbuild against the wharf-plugin it carries', () => {
    work = tempDir('wharf-plugin-');
    const made = wharf(['plugins', 'new', 'hello'], { bin, cwd: work, env: env() });
    expect(made.stderr).toBe('');
    expect(made.status).toBe(0);
    const project = path.join(work, 'hello');
    // The binary carries the same package the build wrote to dist/wharf-plugin/.
    const sdk = path.join(root, 'dist/wharf-plugin');
    for (const file of ['package.json', 'index.js', 'types/sdk.d.ts', 'types/plugin.d.ts', 'types/api.d.ts']) {
      expect(fs.readFileSync(path.join(project, 'wharf-plugin', file), 'utf8'), file).toBe(fs.readFileSync(path.join(sdk, file), 'utf8'));
    }
    expect(JSON.parse(fs.readFileSync(path.join(sdk, 'package.json'), 'utf8')).wharf).toEqual({ contract: PLUGIN_CONTRACT });
    const result = buildPluginProject(project);
    expect(result.status, result.output).toBe(0);
    built = path.join(project, 'dist/hello.mjs');
    expect(fs.existsSync(built)).toBe(true);
    // Its schemas are the host's: no copy of zod in the bundle.
    expect(fs.readFileSync(built, 'utf8')).not.toMatch(/ZodError|\$ZodType/);
  }, 180_000);

  it('loads it from [plugins] dir: config check, plugins list, its migration, its command and its routes', async () => {
    const cwd = path.join(work, 'site');
    fs.mkdirSync(path.join(cwd, 'plugins'), { recursive: true });
    fs.copyFileSync(built, path.join(cwd, 'plugins/hello.mjs'));
    fs.writeFileSync(path.join(cwd, 'w.toml'), '[plugins]\ndir = "plugins"\n\n[plugins.hello]\ngreeting = "Hi"\n');
    const run = (...args: string[]) => wharf([...args, '--config', 'w.toml'], { bin, cwd, env: env() });

    const check = wharf(['config', 'check', 'w.toml'], { bin, cwd, env: env() });
    expect([check.status, check.stderr]).toEqual([0, '']);
    expect(check.stdout).toMatch(/^w\.toml: ok \(plugins: .*, hello\)\n$/);
    const list = JSON.parse(run('plugins', 'list', '--json').stdout);
    expect(list).toContainEqual({
      name: 'hello',
      enabled: true,
      dependsOn: [],
      description: 'Greets a name and counts the greetings: GET /hello/greet?name=Ada.',
      source: path.join(cwd, 'plugins/hello.mjs'),
    });
    expect(run('migrate', 'status').stdout).toContain('pending  hello/001-create-greetings\n');
    expect(run('hello', 'count', 'Ada')).toMatchObject({ status: 0, stdout: '0\n' });
    expect(run('migrate', 'status').stdout).toMatch(/^applied {2}hello\/001-create-greetings {2}\d{4}-/m);

    const server = await serve(['--config', 'w.toml'], { bin, cwd, env: env() });
    try {
      const greet = await fetch(`${server.url}/hello/greet?name=Ada`);
      expect([greet.status, await greet.json()]).toEqual([200, { message: 'Hi, Ada!', count: 1 }]);
      const posted = await fetch(`${server.url}/hello/greet`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"Ada"}' });
      expect([posted.status, await posted.json()]).toEqual([201, { message: 'Hi, Ada!', count: 2 }]);
      // The plugin's query schema, enforced by the core in the group's envelope.
      const missing = await fetch(`${server.url}/hello/greet`);
      expect([missing.status, await missing.json()]).toEqual([400, { error: 'name is required' }]);
      const long = await fetch(`${server.url}/hello/greet?name=${'x'.repeat(101)}`);
      expect([long.status, await long.json()]).toEqual([400, { error: 'name: Too big: expected string to have <=100 characters' }]);
      const nobody = await fetch(`${server.url}/hello/greet?name=nobody`);
      expect([nobody.status, await nobody.json()]).toEqual([404, { error: 'Nobody is not here' }]);
      const doc = (await (await fetch(`${server.url}/api/openapi.json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths)).toContain('/hello/greet');
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0);
    }
    expect(run('hello', 'count', 'Ada').stdout).toBe('2\n');
  }, 120_000);

  it("refuses the plugin's config problems (schema and validate) and a plugin of another major contract version: one line each, exit 2", () => {
    const cwd = path.join(work, 'refusals');
    fs.mkdirSync(path.join(cwd, 'plugins'), { recursive: true });
    fs.copyFileSync(built, path.join(cwd, 'plugins/hello.mjs'));
    const check = (toml: string) => {
      fs.writeFileSync(path.join(cwd, 'w.toml'), toml);
      const r = wharf(['config', 'check', 'w.toml'], { bin, cwd, env: env() });
      return [r.status, r.stderr];
    };
    expect(check('[plugins]\ndir = "plugins"\n[plugins.hello]\nmax_name_length = 0\n')).toEqual([
      2,
      'wharf: config error: w.toml:4: "plugins.hello.max_name_length": Too small: expected number to be >=1\n',
    ]);
    expect(check('[plugins]\ndir = "plugins"\n[plugins.hello]\nmin_name_length = 7\nmax_name_length = 5\n')).toEqual([
      2,
      'wharf: config error: w.toml:4: "plugins.hello.min_name_length": must not be above max_name_length (5)\n',
    ]);

    // The same plugin as built against a wharf-plugin of the next major contract version.
    const next = `${Number(PLUGIN_CONTRACT.split('.')[0]) + 1}.0`;
    const source = fs.readFileSync(built, 'utf8');
    expect(source).toContain(`PLUGIN_CONTRACT = "${PLUGIN_CONTRACT}"`);
    fs.writeFileSync(path.join(cwd, 'plugins/hello.mjs'), source.replace(`PLUGIN_CONTRACT = "${PLUGIN_CONTRACT}"`, `PLUGIN_CONTRACT = "${next}"`));
    expect(check('[plugins]\ndir = "plugins"\n')).toEqual([
      2,
      `wharf: config error: ${path.join(cwd, 'plugins/hello.mjs')}: built for plugin contract ${next}, but this wharf provides ${PLUGIN_CONTRACT}: rebuild it against this wharf's wharf-plugin types (wharf plugins new writes them)\n`,
    ]);
  });
});
