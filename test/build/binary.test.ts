/**
 * Builds the single executable and runs it from an empty directory with no node_modules:
 * `version` works, `serve` answers /healthz, SIGTERM exits 0; `licenses` prints the notices it
 * carries; a whatsapp session loads Baileys from the asset the build embedded (and only then);
 * and it loads a plugin built outside the tree from `[plugins] dir`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocketServer } from 'ws';
import { openDatabase } from '../../core/db.ts';
import { PLUGIN_CONTRACT } from '../../core/plugin.ts';
import { BINARY_V8_FLAGS } from '../../build/v8-flags.ts';
import { tempDir } from '../helpers/app.ts';
import { root, serve, wharf } from '../helpers/cli.ts';
import { buildPluginProject } from '../helpers/plugin-project.ts';
import { ensureS3 } from '../helpers/s3.ts';

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

  it("starts with the V8 flags of build/v8-flags.ts (the SEA's execArgv), which bench/objects.ts gives the embedded store too", () => {
    const config = JSON.parse(fs.readFileSync(path.join(root, 'dist/sea-config.json'), 'utf8')) as { execArgv: string[] };
    expect(config.execArgv).toEqual([...BINARY_V8_FLAGS]);
    // A 2 MiB semi-space (idle RSS) and a fixed heap-growing factor (no back-to-back marking under a large upload).
    expect(config.execArgv).toEqual(expect.arrayContaining(['--max-semi-space-size=2', '--heap-growing-percent=200']));
  });

  it('runs its bundle with the V8 code cache the build made from a start (build/sea-main.cjs), even under --cpu-prof', () => {
    const env = { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin', WHARF_DEBUG_CODE_CACHE: '1' };
    const plain = wharf(['version'], { bin, cwd: tempDir('wharf-empty-'), env: { ...env, NODE_OPTIONS: '' } });
    expect([plain.status, plain.stderr]).toEqual([0, 'code cache: used\n']);
    const profiles = tempDir('wharf-prof-');
    const profiled = wharf(['version'], { bin, cwd: profiles, env: { ...env, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profiles}` } });
    expect([profiled.status, profiled.stderr]).toEqual([0, 'code cache: used\n']);
  });

  it('trusts the extracted addon through its stamp only while the file is unchanged: a changed addon is replaced', () => {
    const cwd = tempDir('wharf-empty-');
    const env = { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin', NODE_OPTIONS: '' };
    expect(wharf(['version'], { bin, cwd, env }).status).toBe(0);
    const [dir] = fs.readdirSync(path.join(cache, 'wharf'));
    const file = path.join(cache, 'wharf', dir!, 'better_sqlite3.node');
    const good = fs.readFileSync(file);
    const stamp = JSON.parse(fs.readFileSync(`${file}.stamp`, 'utf8'));
    expect(stamp).toMatchObject({ sha: expect.stringMatching(/^[0-9a-f]{64}$/), size: String(good.length) });
    expect(dir!.endsWith(stamp.sha.slice(0, 16))).toBe(true);
    // Same size, one byte changed, mtime put back: the ctime (and the hash) still tell.
    const before = fs.statSync(file);
    const bad = Buffer.from(good);
    bad[bad.length - 1]! ^= 0xff;
    fs.chmodSync(file, 0o700);
    fs.writeFileSync(file, bad);
    fs.chmodSync(file, 0o500);
    fs.utimesSync(file, before.atime, before.mtime);
    const r = wharf(['version'], { bin, cwd, env });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(fs.readFileSync(file).equals(good)).toBe(true);
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

  it('runs the WAL checkpoints in a worker thread from its embedded bundle: a login reaches the database file, the WAL is gone after SIGTERM', async () => {
    const cwd = tempDir('wharf-ckpt-');
    const env = { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' };
    const made = wharf(['admin', 'create-user', '--email', 'ckpt@example.test', '--password', 'correct horse battery', '--org', 'Ckpt'], { bin, cwd, env });
    expect(made.status, made.stderr).toBe(0);
    // The worker at start instead of under load.
    const server = await serve([], { bin, cwd, env: { ...env, WHARF_DATABASE__CHECKPOINT_WORKER_COMMITS: '0' } });
    const db = path.join(cwd, 'wharf-data/wharf.db');
    try {
      await vi.waitFor(() => expect(server.output()).toContain('the WAL checkpoints of the database run in a worker thread from now on'), { timeout: 20_000 });
      const login = await fetch(`${server.url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: server.url },
        body: JSON.stringify({ email: 'ckpt@example.test', password: 'correct horse battery' }),
      });
      expect(login.status).toBe(200);
      // The server's connection checkpoints nothing itself (wal_autocheckpoint 0): the database
      // file alone, without its WAL, holds the new login session once the worker has copied it.
      await vi.waitFor(
        () => {
          const copy = path.join(tempDir('wharf-ckpt-copy-'), 'copy.db');
          fs.copyFileSync(db, copy);
          const alone = openDatabase(copy, { mustExist: true });
          try {
            expect(alone.prepare('SELECT count(*) FROM identity_login_sessions').pluck().get()).toBe(1);
          } finally {
            alone.close();
          }
        },
        { timeout: 20_000, interval: 100 },
      );
      expect(server.output()).not.toContain('run on the event loop again');
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0);
    }
    // The worker's last checkpoint, then the connection's close: no WAL left.
    expect(fs.existsSync(`${db}-wal`)).toBe(false);
  });
});

describe('the single executable and the packages it loads on first use (core/lazy-packages.ts)', () => {
  const env = () => ({ XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' });
  /** A user, a server on `toml`, and a signed-in cookie; `fn` runs against them, then the server stops. */
  async function withServer(toml: string, extra: Record<string, string>, fn: (url: string, headers: Record<string, string>) => Promise<void>) {
    const cwd = tempDir('wharf-lazy-');
    fs.writeFileSync(path.join(cwd, 'w.toml'), toml);
    const made = wharf(['admin', 'create-user', '--email', 'lazy@example.test', '--password', 'correct horse battery', '--org', 'Lazy', '--config', 'w.toml'], {
      bin,
      cwd,
      env: env(),
    });
    expect(made.status, made.stderr).toBe(0);
    const srv = await serve(['--config', 'w.toml'], { bin, cwd, env: { ...env(), ...extra } });
    try {
      const json = { 'content-type': 'application/json', origin: srv.url };
      const login = await fetch(`${srv.url}/auth/login`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ email: 'lazy@example.test', password: 'correct horse battery' }),
      });
      expect(login.status).toBe(200);
      await fn(srv.url, { ...json, cookie: login.headers.getSetCookie()[0]!.split(';')[0]! });
    } finally {
      expect(await srv.stop('SIGTERM')).toBe(0);
    }
  }
  const post = async (url: string, headers: Record<string, string>, body: unknown) => {
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await res.text();
    expect(res.status, text).toBeLessThan(300);
    return JSON.parse(text);
  };

  it("delivers a webhook (undici) and accepts a presigned PUT on the embedded endpoint (smithy's signer)", async () => {
    const arrived: string[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        arrived.push(body);
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const toml = '[plugins.identity]\nscrypt_cost = 1024\n[plugins.webhooks]\nallow_private_networks = true\n';
    try {
      await withServer(toml, { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' }, async (url, headers) => {
        const pat = (await post(`${url}/api/personal-access-tokens`, headers, { name: 'lazy' })).data.token as string;
        const bearer = { 'content-type': 'application/json', authorization: `Bearer ${pat}` };
        const session = (
          await post(`${url}/api/sandbox-sessions`, bearer, {
            name: 'lazy',
            webhook_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
            webhook_enabled: true,
            webhook_events: ['messages.received'],
          })
        ).data as { api_key: string };
        await post(
          `${url}/api/sandbox/receive`,
          { 'content-type': 'application/json', authorization: `Bearer ${session.api_key}` },
          { from: '+14155550100', text: 'lazy hello' },
        );
        await expect.poll(() => arrived.some((body) => body.includes('lazy hello'))).toBe(true);

        const app = await post(`${url}/api/apps`, headers, { name: 'lazy' });
        const appId = (app.data ?? app).id as string;
        const upload = await post(`${url}/api/files/upload`, headers, { appId, files: [{ name: 'a.txt', size: 5, type: 'text/plain' }] });
        const put = await fetch(upload.uploads[0].presignedUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hello' });
        expect(put.status, await put.text()).toBe(200);
      });
    } finally {
      await new Promise((resolve) => receiver.close(resolve));
    }
  }, 90_000);

  it('creates an app on the s3 driver (the AWS SDK)', async () => {
    const target = await ensureS3();
    const prefix = `lazy${Date.now().toString(36)}-`;
    const toml = [
      '[plugins.identity]',
      'scrypt_cost = 1024',
      '[plugins.storage]',
      'driver = "s3"',
      `bucket_prefix = "${prefix}"`,
      '[plugins.storage.s3]',
      `endpoint = "${target.endpoint}"`,
      `region = "${target.region}"`,
      `access_key = "${target.accessKeyId}"`,
      `secret_key = "${target.secretAccessKey}"`,
      '',
    ].join('\n');
    await withServer(toml, {}, async (url, headers) => {
      const app = await post(`${url}/api/apps`, headers, { name: 'lazy' });
      const created = (app.data ?? app) as { id: string; bucketName: string };
      expect(created.bucketName.startsWith(prefix)).toBe(true);
      const ready = await fetch(`${url}/readyz`);
      expect(((await ready.json()) as { checks: Record<string, boolean> }).checks).toMatchObject({ storage: true });
      const gone = await fetch(`${url}/api/apps`, { method: 'DELETE', headers, body: JSON.stringify({ appId: created.id }) });
      expect(gone.status, await gone.text()).toBeLessThan(300);
    });
  }, 90_000);
});

describe('the single executable and the WhatsApp network', () => {
  it('prints the third-party notices: the GPL-3.0 terms (libsignal), every bundled package with its licence text', () => {
    const r = wharf(['licenses'], { bin, cwd: tempDir('wharf-empty-'), env: { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' } });
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toMatch(/^Wharf \d+\.\d+\.\d+: third-party notices\n/);
    expect(r.stdout).toContain("Wharf's own source code is licensed under the MIT License");
    expect(r.stdout).toContain('Because it includes libsignal 6.0.0 (GPL-3.0), this executable as a');
    expect(r.stdout).toContain('GNU General Public License version 3');
    for (const name of [
      'baileys 7.0.0-rc14 (MIT)',
      'libsignal 6.0.0 (GPL-3.0)',
      'whatsapp-rust-bridge 0.5.4 (MIT)',
      'koa 3.3.0 (MIT)',
      'better-sqlite3 13.2.0 (MIT)',
    ]) {
      expect(r.stdout).toContain(`  ${name}\n`);
    }
    // The licence texts themselves, GPL-3.0's included.
    expect(r.stdout).toContain('GNU GENERAL PUBLIC LICENSE');
    expect(r.stdout).toBe(fs.readFileSync(path.join(root, 'dist/THIRD-PARTY-NOTICES.txt'), 'utf8'));
    expect(r.stdout).toContain('  preact ');
    // A reader that quits early (| head) ends it quietly.
    const piped = spawnSync('sh', ['-c', `"${bin}" licenses | head -1`], { env: { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' }, encoding: 'utf8' });
    expect([piped.stdout, piped.stderr]).toEqual([`${r.stdout.split('\n')[0]}\n`, '']);
  });

  it('loads Baileys from its embedded asset when a whatsapp session connects, and reports the closes of a server that refuses it', async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    const hellos: Buffer[] = [];
    server.on('connection', (socket) =>
      socket.once('message', (data) => {
        hellos.push(Buffer.from(data as Buffer));
        socket.close();
      }),
    );
    await new Promise((resolve) => server.once('listening', resolve));
    const cwd = tempDir('wharf-wa-');
    const env = { XDG_CACHE_HOME: cache, PATH: '/usr/bin:/bin' };
    fs.writeFileSync(
      path.join(cwd, 'w.toml'),
      `[plugins.sessions.whatsapp]\nwebsocket_url = "ws://127.0.0.1:${(server.address() as AddressInfo).port}/ws/chat"\nconnect_timeout_ms = 5000\nreconnect_initial_delay_ms = 200\n`,
    );
    const made = wharf(['admin', 'create-user', '--email', 'wa@example.test', '--password', 'correct horse battery', '--org', 'WA', '--config', 'w.toml'], {
      bin,
      cwd,
      env,
    });
    expect(made.status, made.stderr).toBe(0);
    const srv = await serve(['--config', 'w.toml'], { bin, cwd, env });
    try {
      const headers = { 'content-type': 'application/json', origin: srv.url };
      const login = await fetch(`${srv.url}/auth/login`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ email: 'wa@example.test', password: 'correct horse battery' }),
      });
      const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
      const created = await fetch(`${srv.url}/api/whatsapp-sessions`, {
        method: 'POST',
        headers: { ...headers, cookie },
        body: JSON.stringify({ name: 'Binary', phone_number: '+14155550123', account_protection: false, log_messages: true }),
      });
      const { id } = ((await created.json()) as { data: { id: number } }).data;
      const connect = await fetch(`${srv.url}/api/whatsapp-sessions/${id}/connect`, { method: 'POST', headers: { ...headers, cookie }, body: '{}' });
      // The first attempt fails: the answer is the state at once, with the close's reason.
      expect(connect.status).toBe(200);
      expect(((await connect.json()) as { data: unknown }).data).toEqual({
        status: 'connecting',
        message: expect.stringMatching(/^connection closed \(428\): Connection Terminated; next attempt in [\d.]+ s \(attempt 2 of 3\)$/),
      });
      // Baileys, from the asset, spoke WhatsApp's protocol header.
      expect(hellos.length).toBeGreaterThanOrEqual(1);
      expect(hellos[0]!.subarray(0, 2).toString()).toBe('WA');
    } finally {
      expect(await srv.stop('SIGTERM')).toBe(0);
      await new Promise((resolve) => server.close(resolve));
    }
  }, 60_000);
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
