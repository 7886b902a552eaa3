import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { PUBLIC } from '../../core/api.ts';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { resolveConfig } from '../../core/config.ts';
import { openDatabase } from '../../core/db.ts';
import { migrationStatus } from '../../core/migrations.ts';
import { BootError, start } from '../../core/lifecycle.ts';
import { createLogger } from '../../core/logger.ts';
import { journalPlugin } from '../helpers/plugins.ts';
import { startApp, tempDir } from '../helpers/app.ts';

const quiet = createLogger('silent');

describe('lifecycle', () => {
  it('sets plugins up in dependency order and closes them last-in-first-out after HTTP', async () => {
    const journal: string[] = [];
    const plugins = [journalPlugin('c', journal, { dependsOn: ['b'] }), journalPlugin('a', journal), journalPlugin('b', journal, { dependsOn: ['a'] })];
    const app = await startApp('', { plugins });
    expect(journal).toEqual(['setup a', 'setup b', 'setup c']);
    const tables = app.running.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%_things' ORDER BY name").all();
    expect(tables).toEqual([{ name: 'a_things' }, { name: 'b_things' }, { name: 'c_things' }]);
    await app.close();
    expect(journal.slice(3)).toEqual(['close c', 'close b', 'close a']);
    await expect(fetch(`${app.url}/healthz`)).rejects.toThrow();
  });

  it('on a failing setup closes the ones already set up, in reverse, and names the plugin', async () => {
    const journal: string[] = [];
    const plugins = [
      journalPlugin('a', journal),
      journalPlugin('b', journal, { dependsOn: ['a'] }),
      journalPlugin('c', journal, { dependsOn: ['b'], failSetup: true }),
    ];
    const dataDir = tempDir();
    const config = resolveConfig(plugins, { flags: { dataDir, listen: '127.0.0.1:0' } });
    const boot = start(config, { listen: true, log: quiet });
    await expect(boot).rejects.toThrow(BootError);
    await expect(boot).rejects.toThrow('plugin "c" failed to start: c cannot reach its store');
    expect(journal).toEqual(['setup a', 'setup b', 'close b', 'close a']);
  });

  it('refuses a port in use with a clear message, leaving nothing running', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    const journal: string[] = [];
    const config = resolveConfig([journalPlugin('a', journal)], { flags: { dataDir: tempDir(), listen: `127.0.0.1:${port}` } });
    await expect(start(config, { listen: true, log: quiet })).rejects.toThrow(`cannot listen on 127.0.0.1:${port}: address already in use`);
    expect(journal).toEqual(['setup a', 'close a']);
    blocker.close();
  });

  it('refuses a data dir that cannot be written, before creating anything', async () => {
    const parent = tempDir();
    const file = path.join(parent, 'not-a-dir');
    fs.writeFileSync(file, 'x');
    const config = resolveConfig([], { flags: { dataDir: path.join(file, 'data') } });
    await expect(start(config, { log: quiet })).rejects.toThrow(/^data dir .*not-a-dir\/data is not writable \(ENOTDIR\)/);
  });

  it('rolls every migration back when one fails, and records applied ones', async () => {
    const journal: string[] = [];
    const good = journalPlugin('good', journal);
    const bad = journalPlugin('bad', journal);
    const broken = { ...bad, migrations: [{ id: '001-broken', up: (db: { exec(s: string): void }) => db.exec('CREATE TABLE oops (') }] };
    const dataDir = tempDir();
    const config = resolveConfig([good, broken], { flags: { dataDir } });
    await expect(start(config, { log: quiet })).rejects.toThrow(/^database migration failed: migration bad\/001-broken failed/);
    const db = openDatabase(path.join(dataDir, 'wharf.db'));
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'good_things'").get()).toBeUndefined();
    expect(journal).toEqual([]);
    db.close();

    const fine = await start(resolveConfig([good], { flags: { dataDir } }), { log: quiet });
    expect(await migrationStatus(fine.data, [{ plugin: 'good', migrations: good.migrations! }])).toEqual([
      { plugin: 'good', id: '001-table', appliedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    ]);
    expect(fine.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(fine.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(fine.db.pragma('busy_timeout', { simple: true })).toBe(5000);
    await fine.close();
    // A second start applies nothing twice.
    const again = await start(resolveConfig([good], { flags: { dataDir } }), { log: quiet });
    expect(again.db.prepare('SELECT plugin, id FROM _migrations ORDER BY plugin').all()).toEqual([
      { plugin: 'core', id: '001_keys_check' },
      { plugin: 'good', id: '001-table' },
    ]);
    await again.close();
  });

  it('keeps keys across restarts, with mode 0600 in a 0700 data dir', async () => {
    const dataDir = path.join(tempDir(), 'fresh');
    const first = await start(resolveConfig([], { flags: { dataDir } }), { log: quiet });
    const sealed = first.keys.encrypt('s3cret', 'test');
    await first.close();
    expect(fs.statSync(dataDir).mode & 0o777).toBe(0o700);
    for (const f of fs.readdirSync(path.join(dataDir, 'keys'))) expect(fs.statSync(path.join(dataDir, 'keys', f)).mode & 0o777).toBe(0o600);
    const second = await start(resolveConfig([], { flags: { dataDir } }), { log: quiet });
    expect(second.keys.decrypt(sealed, 'test')).toBe('s3cret');
    expect(() => second.keys.decrypt(sealed, 'other-purpose')).toThrow();
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    raw[raw.length - 1]! ^= 1; // one flipped bit in the ciphertext
    expect(() => second.keys.decrypt(`v1.${raw.toString('base64url')}`, 'test')).toThrow();
    await second.close();
  });

  it("refuses keys that are not the database's, in one line naming the keys dir and which key", async () => {
    const dataDir = path.join(tempDir(), 'data');
    const keysDir = path.join(dataDir, 'keys');
    const first = await start(resolveConfig([], { flags: { dataDir } }), { log: quiet });
    await first.close();
    const saved = tempDir();
    fs.cpSync(keysDir, saved, { recursive: true });
    const restore = () => fs.cpSync(saved, keysDir, { recursive: true });
    const refused = (problem: string) =>
      new RegExp(
        `^the keys in ${keysDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} are not this database's \\(${problem}\\): it was set up with other keys; copy keys/ from an instance of this database`,
      );
    // A new secret key (the file lost, so generated again at start).
    fs.rmSync(path.join(keysDir, 'secret.key'));
    await expect(start(resolveConfig([], { flags: { dataDir } }), { log: quiet })).rejects.toThrow(
      refused('secret.key cannot decrypt the secrets stored in it'),
    );
    // A new signing key.
    restore();
    fs.rmSync(path.join(keysDir, 'signing-ed25519.pem'));
    await expect(start(resolveConfig([], { flags: { dataDir } }), { log: quiet })).rejects.toThrow(
      refused("signing-ed25519.pem is not the key that signs its sessions' cookies"),
    );
    // Both.
    fs.rmSync(keysDir, { recursive: true });
    await expect(start(resolveConfig([], { flags: { dataDir } }), { log: quiet })).rejects.toThrow(
      refused('secret.key cannot decrypt .*, and signing-ed25519.pem is not .*'),
    );
    // The database's own keys back: it starts.
    fs.rmSync(keysDir, { recursive: true });
    fs.cpSync(saved, keysDir, { recursive: true });
    const again = await start(resolveConfig([], { flags: { dataDir } }), { log: quiet });
    expect((again.db.prepare('SELECT COUNT(*) AS n FROM core_keys_check').get() as { n: number }).n).toBe(1);
    await again.close();
  });

  it("keeps idle keep-alive connections 65 s (above load balancers' 60 s), and says so to clients", async () => {
    const app = await startApp('', { plugins: [] });
    try {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
        http.get(`${app.url}/healthz`, { agent: new http.Agent({ keepAlive: true }) }, resolve).on('error', reject),
      );
      res.resume();
      expect(res.headers.connection).toBe('keep-alive');
      expect(res.headers['keep-alive']).toBe('timeout=65');
      expect(app.running.server?.keepAliveTimeout).toBe(65_000);
    } finally {
      await app.close();
    }
  });

  it('drains an in-flight request before closing', async () => {
    const journal: string[] = [];
    const slow = definePlugin({
      name: 'slow',
      description: 'a slow route',
      config: z.strictObject({}),
      setup({ api }) {
        const group = api.group({ prefixes: ['/slow'], envelope: 'plain' });
        group.route({
          method: 'GET',
          path: '/slow',
          summary: 'slow',
          tag: 'Test',
          auth: PUBLIC,
          async handler(ctx) {
            await new Promise((r) => setTimeout(r, 300));
            ctx.body = 'done';
          },
        });
        return { routes: [group], close: () => void journal.push('close slow') };
      },
    });
    const app = await startApp('', { plugins: [journalPlugin('a', journal), slow] });
    const pending = app.fetch('/slow').then((r) => r.text());
    await new Promise((r) => setTimeout(r, 50));
    const closing = app.close();
    expect(await pending).toBe('done');
    await closing;
    expect(journal).toEqual(['setup a', 'close slow', 'close a']);
  });
});

describe('ctx.every', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('runs after start, logs a failing run with its name, never overlaps a run, and stops on close after the run in progress', async () => {
    const journal: string[] = [];
    let runs = 0;
    let overlapping = 0;
    let inside = 0;
    const ticker = definePlugin({
      name: 'ticker',
      description: 'timers',
      config: z.strictObject({}),
      setup({ every }) {
        every('count', 10, async () => {
          runs++;
          inside++;
          if (inside > 1) overlapping++;
          // Slower than the interval: the next ticks must wait for this run.
          await sleep(35);
          inside--;
          if (runs === 2) throw new Error('the second run fails');
        });
        journal.push(`setup ticker (runs ${runs})`);
        return { close: () => void journal.push(`close ticker (in progress ${inside})`) };
      },
    });
    const app = await startApp('', { plugins: [ticker] });
    expect(journal).toEqual(['setup ticker (runs 0)']);
    await eventually(() => runs >= 4);
    const failures = app.logs.filter((l) => l.msg === 'timer "count" failed');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ plugin: 'ticker', timer: 'count', err: { message: 'the second run fails' } });
    expect(overlapping).toBe(0);
    await app.close();
    // The run in progress finished before the plugin closed; nothing runs after close.
    expect(journal).toEqual(['setup ticker (runs 0)', 'close ticker (in progress 0)']);
    const after = runs;
    await sleep(60);
    expect(runs).toBe(after);
  });

  it('never runs the timers of a boot that fails, and names the plugin of a bad interval', async () => {
    let runs = 0;
    const early = definePlugin({
      name: 'early',
      description: 'declares a timer',
      config: z.strictObject({}),
      setup({ every }) {
        every('tick', 1, () => void runs++);
        return {};
      },
    });
    const journal: string[] = [];
    const config = resolveConfig([early, journalPlugin('late', journal, { dependsOn: ['early'], failSetup: true })], { flags: { dataDir: tempDir() } });
    await expect(start(config, { log: quiet })).rejects.toThrow('plugin "late" failed to start');
    await sleep(30);
    expect(runs).toBe(0);

    const bad = definePlugin({
      name: 'bad',
      description: 'a zero interval',
      config: z.strictObject({}),
      setup({ every }) {
        every('spin', 0, () => undefined);
        return {};
      },
    });
    await expect(start(resolveConfig([bad], { flags: { dataDir: tempDir() } }), { log: quiet })).rejects.toThrow(
      'plugin "bad" failed to start: timer "spin" of plugin bad: interval must be a whole number of milliseconds from 1 to 2147483647, got 0',
    );
  });
});

describe('middleware priorities', () => {
  const tagger = (name: string, priority: 'limits' | 'guards' | 'default' | undefined) =>
    definePlugin({
      name,
      description: `middleware at ${priority}`,
      config: z.strictObject({}),
      setup() {
        return {
          middleware: [
            {
              name,
              priority,
              fn: async (ctx, next) => {
                ctx.set('x-order', [ctx.response.get('x-order'), name].filter(Boolean).join(','));
                await next();
              },
            },
          ],
        };
      },
    });

  it('run by name: limits, then guards, then default; in setup order within one', async () => {
    const plugins = [tagger('d1', undefined), tagger('g', 'guards'), tagger('d2', 'default'), tagger('l', 'limits')];
    const app = await startApp('', { plugins });
    expect((await app.fetch('/healthz')).headers.get('x-order')).toBe('l,g,d1,d2');
    await app.close();
  });

  it('refuses a priority that is not a name, naming the plugin', async () => {
    const odd = tagger('odd', 15 as never);
    await expect(start(resolveConfig([odd], { flags: { dataDir: tempDir() } }), { log: quiet })).rejects.toThrow(
      'plugin "odd" failed to start: middleware "odd" has priority 15; use one of limits, guards, default',
    );
  });
});

async function eventually(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}
