import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startApp, tempDir } from '../../helpers/app.ts';
import { root, serve, wharf } from '../../helpers/cli.ts';
import { login } from '../../helpers/identity.ts';
import { databaseEnv } from '../../helpers/postgres.ts';

const scrypt = { WHARF_PLUGINS__IDENTITY__SCRYPT_COST: '1024' };

describe('wharf admin', () => {
  it('create-user makes a user (and with --org an organization it owns) that can sign in', async () => {
    const dataDir = tempDir();
    // Under the project "on postgres", the commands and the server share the data dir's database.
    const fast = { ...scrypt, ...(await databaseEnv(dataDir)) };
    const r = wharf(
      [
        'admin',
        'create-user',
        '--email',
        'Ada@Example.test',
        '--password',
        'analytical engine',
        '--name',
        'Ada',
        '--org',
        'Babbage & Co',
        '--data-dir',
        dataDir,
        '--json',
      ],
      { env: fast },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.user).toMatchObject({ email: 'Ada@Example.test', name: 'Ada' });
    expect(out.org).toMatchObject({ name: 'Babbage & Co', slug: 'babbage-co' });

    const dup = wharf(['admin', 'create-user', '--email', 'ada@example.test', '--password', 'another password', '--data-dir', dataDir], { env: fast });
    expect(dup.status).toBe(1);
    expect(dup.stderr).toBe('wharf: A user with this email already exists\n');
    const short = wharf(['admin', 'create-user', '--email', 'bob@example.test', '--password', 'short', '--data-dir', dataDir], { env: fast });
    expect(short.status).toBe(1);
    expect(short.stderr).toBe('wharf: password must be at least 10 characters\n');
    const bad = wharf(['admin', 'create-user', '--email', 'not-an-email', '--password', 'long enough pw', '--data-dir', dataDir], { env: fast });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe('wharf: email is not a valid address\n');
    const none = wharf(['admin', 'create-user', '--email', 'carl@example.test', '--data-dir', dataDir], { env: fast });
    expect(none.status).toBe(1);
    expect(none.stderr).toBe('wharf: give --password or --password-stdin\n');

    const app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n', { dataDir });
    try {
      const cookie = await login(app, 'ada@example.test', 'analytical engine');
      const orgs = await app.request('GET', '/api/orgs', { headers: { cookie } });
      expect(orgs.body.orgs).toEqual([{ id: out.org.id, slug: 'babbage-co', name: 'Babbage & Co', role: 'owner' }]);
      expect(app.running.notices.join('\n')).not.toContain('/setup?token='); // a user exists: no setup link
    } finally {
      await app.close();
    }
  });

  it('reset-password (from stdin) changes the password and ends sessions, even while the server runs', async () => {
    const dataDir = tempDir();
    // Under the project "on postgres", the commands and the server share the data dir's database.
    const fast = { ...scrypt, ...(await databaseEnv(dataDir)) };
    expect(wharf(['admin', 'create-user', '--email', 'eve@example.test', '--password', 'first password', '--data-dir', dataDir], { env: fast }).status).toBe(0);
    const app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n', { dataDir });
    try {
      const cookie = await login(app, 'eve@example.test', 'first password');
      const r = spawnSync(
        process.execPath,
        [path.join(root, 'bin/wharf.ts'), 'admin', 'reset-password', '--email', 'EVE@example.test', '--password-stdin', '--data-dir', dataDir],
        {
          input: 'second password\n',
          encoding: 'utf8',
          env: { ...process.env, ...fast },
        },
      );
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe('password of eve@example.test changed; its sessions are ended\n');
      expect((await app.request('GET', '/api/cli/me', { headers: { cookie } })).status).toBe(401);
      await expect(login(app, 'eve@example.test', 'first password')).rejects.toThrow(/401/);
      expect(await login(app, 'eve@example.test', 'second password')).toMatch(/^__session=/);
    } finally {
      await app.close();
    }
    const missing = wharf(['admin', 'reset-password', '--email', 'nobody@example.test', '--password', 'whatever pw', '--data-dir', dataDir], { env: fast });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe('wharf: no user with email nobody@example.test\n');
  });
});

describe('first start', () => {
  it('serve prints a one-time setup link that creates the first owner, once', async () => {
    const cwd = tempDir();
    const fast = { ...scrypt, ...(await databaseEnv(cwd)) };
    const server = await serve([], { cwd, env: fast });
    try {
      // serve prints the link right after it listens; give a loaded machine a few seconds.
      let link: string | undefined;
      for (let i = 0; i < 100 && !link; i++) {
        link = /(http:\/\/\S+\/setup\?token=\S+)/.exec(server.output())?.[1];
        if (!link) await new Promise((r) => setTimeout(r, 50));
      }
      expect(link, server.output()).toBeDefined();
      const url = new URL(link!);
      expect(url.origin).toBe(server.url);
      const token = url.searchParams.get('token')!;

      const formPage = await fetch(link!);
      expect(formPage.status).toBe(200);
      expect(formPage.headers.get('content-type')).toMatch(/^text\/html/);
      const formHtml = await formPage.text();
      expect(formHtml).toContain('<form method="post" action="/setup">');
      // The password rule is next to the field before the first submit, and the browser checks it too.
      expect(formHtml).toMatch(/<input id="password"[^>]* minlength="10"[^>]*>\n<p id="password-rule" class="hint">At least 10 characters\.<\/p>/);

      const post = (fields: Record<string, string>) =>
        fetch(`${server.url}/setup`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
          body: new URLSearchParams(fields).toString(),
          redirect: 'manual',
        });
      const wrongToken = await post({ token: 'nope', email: 'root@example.test', password: 'long enough pw', org: 'Root Org' });
      expect(wrongToken.status).toBe(410);
      const weak = await post({ token, email: 'root@example.test', password: 'short', org: 'Root Org' });
      expect(weak.status).toBe(400);
      expect(await weak.text()).toContain('password must be at least 10 characters');
      const crossSite = await fetch(`${server.url}/setup`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
        body: new URLSearchParams({ token, email: 'evil@example.test', password: 'long enough pw', org: 'Evil' }).toString(),
      });
      expect(crossSite.status).toBe(403);

      const done = await post({ token, email: 'root@example.test', name: 'Root <b>', password: 'long enough pw', org: 'Root Org' });
      expect(done.status).toBe(200);
      const html = await done.text();
      expect(html).toContain('owner of Root Org');
      // A command in running text, not the large letter-spaced type of a device code.
      expect(html).toContain('where you ran <code class="command"><span>npm</span> <span>start</span></code>');
      expect(html).not.toContain('<b>');
      const cookie = done.headers
        .getSetCookie()
        .find((c) => c.startsWith('__session='))!
        .split(';')[0]!;
      const me = await (await fetch(`${server.url}/api/cli/me`, { headers: { cookie } })).json();
      expect(me).toMatchObject({ kind: 'session', email: 'root@example.test', orgs: [{ name: 'Root Org' }] });

      expect((await post({ token, email: 'second@example.test', password: 'long enough pw', org: 'Two' })).status).toBe(410);
      expect((await fetch(link!)).status).toBe(410);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const again = await serve([], { cwd, env: fast });
    for (let i = 0; i < 100 && !again.output().includes('listening on'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(again.output()).toContain('listening on');
    expect(again.output()).not.toContain('/setup?token=');
    expect(await again.stop()).toBe(0);
  });
});
