/**
 * Plugins from `[plugins] dir`: modules of each format, the contract version check, every
 * refusal as one line naming the entry, and schemas made with the kit's z validating the
 * plugin's config and its routes' input like a built-in plugin's. (The single binary loading a
 * plugin built by `wharf plugins new` is test/build/binary.test.ts.)
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, pluginDir, resolveConfig } from '../../core/config.ts';
import { checkContract, loadExternalPlugins } from '../../core/external-plugins.ts';
import { PLUGIN_CONTRACT } from '../../core/plugin.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { startApp, tempDir } from '../helpers/app.ts';

/** The body of a plugin module's define(kit): a config schema, a migration and a validated route. */
const DEFINE = `({ plugin, z, PUBLIC, WharfError }) => plugin({
  name: NAME,
  description: 'an external plugin',
  config: z.strictObject({ limit: z.int().min(1).max(10).default(3).describe('Largest n.') }),
  validate: (config) => (config.limit === 7 ? [{ key: 'limit', message: 'seven is unlucky' }] : undefined),
  migrations: [{ id: '001-table', up: (db) => db.exec('CREATE TABLE ' + NAME + '_rows (n INTEGER)') }],
  setup({ api, config, db }) {
    const group = api.group({ prefixes: ['/' + NAME], envelope: 'plain' });
    group.route({
      method: 'POST',
      path: '/' + NAME + '/rows',
      summary: 'add a row',
      tag: NAME,
      auth: PUBLIC,
      body: z.object({ n: z.int().min(0).max(config.limit) }),
      handler(ctx, { body }) {
        if (body.n === 0) throw new WharfError('conflict', 'zero is taken');
        db.prepare('INSERT INTO ' + NAME + '_rows (n) VALUES (?)').run(body.n);
        ctx.status = 201;
        ctx.body = { n: body.n };
      },
    });
    return { routes: [group] };
  },
})`;

function esm(name: string, contract = PLUGIN_CONTRACT): string {
  return `const NAME = ${JSON.stringify(name)};\nexport default { contract: ${JSON.stringify(contract)}, define: ${DEFINE} };\n`;
}

function write(dir: string, files: Record<string, string>): string {
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

async function refusal(dir: string): Promise<string[]> {
  try {
    await loadExternalPlugins(dir, builtinPlugins);
  } catch (err) {
    if (err instanceof ConfigError) return err.lines;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('plugins from [plugins] dir', () => {
  it('loads ES modules, CommonJS modules (also as built from ES source) and folders, in name order', async () => {
    const dir = write(tempDir(), {
      'a_esm.mjs': esm('a_esm'),
      'b_cjs.cjs': `const NAME = 'b_cjs';\nmodule.exports = { contract: '${PLUGIN_CONTRACT}', define: ${DEFINE} };\n`,
      'c_from_esm.cjs': `const NAME = 'c_from_esm';\nObject.defineProperty(exports, '__esModule', { value: true });\nexports.default = { contract: '${PLUGIN_CONTRACT}', define: ${DEFINE} };\n`,
      'd_folder/package.json': JSON.stringify({ name: 'd', type: 'module', exports: { '.': { import: './dist/d.js' } } }),
      'd_folder/dist/d.js': esm('d_folder'),
      'e_main/package.json': JSON.stringify({ main: 'lib/e.mjs' }),
      'e_main/lib/e.mjs': esm('e_main'),
      'f_index/index.mjs': esm('f_index'),
      // Not modules: ignored.
      'README.md': '# plugins',
      'a_esm.mjs.map': '{}',
      '.hidden.mjs': 'throw new Error("never loaded")',
    });
    const loaded = await loadExternalPlugins(dir, builtinPlugins);
    expect(loaded.plugins.map((p) => p.name)).toEqual(['a_esm', 'b_cjs', 'c_from_esm', 'd_folder', 'e_main', 'f_index']);
    expect(loaded.sources.get('d_folder')).toBe(path.join(dir, 'd_folder/dist/d.js'));
    expect(loaded.sources.get('b_cjs')).toBe(path.join(dir, 'b_cjs.cjs'));
  });

  it('refuses another major contract version, and a newer minor one, with one line naming the file', async () => {
    const [major, minor] = PLUGIN_CONTRACT.split('.').map(Number) as [number, number];
    const dir = write(tempDir(), {
      'next_major.mjs': esm('next_major', `${major + 1}.0`),
      'newer_minor.mjs': esm('newer_minor', `${major}.${minor + 1}`),
      'no_version.mjs': 'export default { define() { throw new Error("never called"); } };\n',
    });
    expect(await refusal(dir)).toEqual([
      `${dir}/newer_minor.mjs: built for plugin contract ${major}.${minor + 1}, newer than this wharf's ${PLUGIN_CONTRACT}: upgrade wharf`,
      `${dir}/next_major.mjs: built for plugin contract ${major + 1}.0, but this wharf provides ${PLUGIN_CONTRACT}: rebuild it against this wharf's wharf-plugin types (wharf plugins new writes them)`,
      `${dir}/no_version.mjs: does not default-export a plugin (export default definePlugin(...) from 'wharf-plugin')`,
    ]);
    expect(() => checkContract(`${major}.${minor}`)).not.toThrow();
    expect(() => checkContract(`${major}`)).toThrow(`declares no valid plugin contract version (got "${major}"; expected "${PLUGIN_CONTRACT}")`);
  });

  it('refuses what cannot be used, each entry on one line, and loads nothing then', async () => {
    const dir = write(tempDir(), {
      'broken.mjs': 'export default {\n',
      'dup_ids.mjs': `const NAME = 'dup_ids';\nconst p = { contract: '${PLUGIN_CONTRACT}', define: (kit) => { const d = (${DEFINE})(kit); return { ...d, migrations: [...d.migrations, ...d.migrations] }; } };\nexport default p;\n`,
      'storage.mjs': esm('storage'),
      'throws.mjs': `export default { contract: '${PLUGIN_CONTRACT}', define() { throw new Error('no config here\\nsecond line'); } };\n`,
      'empty_folder/README': 'nothing',
    });
    // (Under vitest the module loader's message differs from Node's; the CLI tests see Node's.)
    expect(await refusal(dir)).toEqual([
      expect.stringMatching(new RegExp(`^${dir}/broken\\.mjs: cannot load: [^\\n]+$`)),
      `${dir}/dup_ids.mjs: plugin "dup_ids": migration id "001-table" is declared twice (ids are unique within a plugin)`,
      `${dir}/empty_folder: a folder entry needs a package.json with "exports" or "main", or an index.mjs, index.js or index.cjs`,
      `${dir}/storage.mjs: plugin "storage": the name is taken by a built-in plugin`,
      `${dir}/throws.mjs: define() failed: no config here`,
    ]);
    expect(await refusal(path.join(dir, 'nope'))).toEqual([`plugins.dir ${dir}/nope: no such directory`]);
  });

  it('reads the directory from the file or WHARF_PLUGINS__DIR, relative to the working directory', () => {
    expect(pluginDir({ toml: { text: '[plugins]\ndir = "extra"\n', file: 'w.toml' }, cwd: '/srv' })).toBe('/srv/extra');
    expect(pluginDir({ toml: { text: '[plugins]\ndir = "extra"\n', file: 'w.toml' }, env: { WHARF_PLUGINS__DIR: '/opt/p' }, cwd: '/srv' })).toBe('/opt/p');
    expect(pluginDir({ toml: { text: '[server]\n', file: 'w.toml' } })).toBeUndefined();
  });

  it("validates the plugin's config and its routes' input with its schemas, made with the host's z", async () => {
    const dir = write(tempDir(), { 'rows.mjs': esm('rows') });
    const { plugins } = await loadExternalPlugins(dir, builtinPlugins);
    const all = [...builtinPlugins, ...plugins];
    const configLines = (toml: string) => {
      try {
        resolveConfig(all, { toml: { text: `[plugins]\ndir = "${dir}"\n${toml}`, file: 'w.toml' } });
        return [];
      } catch (err) {
        return (err as ConfigError).lines;
      }
    };
    expect(configLines('[plugins.rows]\nlimit = 0\n')).toEqual(['w.toml:4: "plugins.rows.limit": Too small: expected number to be >=1']);
    expect(configLines('[plugins.rows]\nlimit = 7\n')).toEqual(['w.toml:4: "plugins.rows.limit": seven is unlucky']);
    expect(configLines('[plugins.rows]\nlimt = 2\n')).toEqual(['w.toml:4: unknown key "plugins.rows.limt"']);

    const app = await startApp(`[plugins]\ndir = "${dir}"\n[plugins.rows]\nlimit = 5\n`, { plugins: all });
    try {
      expect(await app.request('POST', '/rows/rows', { body: { n: 4 } })).toMatchObject({ status: 201, body: { n: 4 } });
      expect(await app.request('POST', '/rows/rows', { body: { n: 6 } })).toMatchObject({
        status: 400,
        body: { error: 'n: Too big: expected number to be <=5' },
      });
      expect(await app.request('POST', '/rows/rows', { body: { n: 'x' } })).toMatchObject({ status: 400 });
      expect(await app.request('POST', '/rows/rows', { body: { n: 0 } })).toMatchObject({ status: 409, body: { error: 'zero is taken' } });
      expect(await app.request('GET', '/rows/rows')).toMatchObject({ status: 405 });
      expect(app.running.db.prepare('SELECT n FROM rows_rows').all()).toEqual([{ n: 4 }]);
      const doc = (await app.request('GET', '/api/openapi.json')).body;
      expect(doc.paths['/rows/rows'].post.requestBody.content['application/json'].schema).toMatchObject({
        properties: { n: { type: 'integer', minimum: 0, maximum: 5 } },
      });
    } finally {
      await app.close();
    }
  });
});
