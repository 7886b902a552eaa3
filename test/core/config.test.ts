import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyPlugin, ConfigError, configSchema, envLeaf, type JsonSchema, keyLines, resolveConfig, schemaAt, sortPlugins } from '../../core/config.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { journalPlugin } from '../helpers/plugins.ts';

const journal: string[] = [];
const a = journalPlugin('alpha', journal);
const b = journalPlugin('beta', journal, { dependsOn: ['alpha'] });
const plugins = [b, a];

function errorsOf(toml: string, env: NodeJS.ProcessEnv = {}, list: readonly AnyPlugin[] = plugins): string[] {
  try {
    resolveConfig(list, { toml: { text: toml, file: 'wharf.toml' }, env, cwd: '/srv' });
  } catch (err) {
    if (err instanceof ConfigError) return err.lines;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('config: TOML in, normalized config out', () => {
  it('gives every default with no file at all', () => {
    const config = resolveConfig(plugins, { cwd: '/srv' });
    expect(config.core.server).toMatchObject({
      listen: '127.0.0.1:8080',
      host: '127.0.0.1',
      port: 8080,
      public_url: 'http://127.0.0.1:8080',
      data_dir: '/srv/wharf-data',
      body_limit_bytes: 1_048_576,
    });
    expect(config.core.database.path).toBe('/srv/wharf-data/wharf.db');
    expect(config.plugins).toEqual({ alpha: { size: 1 }, beta: { size: 1 } });
    expect(config.order.map((p) => p.name)).toEqual(['alpha', 'beta']);
    expect(Object.isFrozen(config.core.server)).toBe(true);
  });

  it('reads values, resolves paths and derives the public URL', () => {
    const config = resolveConfig(plugins, {
      toml: {
        file: 'wharf.toml',
        text: `
[server]
listen = "0.0.0.0:9000"
data_dir = "data"
[database]
path = "/var/lib/wharf/main.db"
[plugins.beta]
size = 3
`,
      },
      cwd: '/srv',
    });
    expect(config.core.server).toMatchObject({ host: '0.0.0.0', port: 9000, public_url: 'http://localhost:9000', data_dir: '/srv/data' });
    expect(config.core.database.path).toBe('/var/lib/wharf/main.db');
    expect(config.plugins.beta).toEqual({ size: 3 });
  });

  it('lets WHARF_* variables override the file, with types from the schema, and flags override both', () => {
    const config = resolveConfig(plugins, {
      toml: { file: 'wharf.toml', text: '[server]\nlisten = "127.0.0.1:1000"\n' },
      env: { WHARF_SERVER__LISTEN: '127.0.0.1:2000', WHARF_PLUGINS__BETA__SIZE: '9', WHARF_SERVER__TRUST_PROXY: 'true', WHARF_UNRELATED: 'x' },
      flags: { dataDir: '/data' },
      cwd: '/srv',
    });
    expect(config.core.server.port).toBe(2000);
    expect(config.core.server.trust_proxy).toBe(true);
    expect(config.core.server.data_dir).toBe('/data');
    expect(config.plugins.beta).toEqual({ size: 9 });
    const flagged = resolveConfig(plugins, { env: { WHARF_SERVER__LISTEN: '127.0.0.1:2000' }, flags: { listen: '127.0.0.1:3000' } });
    expect(flagged.core.server.port).toBe(3000);
  });

  it('drops a disabled plugin and orders the rest by dependency', () => {
    const c = journalPlugin('gamma', journal);
    const config = resolveConfig([b, a, c], { toml: { file: 'f', text: '[plugins.gamma]\nenabled = false\n' } });
    expect(config.order.map((p) => p.name)).toEqual(['alpha', 'beta']);
    expect(config.plugins.gamma).toBeUndefined();
  });

  it('has the example plugin off unless enabled', () => {
    expect(resolveConfig(builtinPlugins).order.some((p) => p.name === 'example')).toBe(false);
    const on = resolveConfig(builtinPlugins, { toml: { file: 'f', text: '[plugins.example]\nenabled = true\ngreeting = "Hi"\n' } });
    expect(on.plugins.example).toEqual({ greeting: 'Hi' });
  });
});

describe('config: each problem is one line naming the key and where it is', () => {
  it.each([
    ['malformed TOML', '[server]\nlisten = \n', ['wharf.toml:2:10: malformed TOML: ']],
    ['an unknown key, with its line', '[server]\nlisten = "127.0.0.1:1"\nlisen = "x"\n', ['wharf.toml:3: unknown key "server.lisen"']],
    ['an unknown section', '[srv]\nx = 1\n', ['wharf.toml:1: unknown key "srv"']],
    ['an unknown plugin', '[plugins.storag]\n', ['wharf.toml:1: unknown plugin "storag" (built-in plugins: beta, alpha)']],
    ['a wrong type', '[server]\n\nbody_limit_bytes = "big"\n', ['wharf.toml:3: "server.body_limit_bytes": expected number, got string "big"']],
    ['a number out of range', '[plugins.alpha]\nsize = 0\n', ['wharf.toml:2: "plugins.alpha.size": Too small: expected number to be >=1']],
    ['a bad listen address', '[server]\nlisten = "localhost"\n', ['wharf.toml:2: "server.listen": expected HOST:PORT, for example 127.0.0.1:8080']],
    ['a bad enum', '[log]\nlevel = "loud"\n', ['wharf.toml:2: "log.level": expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent"']],
    [
      'a missing dependency',
      '[plugins.alpha]\nenabled = false\n',
      ['plugins.beta: depends on plugin "alpha", which is disabled (set plugins.alpha.enabled = true or disable beta)'],
    ],
  ])('%s', (_name, toml, expected) => {
    const lines = errorsOf(toml);
    expect(lines).toHaveLength(expected.length);
    for (const [i, prefix] of expected.entries()) expect(lines[i]!.startsWith(prefix), `${lines[i]} should start with ${prefix}`).toBe(true);
  });

  it('names the variable for a bad environment override, and an unknown one', () => {
    expect(errorsOf('', { WHARF_SERVER__BODY_LIMIT_BYTES: 'lots' })).toEqual([
      'WHARF_SERVER__BODY_LIMIT_BYTES: "server.body_limit_bytes": expected number, got string "lots"',
    ]);
    expect(errorsOf('', { WHARF_SERVER__PORT: '80' })).toEqual(['WHARF_SERVER__PORT: unknown key "server.port"']);
  });

  it('reports a dependency that does not exist, and a cycle', () => {
    const lonely = journalPlugin('lonely', journal, { dependsOn: ['ghost'] });
    expect(errorsOf('', {}, [lonely])).toEqual(['plugins.lonely: depends on plugin "ghost", which does not exist']);
    const x = journalPlugin('x', journal, { dependsOn: ['z'] });
    const y = journalPlugin('y', journal, { dependsOn: ['x'] });
    const z = journalPlugin('z', journal, { dependsOn: ['y'] });
    expect(() => sortPlugins([x, y, z])).toThrowError('plugins: dependency cycle x -> z -> y -> x');
  });
});

describe('config: a plugin checks what its schema cannot say (validate)', () => {
  const ranged = {
    ...journalPlugin('ranged', journal),
    config: z.strictObject({ low: z.int().default(1).describe('Low.'), high: z.int().default(10).describe('High.') }),
    validate(config: { low: number; high: number }) {
      return config.low > config.high ? [{ key: 'low', message: `must not be above high (${config.high})` }] : undefined;
    },
  };

  it('turns each problem into one line naming the key and where it is set', () => {
    expect(errorsOf('[plugins.ranged]\nhigh = 5\nlow = 7\n', {}, [ranged])).toEqual(['wharf.toml:3: "plugins.ranged.low": must not be above high (5)']);
    expect(errorsOf('', { WHARF_PLUGINS__RANGED__LOW: '11' }, [ranged])).toEqual([
      'WHARF_PLUGINS__RANGED__LOW: "plugins.ranged.low": must not be above high (10)',
    ]);
    expect(resolveConfig([ranged], { toml: { text: '[plugins.ranged]\nlow = 2\n', file: 'w.toml' } }).plugins.ranged).toEqual({ low: 2, high: 10 });
  });

  it('runs only for an enabled plugin, and reports a throwing validate as a problem', () => {
    expect(resolveConfig([ranged], { toml: { text: '[plugins.ranged]\nenabled = false\nlow = 70\n', file: 'w.toml' } }).order).toEqual([]);
    const broken = {
      ...ranged,
      validate: () => {
        throw new Error('oops');
      },
    };
    expect(errorsOf('', {}, [broken])).toEqual(['wharf.toml: "plugins.ranged": the plugin\'s validate failed: oops']);
  });

  it('refuses mode = "oidc" without an issuer (the identity plugin)', () => {
    expect(errorsOf('[plugins.identity]\nmode = "oidc"\n', {}, builtinPlugins)).toEqual([
      'wharf.toml:1: "plugins.identity.oidc.issuer": required when mode = "oidc": the URL of the OpenID Connect provider (its discovery document is read from <issuer>/.well-known/openid-configuration)',
      'wharf.toml:1: "plugins.identity.oidc.audience": mode = "oidc" needs an audience (the aud value of the tokens Wharf accepts) or oidc.client_id (then the audience)',
    ]);
  });
});

describe('config: plugin declarations are checked when they load', () => {
  it('refuses duplicate migration ids within a plugin', () => {
    const twice = journalPlugin('twice', journal);
    const dup = { ...twice, migrations: [...twice.migrations!, { id: '002-more', up() {} }, { id: '001-table', up() {} }] };
    expect(errorsOf('', {}, [dup])).toEqual(['plugin "twice": migration id "001-table" is declared twice (ids are unique within a plugin)']);
    // The same id in two plugins is fine: ids are per plugin.
    expect(resolveConfig([journalPlugin('one', journal), journalPlugin('two', journal)]).order).toHaveLength(2);
  });

  it('refuses bad and duplicate names, and the name of the plugins directory key', () => {
    const named = (name: string) => ({ ...journalPlugin('x', journal), name });
    expect(errorsOf('', {}, [named('Caps')])).toEqual([
      'plugin "Caps": a plugin name is 1 to 40 lowercase letters, digits and underscores, starting with a letter',
    ]);
    expect(errorsOf('', {}, [named('dir')])).toEqual(['plugin "dir": "dir" is the key of the extra plugins\' directory, not a plugin name']);
    expect(errorsOf('', {}, [named('same'), named('same')])).toEqual(['plugin "same": declared twice']);
  });
});

describe('config: a WHARF_ variable finds its setting without converting the whole schema', () => {
  it('finds for every setting, and for paths that are not settings, what the whole schema finds', () => {
    for (const list of [builtinPlugins, plugins]) {
      const schema = configSchema(list);
      const whole = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
      const paths: string[][] = [];
      const walk = (node: JsonSchema, at: string[]) => {
        paths.push(at, [...at, 'nope'], [...at, 'constructor']);
        for (const [key, child] of Object.entries(node.properties ?? {})) walk(child, [...at, key]);
      };
      walk(whole, []);
      const leaves = paths.filter((p) => schemaAt(whole, p));
      // Every plugin's settings are among them (the walk reached them).
      expect(leaves.some((p) => p.join('.') === 'plugins.storage.fs.listen')).toBe(list === builtinPlugins);
      expect(leaves.length).toBeGreaterThan(list === builtinPlugins ? 80 : 10);
      for (const p of paths) {
        const found = envLeaf(schema, p);
        const { $schema: _ignored, ...leaf } = (found ?? {}) as Record<string, unknown>;
        expect(found ? leaf : undefined, p.join('.')).toEqual(schemaAt(whole, p));
      }
    }
  });
});

describe('keyLines', () => {
  it('maps tables, dotted and quoted keys to their lines', () => {
    const lines = keyLines('a = 1\n[server]\nlisten = "x" # c\n[plugins."storage"]\ns3.endpoint = "e"\n[[arr]]\nk = 1\n');
    expect(Object.fromEntries(lines)).toEqual({
      a: 1,
      server: 2,
      'server.listen': 3,
      'plugins.storage': 4,
      'plugins.storage.s3.endpoint': 5,
      arr: 6,
      'arr.k': 7,
    });
  });
});
