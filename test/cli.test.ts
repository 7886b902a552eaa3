import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../core/config.ts';
import { builtinPlugins } from '../plugins/index.ts';
import { tempDir } from './helpers/app.ts';
import { freePort, serve, wharf } from './helpers/cli.ts';

describe('wharf command', () => {
  it('runs on the pinned Node 24 LTS', () => {
    expect(process.versions.node).toBe('24.21.0');
  });

  it('prints versions and help without starting or creating anything', () => {
    const cwd = tempDir();
    const v = wharf(['version'], { cwd });
    expect(v.status).toBe(0);
    expect(v.stdout).toMatch(/^wharf \d+\.\d+\.\d+\nnode 24\.21\.0\nsqlite 3\.\d+\.\d+\n$/);
    const json = JSON.parse(wharf(['version', '--json'], { cwd }).stdout);
    expect(json).toEqual({ wharf: expect.any(String), node: '24.21.0', sqlite: expect.stringMatching(/^3\./) });
    const help = wharf(['--help'], { cwd });
    expect(help.status).toBe(0);
    for (const c of ['serve', 'migrate', 'config', 'plugins', 'version']) expect(help.stdout).toContain(`wharf ${c}`);
    expect(fs.readdirSync(cwd)).toEqual([]);
  });

  it('rejects an unknown command with exit code 2', () => {
    const r = wharf(['frobnicate'], { cwd: tempDir() });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^wharf: Unknown argument: frobnicate/);
  });

  it('checks a config file: ok, or one line per problem and exit 2', () => {
    const dir = tempDir();
    const good = path.join(dir, 'good.toml');
    fs.writeFileSync(good, '[server]\nlisten = "127.0.0.1:9999"\n[plugins.example]\nenabled = true\n');
    const ok = wharf(['config', 'check', good]);
    expect(ok.status).toBe(0);
    const enabled = resolveConfig(builtinPlugins, { toml: { text: fs.readFileSync(good, 'utf8'), file: good } }).order.map((p) => p.name);
    expect(enabled).toContain('example');
    expect(ok.stdout).toBe(`good.toml: ok (plugins: ${enabled.join(', ')})\n`);
    const bad = path.join(dir, 'bad.toml');
    fs.writeFileSync(bad, '[server]\nlisten = "127.0.0.1:9999"\n\n[plugins.exampel]\n');
    const r = wharf(['config', 'check', bad]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`wharf: config error: ${bad}:4: unknown plugin "exampel" (built-in plugins: ${builtinPlugins.map((p) => p.name).join(', ')})\n`);
    const missing = wharf(['config', 'check', path.join(dir, 'nope.toml')]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('nope.toml: file not found');
    const env = wharf(['config', 'check', good], { env: { WHARF_LOG__LEVEL: 'loud' } });
    expect(env.status).toBe(2);
    expect(env.stderr).toMatch(/^wharf: config error: WHARF_LOG__LEVEL: "log.level": expected one of/);
  });

  it('lists plugins and shows and applies migrations', () => {
    const dataDir = tempDir();
    const list = JSON.parse(wharf(['plugins', 'list', '--json']).stdout);
    expect(list).toContainEqual(expect.objectContaining({ name: 'example', enabled: false }));
    const env = { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' };
    const pending = wharf(['migrate', 'status', '--data-dir', dataDir], { env }).stdout;
    expect(pending).toContain('pending  example/001-create-visits\n');
    expect(pending).toMatch(/^pending  identity\/001-/);
    expect(wharf(['migrate', 'up', '--data-dir', dataDir], { env }).stdout).toContain('applied example/001-create-visits\n');
    expect(wharf(['migrate', 'up', '--data-dir', dataDir], { env }).stdout).toBe('nothing to apply\n');
    expect(wharf(['migrate', 'status', '--data-dir', dataDir], { env }).stdout).toMatch(/^applied  example\/001-create-visits  \d{4}-/m);
    expect(wharf(['example', 'visits', 'Ada', '--data-dir', dataDir], { env }).stdout).toBe('0\n');
  });

  it('refuses to serve on a bad config without creating the data dir', () => {
    const cwd = tempDir();
    fs.writeFileSync(path.join(cwd, 'w.toml'), '[server]\nlisten = "127.0.0.1:1"\nbogus = true\n');
    const r = wharf(['serve', '--config', 'w.toml'], { cwd });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe('wharf: config error: w.toml:3: unknown key "server.bogus"\n');
    expect(fs.readdirSync(cwd)).toEqual(['w.toml']);
  });

  it('serves on embedded defaults in ./wharf-data, and exits 0 on SIGTERM and SIGINT', async () => {
    const cwd = tempDir();
    const server = await serve([], { cwd, env: { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' } });
    const hello = await fetch(`${server.url}/example/hello?name=Ada`);
    expect(await hello.json()).toEqual({ message: 'Hello, Ada!', visits: 1 });
    expect(fs.statSync(path.join(cwd, 'wharf-data')).mode & 0o777).toBe(0o700);
    expect(fs.existsSync(path.join(cwd, 'wharf-data/wharf.db'))).toBe(true);
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toContain('"msg":"stopped"');
    // The command works on the same data while the server is down, and sees its writes.
    expect(wharf(['example', 'visits', 'Ada'], { cwd, env: { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' } }).stdout).toBe('1\n');
    const again = await serve([], { cwd });
    expect(await again.stop('SIGINT')).toBe(0);
  });

  it('exits 1 with one line when the port is in use', async () => {
    const cwd = tempDir();
    const first = await serve([], { cwd });
    const port = new URL(first.url).port;
    const r = wharf(['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', tempDir()]);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`wharf: cannot listen on 127.0.0.1:${port}: address already in use\n`);
    expect(await first.stop()).toBe(0);
    expect(await freePort()).toBeGreaterThan(0);
  });
});
