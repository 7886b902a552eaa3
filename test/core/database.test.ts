// A whole server on the configured database: SQLite in the project "all", a fresh PostgreSQL
// database in the project "on postgres" (WHARF_TEST_DATABASE=postgres). Only the plugins ported
// to the data layer run on PostgreSQL; the others are disabled here so the same test runs on both.
import { beforeAll, describe, expect, it } from 'vitest';
import { builtinPlugins } from '../../plugins/index.ts';
import { serve, wharf } from '../helpers/cli.ts';
import { databaseEnv, legacyPluginDir, postgresPlugins } from '../helpers/postgres.ts';
import { tempDir } from '../helpers/app.ts';

const engine = process.env.WHARF_TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';
const { runs: ported, not: unported } = postgresPlugins();

describe(`a server on ${engine}`, () => {
  let env: NodeJS.ProcessEnv;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = tempDir();
    env = {
      ...(await databaseEnv()),
      WHARF_PLUGINS__EXAMPLE__ENABLED: 'true',
      ...Object.fromEntries(unported.map((p) => [`WHARF_PLUGINS__${p.toUpperCase()}__ENABLED`, 'false'])),
    };
  });

  it('migrates, serves the ported plugins, answers /readyz with the database, and its commands see the same data', async () => {
    expect(ported).toContain('example');
    const pending = wharf(['migrate', 'status', '--data-dir', dataDir], { env });
    expect(pending.stdout).toContain('pending  example/001-create-visits\n');
    const server = await serve(['--data-dir', dataDir], { env });
    try {
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ checks: { database: true } });
      expect(await (await fetch(`${server.url}/example/hello?name=Ada`)).json()).toEqual({ message: 'Hello, Ada!', visits: 1 });
      const posted = await fetch(`${server.url}/example/hello`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"Ada"}' });
      expect(posted.status).toBe(201);
      expect(await posted.json()).toEqual({ message: 'Hello, Ada!', visits: 2 });
      // The command, another process, reads what the server wrote.
      expect(wharf(['example', 'visits', 'Ada', '--data-dir', dataDir], { env }).stdout).toBe('2\n');
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0);
    }
    expect(wharf(['migrate', 'up', '--data-dir', dataDir], { env }).stdout).toBe('nothing to apply\n');
    expect(wharf(['migrate', 'status', '--data-dir', dataDir], { env }).stdout).toMatch(/^applied {2}example\/001-create-visits {2}\d{4}-/m);
  });

  it.runIf(engine === 'postgres')('refuses rate limits counted in memory on a shared database unless one instance is declared: one line, exit 2', () => {
    const { WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: _, ...shared } = env;
    const r = wharf(['config', 'check', '--data-dir', dataDir], { env: shared });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      'wharf: config error: "plugins.rate_limit.store": is "memory", which counts in this instance only, but the database is shared (PostgreSQL): set store = "redis" to share the counters, or single_instance = true if one instance runs\n',
    );
    expect(wharf(['config', 'check', '--data-dir', dataDir], { env }).status).toBe(0);
  });

  it.runIf(engine === 'postgres')('refuses to start while a plugin not ported is enabled: one line naming it, exit 1', () => {
    // Every built-in plugin runs on PostgreSQL: one from outside the tree that declares no engines.
    expect(builtinPlugins.filter((p) => !p.engines?.includes('postgres')).map((p) => p.name)).toEqual([]);
    const r = wharf(['serve', '--data-dir', dataDir], { env: { ...env, WHARF_PLUGINS__DIR: legacyPluginDir() } });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('wharf: plugin legacy does not run on PostgreSQL yet; disable it or use SQLite\n');
  });
});
