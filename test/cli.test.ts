import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../core/config.ts';
import { PLUGIN_CONTRACT } from '../core/plugin.ts';
import { builtinPlugins } from '../plugins/index.ts';
import { tempDir } from './helpers/app.ts';
import { cleanEnv, freePort, root, serve, wharf } from './helpers/cli.ts';

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

  it('ends quietly when its reader goes (wharf licenses | head -1): exit 0, no EPIPE stack', () => {
    const r = spawnSync('sh', ['-c', `"${process.execPath}" bin/wharf.ts licenses | head -1`], {
      cwd: root,
      env: cleanEnv(),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.stdout).toBe('Wharf 0.1.0: third-party notices\n'.replace('0.1.0', JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it("has a plugin's commands only when the config enables the plugin; --help and --version work on a bad config", () => {
    const cwd = tempDir();
    const help = wharf(['--help'], { cwd });
    expect(help.stdout).toMatch(/\n {2}wharf admin +Users of this server, from its data directory:\s+create\s+one,\s+reset/);
    expect(help.stdout).not.toContain('wharf example');
    const disabled = 'wharf: unknown command example: the example plugin, which adds it, is not enabled (see wharf plugins list)\n';
    expect(wharf(['example', 'visits', 'Ada'], { cwd })).toMatchObject({ status: 2, stdout: '', stderr: disabled });
    expect(wharf(['--help'], { cwd, env: { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' } }).stdout).toMatch(/\n {2}wharf example +Example commands\n/);
    fs.writeFileSync(path.join(cwd, 'on.toml'), '[plugins.example]\nenabled = true\n');
    expect(wharf(['example', '--help', '--config', 'on.toml'], { cwd }).stdout).toContain('wharf example visits <name>');
    fs.writeFileSync(path.join(cwd, 'off.toml'), '[plugins.example]\nenabled = false\n');
    expect(wharf(['example', 'visits', 'Ada', '--config', 'off.toml'], { cwd })).toMatchObject({ status: 2, stderr: disabled });

    // A config that does not load: help still answers (with the plugins enabled by default) and
    // every command that needs the config says why, in one line.
    fs.writeFileSync(path.join(cwd, 'bad.toml'), '[server]\nbogus = true\n[plugins.example]\nenabled = true\n');
    const bad = wharf(['--help', '--config', 'bad.toml'], { cwd });
    expect(bad).toMatchObject({ status: 0, stderr: '' });
    expect(bad.stdout).toContain('wharf serve');
    expect(bad.stdout).toContain('wharf admin');
    expect(bad.stdout).not.toContain('wharf example');
    expect(wharf(['--version', '--config', 'bad.toml'], { cwd })).toMatchObject({
      status: 0,
      stdout: `${JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version}\n`,
    });
    const line = 'wharf: config error: bad.toml:2: unknown key "server.bogus"\n';
    expect(wharf(['example', 'visits', 'Ada', '--config', 'bad.toml'], { cwd })).toMatchObject({ status: 2, stdout: '', stderr: line });
    expect(wharf(['admin', 'create-user', '--email', 'a@example.test', '--password', 'x', '--config', 'bad.toml'], { cwd })).toMatchObject({
      status: 2,
      stderr: line,
    });
    expect(fs.readdirSync(cwd).sort()).toEqual(['bad.toml', 'off.toml', 'on.toml']);
  }, 90_000);

  it('rejects an unknown command with exit code 2', () => {
    const r = wharf(['frobnicate'], { cwd: tempDir() });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^wharf: Unknown argument: frobnicate/);
  });

  it("a client command reads only the core's sections of --config: a plugin section it has no use for (the S3 secret in the server's environment) does not stop it", () => {
    const dir = tempDir();
    const env = { XDG_CONFIG_HOME: path.join(dir, 'config') };
    const server = path.join(dir, 'server.toml');
    fs.writeFileSync(
      server,
      '[server]\npublic_url = "http://files.example.test:8080"\n[plugins.storage.s3]\nendpoint = "http://127.0.0.1:9000"\naccess_key = "k"\n',
    );
    // The server needs the secret; the client, which only wants the address, does not.
    expect(wharf(['config', 'check', server], { env })).toMatchObject({ status: 2, stderr: expect.stringMatching(/secret_key/) });
    const who = wharf(['whoami', '--config', server], { env: { ...env, WHARF_PLUGINS__STORAGE__S3__REGION: '' } });
    expect(who).toMatchObject({
      status: 1,
      stderr: 'wharf: not signed in to http://files.example.test:8080; run wharf login --instance http://files.example.test:8080\n',
    });
    // What it does read is still checked.
    const bad = path.join(dir, 'bad.toml');
    fs.writeFileSync(bad, '[server]\nlisten = "nowhere"\n');
    expect(wharf(['whoami', '--config', bad], { env })).toMatchObject({
      status: 2,
      stderr: expect.stringMatching(/^wharf: config error: .*bad\.toml:2: "server\.listen"/),
    });
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

  it('checks the embedded defaults and the WHARF_* variables when no file is named', () => {
    const cwd = tempDir();
    const enabled = resolveConfig(builtinPlugins, {})
      .order.map((p) => p.name)
      .join(', ');
    expect(wharf(['config', 'check'], { cwd })).toMatchObject({ status: 0, stdout: `embedded defaults: ok (plugins: ${enabled})\n`, stderr: '' });
    const vars = { WHARF_SERVER__LISTEN: '127.0.0.1:9999', WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' };
    const withExample = resolveConfig(builtinPlugins, { env: vars }).order.map((p) => p.name);
    expect(withExample).toContain('example');
    expect(wharf(['config', 'check'], { cwd, env: vars })).toMatchObject({
      status: 0,
      stdout: `embedded defaults + 2 WHARF_* variables: ok (plugins: ${withExample.join(', ')})\n`,
    });
    expect(wharf(['config', 'check'], { cwd, env: { WHARF_SERVER__LISTEN: 'nowhere' } })).toMatchObject({
      status: 2,
      stdout: '',
      stderr: 'wharf: config error: WHARF_SERVER__LISTEN: "server.listen": expected HOST:PORT, for example 127.0.0.1:8080\n',
    });
    expect(wharf(['config', 'check'], { cwd, env: { WHARF_SERVER__BOGUS: '1' } })).toMatchObject({
      status: 2,
      stderr: 'wharf: config error: WHARF_SERVER__BOGUS: unknown key "server.bogus"\n',
    });
    // WHARF_CONFIG (or --config) names the file to check when no FILE is given.
    fs.writeFileSync(path.join(cwd, 'w.toml'), '[server]\nlisten = "127.0.0.1:9999"\n');
    expect(wharf(['config', 'check'], { cwd, env: { WHARF_CONFIG: 'w.toml' } })).toMatchObject({ status: 0, stdout: `w.toml: ok (plugins: ${enabled})\n` });
    expect(wharf(['config', 'check', '--config', 'nope.toml'], { cwd })).toMatchObject({
      status: 2,
      stderr: 'wharf: config error: nope.toml: file not found\n',
    });
    expect(fs.readdirSync(cwd)).toEqual(['w.toml']);
  });

  it('lists plugins and shows and applies migrations', () => {
    const dataDir = tempDir();
    const list = JSON.parse(wharf(['plugins', 'list', '--json']).stdout);
    expect(list).toContainEqual(expect.objectContaining({ name: 'example', enabled: false }));
    const env = { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' };
    const pending = wharf(['migrate', 'status', '--data-dir', dataDir], { env }).stdout;
    expect(pending).toContain('pending  example/001-create-visits\n');
    expect(pending).toMatch(/^pending {2}core\/001_keys_check\npending {2}identity\/001-/);
    expect(wharf(['migrate', 'up', '--data-dir', dataDir], { env }).stdout).toContain('applied example/001-create-visits\n');
    expect(wharf(['migrate', 'up', '--data-dir', dataDir], { env }).stdout).toBe('nothing to apply\n');
    expect(wharf(['migrate', 'status', '--data-dir', dataDir], { env }).stdout).toMatch(/^applied {2}example\/001-create-visits {2}\d{4}-/m);
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
    // The human lines on stderr name both addresses: the server's and the embedded S3 endpoint's.
    expect(server.output()).toMatch(/\nEmbedded S3 endpoint \(the apps' buckets\) listening on http:\/\/127\.0\.0\.1:\d+\n/);
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toContain('"msg":"stopped"');
    // The command works on the same data while the server is down, and sees its writes.
    expect(wharf(['example', 'visits', 'Ada'], { cwd, env: { WHARF_PLUGINS__EXAMPLE__ENABLED: 'true' } }).stdout).toBe('1\n');
    const again = await serve([], { cwd });
    expect(await again.stop('SIGINT')).toBe(0);
  });

  it('npm start stops on a SIGTERM sent to npm (as a supervisor sends it), not only on Ctrl-C to the whole group', async () => {
    const data = tempDir();
    const port = await freePort();
    const env = { ...cleanEnv(), WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' };
    const npm = spawn('npm', ['start', '--', '--listen', `127.0.0.1:${port}`, '--data-dir', data], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    npm.stdout.on('data', (d) => (output += d));
    npm.stderr.on('data', (d) => (output += d));
    const url = `http://127.0.0.1:${port}/healthz`;
    const deadline = Date.now() + 60_000;
    while (
      !(await fetch(url).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (Date.now() > deadline) throw new Error(`npm start did not answer: ${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    npm.kill('SIGTERM');
    await new Promise((r) => npm.once('exit', r));
    await new Promise((r) => setTimeout(r, 500));
    // Nothing is left answering: npm's child was the server itself (exec), not a shell that kept it.
    expect(
      await fetch(url).then(
        (r) => r.status,
        () => 'closed',
      ),
    ).toBe('closed');
    expect(output).toContain('"msg":"stopped"');
  });

  it('exits 1 with one line when the port is in use', async () => {
    const cwd = tempDir();
    const first = await serve([], { cwd });
    const port = new URL(first.url).port;
    // Its embedded S3 endpoint on a free port too: only the HTTP port is in use.
    const r = wharf(['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', tempDir()], { env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' } });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`wharf: cannot listen on 127.0.0.1:${port}: address already in use\n`);
    expect(await first.stop()).toBe(0);
    expect(await freePort()).toBeGreaterThan(0);
  });
});

describe('wharf and plugins outside the binary', () => {
  /** A plugin module as `definePlugin` of wharf-plugin makes it, for contract `contract`. */
  const pluginModule = (name: string, contract = PLUGIN_CONTRACT) =>
    `export default { contract: ${JSON.stringify(contract)}, define: ({ plugin, z }) => plugin({ name: ${JSON.stringify(name)}, description: 'the ${name} plugin', config: z.strictObject({}), setup: () => ({}) }) };\n`;

  it('lists the plugins of [plugins] dir with the file each came from', () => {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, 'plugins'));
    fs.writeFileSync(path.join(dir, 'plugins/extra.mjs'), pluginModule('extra'));
    fs.writeFileSync(path.join(dir, 'w.toml'), '[plugins]\ndir = "plugins"\n');
    const list = wharf(['plugins', 'list', '--config', 'w.toml'], { cwd: dir });
    expect(list.status).toBe(0);
    expect(list.stdout).toContain(`extra        enabled   the extra plugin [${path.join(dir, 'plugins/extra.mjs')}]\n`);
    expect(list.stdout).toMatch(/^identity {5}enabled {3}Users[^[]*$/m);
    const rows = JSON.parse(wharf(['plugins', 'list', '--json'], { cwd: dir, env: { WHARF_PLUGINS__DIR: path.join(dir, 'plugins') } }).stdout);
    expect(rows).toContainEqual(expect.objectContaining({ name: 'extra', enabled: true, source: path.join(dir, 'plugins/extra.mjs') }));
    expect(rows).toContainEqual(expect.objectContaining({ name: 'identity', source: 'built-in' }));
  });

  it('refuses a plugin built for another major contract version: one line, exit 2, for config check and serve alike', () => {
    const [major] = PLUGIN_CONTRACT.split('.');
    const next = `${Number(major) + 1}.0`;
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, 'plugins'));
    fs.writeFileSync(path.join(dir, 'plugins/future.mjs'), pluginModule('future', next));
    fs.writeFileSync(path.join(dir, 'w.toml'), '[plugins]\ndir = "plugins"\n');
    const line = `wharf: config error: ${path.join(dir, 'plugins/future.mjs')}: built for plugin contract ${next}, but this wharf provides ${PLUGIN_CONTRACT}: rebuild it against this wharf's wharf-plugin types (wharf plugins new writes them)\n`;
    const check = wharf(['config', 'check', 'w.toml'], { cwd: dir });
    expect([check.status, check.stderr]).toEqual([2, line]);
    const served = wharf(['serve', '--config', 'w.toml', '--data-dir', 'data'], { cwd: dir });
    expect([served.status, served.stderr]).toEqual([2, line]);
    expect(fs.existsSync(path.join(dir, 'data'))).toBe(false);
    // Commands that do not read the config still work.
    expect(wharf(['version', '--config', 'w.toml'], { cwd: dir }).status).toBe(0);
  });

  it('refuses a config a plugin validate rejects (mode = "oidc" without an issuer) at config check, and serve the same way', () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'w.toml'), '[plugins.identity]\nmode = "oidc"\n\n[plugins.identity.oidc]\nclient_id = "wharf-cli"\n');
    const line =
      'wharf: config error: w.toml:4: "plugins.identity.oidc.issuer": required when mode = "oidc": the URL of the OpenID Connect provider (its discovery document is read from <issuer>/.well-known/openid-configuration)\n';
    const check = wharf(['config', 'check', 'w.toml'], { cwd: dir });
    expect([check.status, check.stderr]).toEqual([2, line]);
    const served = wharf(['serve', '--config', 'w.toml', '--data-dir', 'data'], { cwd: dir });
    expect([served.status, served.stderr]).toEqual([2, line]);
    expect(fs.readdirSync(dir)).toEqual(['w.toml']);
  });

  it('plugins new refuses a bad name, a name taken, and a folder that is not empty', () => {
    const cwd = tempDir();
    expect(wharf(['plugins', 'new', 'Bad-Name'], { cwd })).toMatchObject({
      status: 2,
      stderr: 'wharf: plugin name "Bad-Name": 1 to 40 lowercase letters, digits and underscores, starting with a letter\n',
    });
    expect(wharf(['plugins', 'new', 'storage'], { cwd })).toMatchObject({
      status: 2,
      stderr: 'wharf: plugin name "storage" is taken by a plugin this wharf already has\n',
    });
    fs.mkdirSync(path.join(cwd, 'busy'));
    fs.writeFileSync(path.join(cwd, 'busy/x'), '');
    expect(wharf(['plugins', 'new', 'fine', '--dir', 'busy'], { cwd })).toMatchObject({
      status: 1,
      stderr: `wharf: ${path.join(cwd, 'busy')} exists and is not empty\n`,
    });
    expect(fs.readdirSync(cwd)).toEqual(['busy']);
  });
});

/**
 * What a new user types: `./bin/wharf.ts`, `npx wharf`, or a `wharf` link on PATH, from a shell
 * whose `node` is not the pinned one (Debian's is 20, which cannot parse a .ts file).
 */
describe('the wharf launcher', () => {
  const entry = path.join(root, 'bin/wharf.ts');
  /** The machine's PATH without any node_modules/.bin (npm test and npx add the project's). */
  const systemPath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((d) => d && !d.includes('node_modules'))
    .join(path.delimiter);

  /** A directory whose `node` is an old Node that fails loudly if anyone runs a script with it. */
  function oldNode(): string {
    const dir = tempDir();
    const node = path.join(dir, 'node');
    fs.writeFileSync(node, '#!/bin/sh\n[ "$1" = -v ] && { echo v20.11.1; exit 0; }\necho "old node ran: $*" >&2\nexit 99\n', { mode: 0o755 });
    return dir;
  }

  const run = (cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd = tempDir()) => {
    const r = spawnSync(cmd, args, { cwd, env: { ...cleanEnv(), ...env }, encoding: 'utf8', timeout: 120_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, error: r.error };
  };

  it('is tracked executable, so npx (which chmods bins) leaves the tree unchanged', () => {
    const staged = spawnSync('git', ['ls-files', '-s', 'bin/wharf.ts'], { cwd: root, encoding: 'utf8' }).stdout;
    expect(staged).toMatch(/^100755 /);
    expect(fs.statSync(entry).mode & 0o111).toBe(0o111);
    expect(JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).bin).toEqual({ wharf: 'bin/wharf.ts' });
  });

  it('./bin/wharf.ts runs on the pinned Node 24 whatever node is on PATH', () => {
    const system = spawnSync('node', ['-v'], { env: { PATH: systemPath }, encoding: 'utf8' });
    for (const PATH of [`${oldNode()}${path.delimiter}${systemPath}`, systemPath]) {
      const r = run(entry, ['version'], { PATH });
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/^wharf \d+\.\d+\.\d+\nnode 24\.21\.0\n/);
    }
    // What the machine's own node is (v20 on Debian 12/13 at the time of writing), for the record.
    expect(system.error === undefined ? system.stdout : 'no node').toMatch(/^(v\d+\.|no node)/);
  });

  it('a wharf link on PATH (ln -s .../bin/wharf.ts ~/.local/bin/wharf) works from any directory', () => {
    const bin = tempDir();
    fs.symlinkSync(entry, path.join(bin, 'wharf'));
    const r = run('wharf', ['version', '--json'], { PATH: [bin, oldNode(), systemPath].join(path.delimiter) });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toMatchObject({ node: '24.21.0' });
  });

  it('npx wharf works in the project with the system npm, and keeps bin/wharf.ts as it is', () => {
    const before = fs.statSync(entry).mode;
    const r = run('npx', ['--no', 'wharf', 'version'], { PATH: systemPath, HOME: process.env.HOME }, path.join(root, 'test'));
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^wharf \d+\.\d+\.\d+\nnode 24\.21\.0\n/);
    // npm links the project's bin and chmods it 0755: a no-op only because git tracks it so.
    expect(fs.statSync(entry).mode).toBe(before);
  }, 120_000);

  it('after npm start, npx wharf login and whoami reach the local server with no --instance', async () => {
    const cwd = tempDir();
    const identity = { WHARF_PLUGINS__IDENTITY__SCRYPT_COST: '1024', WHARF_PLUGINS__IDENTITY__DEVICE_POLL_INTERVAL_SECONDS: '1' };
    const server = await serve([], { cwd, env: identity });
    try {
      const email = 'first-hour@example.test';
      const password = 'correct horse battery staple';
      expect(wharf(['admin', 'create-user', '--email', email, '--password', password, '--org', 'First Hour'], { cwd, env: identity }).status).toBe(0);
      const signed = await fetch(`${server.url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: server.url },
        body: JSON.stringify({ email, password }),
      });
      expect(signed.status).toBe(200);
      const cookie = signed.headers
        .getSetCookie()
        .find((c) => c.startsWith('__session='))!
        .split(';')[0]!;
      const me = (await (await fetch(`${server.url}/api/cli/me`, { headers: { cookie } })).json()) as { orgs: { id: string }[] };

      // What the README says to type, in a shell whose node is the system's: the same config
      // the server read (here its listen address, as WHARF_SERVER__LISTEN), no --instance.
      const home = tempDir();
      const env = { ...cleanEnv(), PATH: systemPath, HOME: process.env.HOME, XDG_CONFIG_HOME: home };
      const login = spawn('npx', ['--no', 'wharf', 'login'], { cwd: root, env: { ...env, WHARF_SERVER__LISTEN: new URL(server.url).host } });
      let stdout = '';
      let stderr = '';
      let approved: Promise<Response> | undefined;
      login.stdout.on('data', (d) => (stdout += d));
      login.stderr.on('data', (d) => {
        stderr += d;
        const code = /confirm the code ([A-Z]{4}-[A-Z]{4})/.exec(stderr)?.[1];
        if (code && !approved) {
          approved = fetch(`${server.url}/oauth/device/approve`, {
            method: 'POST',
            headers: { cookie, origin: server.url, 'content-type': 'application/json' },
            body: JSON.stringify({ user_code: code, orgId: me.orgs[0]!.id, approve: true }),
          });
        }
      });
      const status = await new Promise((resolve) => login.once('exit', resolve));
      expect(status, stderr).toBe(0);
      expect((await approved!).status).toBe(200);
      expect(stderr).toContain(`Open ${server.url}/device?user_code=`);
      expect(stdout).toBe(`Signed in to ${server.url} as ${email} (organizations: first-hour)\n`);
      // From then on the last sign-in is the default, whatever the config says.
      const whoami = run('npx', ['--no', 'wharf', 'whoami'], { ...env, WHARF_SERVER__LISTEN: '127.0.0.1:9' }, root);
      expect(whoami.status, whoami.stderr).toBe(0);
      expect(whoami.stdout).toMatch(new RegExp(`^${email} on ${server.url.replace(/[.]/g, '\\.')}\norganizations: first-hour \\(First Hour\\)\n`));
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 120_000);

  it('outside an installed project, with an old node, it says so in one line', () => {
    const copy = path.join(tempDir(), 'bin');
    fs.mkdirSync(copy);
    fs.copyFileSync(entry, path.join(copy, 'wharf.ts'));
    fs.chmodSync(path.join(copy, 'wharf.ts'), 0o755);
    const r = run(path.join(copy, 'wharf.ts'), ['version'], { PATH: `${oldNode()}${path.delimiter}/usr/bin${path.delimiter}/bin` });
    expect(r).toMatchObject({
      status: 1,
      stdout: '',
      stderr: `wharf: needs Node 24 (the node on PATH is v20.11.1): run npm install in ${path.dirname(copy)}, which puts Node 24 in node_modules/.bin\n`,
    });
  });
});
