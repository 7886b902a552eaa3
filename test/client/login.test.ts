/** `wharf login`, `whoami`, `logout` as a user runs them, against a running instance. */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, tempDir, type TestApp } from '../helpers/app.ts';
import { wharfAsync as wharf } from '../helpers/cli.ts';
import { cliLogin, identityOf, signIn, type SignedIn } from '../helpers/identity.ts';

let app: TestApp;
let user: SignedIn;

beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\ndevice_poll_interval_seconds = 1\n');
  user = await signIn(app, { orgName: 'CLI Org' });
});
afterAll(() => app.close());

describe('wharf login', () => {
  it('signs in with the device flow, keeps the tokens 0600, and whoami uses them', async () => {
    const home = tempDir();
    const r = await cliLogin(app, user, home, true);
    expect(r.stderr).toMatch(new RegExp(`^Open ${app.url}/device\\?user_code=[A-Z]{4}-[A-Z]{4} and confirm the code`));
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toBe(`Signed in to ${app.url} as ${user.email} (organizations: cli-org)\n`);
    const file = path.join(home, 'wharf', 'credentials.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(saved.current).toBe(app.url);
    expect(saved.instances[app.url]).toMatchObject({
      accessToken: expect.stringMatching(/^eyJ/),
      refreshToken: expect.any(String),
      user: { userId: user.userId },
    });

    const env = { XDG_CONFIG_HOME: home };
    const me = await wharf(['whoami', '--json'], { env });
    expect(me.status).toBe(0);
    expect(JSON.parse(me.stdout)).toMatchObject({ kind: 'oauth', userId: user.userId, email: user.email });

    // An expired access token is refreshed (and the refresh token rotated) without the user noticing.
    saved.instances[app.url].expiresAt = Date.now() - 1000;
    fs.writeFileSync(file, JSON.stringify(saved));
    const refreshed = await wharf(['whoami', '--json'], { env });
    expect(refreshed.status).toBe(0);
    const after = JSON.parse(fs.readFileSync(file, 'utf8')).instances[app.url];
    expect(after.refreshToken).not.toBe(saved.instances[app.url].refreshToken);
    expect(after.expiresAt).toBeGreaterThan(Date.now());

    // A password reset ends command-line sign-ins too: the next refresh fails with a clear message.
    await (identityOf(app) as unknown as { setPassword(id: string, pw: string): Promise<void> }).setPassword(user.userId, 'reset by an admin');
    const expired = JSON.parse(fs.readFileSync(file, 'utf8'));
    expired.instances[app.url].expiresAt = Date.now() - 1000;
    fs.writeFileSync(file, JSON.stringify(expired));
    const refused = await wharf(['whoami'], { env });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^wharf: the sign-in to .* has expired \(invalid_grant\); run wharf login\n$/);
    user = await signIn(app, { orgName: 'CLI Org 2' });

    const out = await wharf(['logout'], { env });
    expect(out.stdout).toBe(`Signed out of ${app.url}\n`);
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).instances).toEqual({});
    // Signed in nowhere: the default is the local server of the embedded defaults.
    const none = await wharf(['whoami'], { env, cwd: tempDir() });
    expect(none.status).toBe(1);
    expect(none.stderr).toBe('wharf: not signed in to http://127.0.0.1:8080; run wharf login --instance http://127.0.0.1:8080\n');
  }, 90_000);

  it('without --instance, signs in to the server the local config describes, then keeps using it', async () => {
    const home = tempDir();
    const cwd = tempDir();
    const { port } = new URL(app.url);
    fs.writeFileSync(path.join(cwd, 'wharf.toml'), `[server]\nlisten = "0.0.0.0:${port}"\npublic_url = "${app.url}"\n`);
    const r = await cliLogin(app, user, home, true, { args: ['--config', 'wharf.toml'], cwd });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.startsWith(`Signed in to ${app.url} as ${user.email} (organizations: `), r.stdout).toBe(true);

    // The last instance signed in to wins over the config from then on.
    const env = { XDG_CONFIG_HOME: home, WHARF_SERVER__LISTEN: '127.0.0.1:9' };
    const me = await wharf(['whoami', '--json'], { env });
    expect(me.status, me.stderr).toBe(0);
    expect(JSON.parse(me.stdout)).toMatchObject({ userId: user.userId });

    // Not signed in, the listen address of the environment names the instance (public_url = http://<listen>).
    const fresh = tempDir();
    const listen = await wharf(['whoami'], { env: { XDG_CONFIG_HOME: fresh, WHARF_SERVER__LISTEN: `0.0.0.0:${port}` } });
    expect(listen.stderr).toBe(`wharf: not signed in to http://localhost:${port}; run wharf login --instance http://localhost:${port}\n`);
    const bad = await wharf(['whoami'], { env: { XDG_CONFIG_HOME: fresh, WHARF_SERVER__LISTEN: 'nowhere' } });
    expect(bad).toMatchObject({
      status: 2,
      stderr: 'wharf: config error: WHARF_SERVER__LISTEN: "server.listen": expected HOST:PORT, for example 127.0.0.1:8080\n',
    });
  }, 90_000);

  it('reports a denied sign-in and an unreachable or wrong instance in one line', async () => {
    const home = tempDir();
    const denied = await cliLogin(app, user, home, false);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/wharf: the sign-in was denied\n$/);
    expect(fs.existsSync(path.join(home, 'wharf', 'credentials.json'))).toBe(false);

    const unreachable = await wharf(['login', '--instance', 'http://127.0.0.1:9'], { env: { XDG_CONFIG_HOME: home } });
    expect(unreachable.status).toBe(1);
    expect(unreachable.stderr).toMatch(/^wharf: cannot reach http:\/\/127\.0\.0\.1:9: [^(]+\n$/);
    // Without --instance, the line says which instance was tried and why, and how to choose another.
    const local = await wharf(['login'], { env: { XDG_CONFIG_HOME: tempDir(), WHARF_SERVER__LISTEN: '127.0.0.1:9' } });
    expect(local.status).toBe(1);
    expect(local.stderr).toMatch(
      /^wharf: cannot reach http:\/\/127\.0\.0\.1:9: .+ \(tried this config's server address \(server\.public_url, else server\.listen\); choose another with --instance URL\)\n$/,
    );
    const signedIn = tempDir();
    fs.mkdirSync(path.join(signedIn, 'wharf'));
    fs.writeFileSync(path.join(signedIn, 'wharf', 'credentials.json'), JSON.stringify({ current: 'http://127.0.0.1:9', instances: {} }));
    const last = await wharf(['login'], { env: { XDG_CONFIG_HOME: signedIn } });
    expect(last.stderr).toMatch(
      /^wharf: cannot reach http:\/\/127\.0\.0\.1:9: .+ \(tried the last instance signed in to; choose another with --instance URL\)\n$/,
    );
    const notWharf = await wharf(['login', '--instance', `${app.url}/healthz`], { env: { XDG_CONFIG_HOME: home } });
    expect(notWharf.status).toBe(1);
    expect(notWharf.stderr).toMatch(/is not a Wharf instance/);
    const badUrl = await wharf(['whoami', '--instance', 'ftp://x'], { env: { XDG_CONFIG_HOME: home } });
    expect(badUrl.status).toBe(1);
    expect(badUrl.stderr).toBe('wharf: instance must be http or https: ftp://x\n');
  }, 90_000);
});
