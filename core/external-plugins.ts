/**
 * Plugins loaded without a rebuild, from the directory `[plugins] dir` names. Each entry is a
 * built module (`.mjs`, `.js`, `.cjs`, or a folder with a package.json) whose default export is
 * what wharf-plugin's `definePlugin` makes: the contract version it was built against and a
 * `define(kit)` function. The loader refuses another major contract version (and a newer minor
 * one) before running any of the plugin's code beyond its module, calls `define` with the core's
 * kit, and checks the declaration as it checks built-in ones. Every refusal is one line naming
 * the entry.
 *
 * Modules are loaded with `import()` of a file URL. In the single executable `require` sees only
 * builtins, but `import()` goes through Node's ordinary ESM loader, which reads the file system
 * (checked on Node 24.21 with and without the code cache; test/build/binary.test.ts loads a
 * plugin this way), and it loads CommonJS and ES modules alike, top-level await included.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { PUBLIC } from './api.ts';
import { type AnyPlugin, checkPlugins, ConfigError } from './config.ts';
import { ConstraintError } from './db.ts';
import { WharfError } from './errors.ts';
import { definePlugin, type ExternalPlugin, PLUGIN_CONTRACT, type PluginKit } from './plugin.ts';

/** The plugins of the directory, in name order of their entries, and where each came from. */
export interface LoadedPlugins {
  plugins: AnyPlugin[];
  /** Plugin name -> the file it was loaded from. */
  sources: Map<string, string>;
}

const MODULE_FILE = /\.(m|c)?js$/;

/** The kit every external plugin's `define` receives: the core's own instances. */
function pluginKit(): PluginKit {
  return Object.freeze({ contract: PLUGIN_CONTRACT, z, WharfError, PUBLIC, plugin: definePlugin, ConstraintError });
}

/**
 * Loads every plugin of `dir`. `builtin` are the plugins already known (their names are taken).
 * Throws ConfigError with one line per entry that cannot be used.
 */
export async function loadExternalPlugins(dir: string, builtin: readonly AnyPlugin[]): Promise<LoadedPlugins> {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such directory' : code === 'ENOTDIR' ? 'not a directory' : (err as Error).message;
    throw new ConfigError([`plugins.dir ${dir}: ${why}`]);
  }
  const kit = pluginKit();
  const taken = new Map(builtin.map((p) => [p.name, 'a built-in plugin']));
  const loaded: LoadedPlugins = { plugins: [], sources: new Map() };
  const errors: string[] = [];
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    const isDir = entry.isDirectory() || (entry.isSymbolicLink() && isDirectory(full));
    if (!isDir && !MODULE_FILE.test(entry.name)) continue;
    try {
      const file = isDir ? packageEntry(full) : full;
      const plugin = await loadOne(file, kit);
      const holder = taken.get(plugin.name);
      if (holder) throw new Error(`plugin "${plugin.name}": the name is taken by ${holder}`);
      taken.set(plugin.name, file);
      loaded.plugins.push(plugin);
      loaded.sources.set(plugin.name, file);
    } catch (err) {
      const lines = err instanceof ConfigError ? err.lines : [firstLine(err)];
      errors.push(...lines.map((line) => `${full}: ${line}`));
    }
  }
  if (errors.length) throw new ConfigError(errors);
  return loaded;
}

async function loadOne(file: string, kit: PluginKit): Promise<AnyPlugin> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot load: ${firstLine(err)}`);
  }
  const exported = unwrapDefault(mod.default);
  if (!isRecord(exported) || typeof exported.define !== 'function' || !('contract' in exported)) {
    throw new Error("does not default-export a plugin (export default definePlugin(...) from 'wharf-plugin')");
  }
  checkContract(exported.contract);
  let plugin: AnyPlugin;
  try {
    plugin = (exported as unknown as ExternalPlugin).define(kit);
  } catch (err) {
    throw new Error(`define() failed: ${firstLine(err)}`);
  }
  if (!isRecord(plugin)) throw new Error('define() must return a plugin declaration (kit.plugin({...}))');
  checkPlugins([plugin]);
  return plugin;
}

/**
 * A plugin for another major contract version is refused, and so is a newer minor version of
 * this one: it may use parts of the contract this core does not have.
 */
export function checkContract(declared: unknown): void {
  const [major, minor] = PLUGIN_CONTRACT.split('.').map(Number) as [number, number];
  const match = typeof declared === 'string' ? /^(\d+)\.(\d+)$/.exec(declared) : null;
  if (!match) throw new Error(`declares no valid plugin contract version (got ${JSON.stringify(declared) ?? 'nothing'}; expected "${PLUGIN_CONTRACT}")`);
  const [theirMajor, theirMinor] = [Number(match[1]), Number(match[2])];
  if (theirMajor !== major) {
    throw new Error(
      `built for plugin contract ${declared}, but this wharf provides ${PLUGIN_CONTRACT}: rebuild it against this wharf's wharf-plugin types (wharf plugins new writes them)`,
    );
  }
  if (theirMinor > minor) throw new Error(`built for plugin contract ${declared}, newer than this wharf's ${PLUGIN_CONTRACT}: upgrade wharf`);
}

/** A folder entry's module: package.json `exports` (a string, or `.` as a string or import/default), else `main`, else index.{mjs,js,cjs}. */
function packageEntry(dir: string): string {
  const manifest = path.join(dir, 'package.json');
  if (fs.existsSync(manifest)) {
    let pkg: Record<string, unknown>;
    try {
      pkg = JSON.parse(fs.readFileSync(manifest, 'utf8')) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`package.json: ${firstLine(err)}`);
    }
    let target: unknown = pkg.exports;
    if (isRecord(target) && '.' in target) target = target['.'];
    if (isRecord(target)) target = target.import ?? target.default;
    target ??= pkg.main;
    if (typeof target === 'string') return path.resolve(dir, target);
  }
  for (const name of ['index.mjs', 'index.js', 'index.cjs']) {
    if (fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  throw new Error('a folder entry needs a package.json with "exports" or "main", or an index.mjs, index.js or index.cjs');
}

/** A CommonJS module built from ES source keeps its default export under `default` of module.exports. */
function unwrapDefault(value: unknown): unknown {
  return isRecord(value) && !('define' in value) && isRecord(value.default) ? value.default : value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isDirectory(file: string): boolean {
  try {
    return fs.statSync(file).isDirectory();
  } catch {
    return false;
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0]!.trim() || 'unknown error';
}
