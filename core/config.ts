/**
 * Configuration: a TOML file, overridden by `WHARF_*` environment variables, overridden by
 * command-line flags; validated strictly against the core's schema and every plugin's, then
 * frozen. Every problem is one line naming the key path and where it came from (file line,
 * variable or flag). Nothing is started or migrated before the whole config is valid.
 */
import path from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { z } from 'zod';
import type { ConfigProblem, Plugin } from './plugin.ts';
import { type CoreConfig, type CoreSections, coreSchema } from './core-config.ts';

export type { CoreConfig } from './core-config.ts';

// biome-ignore lint/suspicious/noExplicitAny: plugins of every config type live in one list.
export type AnyPlugin = Plugin<any, any>;

export interface ResolvedConfig {
  core: CoreConfig;
  /** Each enabled plugin's validated, frozen config section. */
  plugins: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** The enabled plugins, dependencies first. */
  order: readonly AnyPlugin[];
  /** The config file that was read, if any. */
  file: string | undefined;
}

/** One or more problems with the configuration, each a line naming the key and its origin. */
export class ConfigError extends Error {
  readonly lines: string[];
  constructor(lines: string[]) {
    super(lines.join('\n'));
    this.name = 'ConfigError';
    this.lines = lines;
  }
}

/** Where a value came from, for error messages. */
type Origin = string;

export interface ConfigSources {
  /** TOML text and the name to report it under. */
  toml?: { text: string; file: string };
  /** Environment, of which the `WHARF_<SECTION>__<KEY>` variables are read. */
  env?: NodeJS.ProcessEnv;
  /** Command-line flags. */
  flags?: { listen?: string; dataDir?: string };
  /** Working directory that relative paths resolve against. */
  cwd?: string;
}

/** The full schema: the core's sections and one section per plugin of the registry. */
export function configSchema(plugins: readonly AnyPlugin[]) {
  const sections: Record<string, z.ZodType> = {};
  for (const p of plugins) {
    sections[p.name] = p.config
      .extend({
        enabled: z
          .boolean()
          .default(p.enabledByDefault ?? true)
          .describe(`Run the ${p.name} plugin.`),
      })
      .prefault({})
      .describe(p.description);
  }
  return coreSchema.extend({
    plugins: z
      .strictObject({
        dir: z
          .string()
          .min(1)
          .optional()
          .describe(
            "Directory of extra plugins, loaded at start without a rebuild: each entry a built JavaScript module (.js, .mjs, .cjs, or a folder with a package.json) default-exporting a plugin made with wharf-plugin's definePlugin. Relative to the working directory. Environment WHARF_PLUGINS__DIR.",
          ),
        ...sections,
      })
      .prefault({})
      .describe('Plugins, one section each: [plugins.<name>].'),
  });
}

/** The key of `[plugins]` that is not a plugin: no plugin may take its name. */
const PLUGIN_DIR_KEY = 'dir';

const PLUGIN_NAME = /^[a-z][a-z0-9_]{0,39}$/;

/**
 * Checks the plugin declarations themselves, before any config is read: names (lowercase, unique,
 * not `dir`), the parts every plugin needs, and migration ids (present, unique within the
 * plugin). Throws ConfigError with one line per problem.
 */
export function checkPlugins(plugins: readonly AnyPlugin[]): void {
  const errors: string[] = [];
  const seen = new Set<string>();
  for (const p of plugins) {
    const label = `plugin ${JSON.stringify(p.name)}`;
    if (typeof p.name !== 'string' || !PLUGIN_NAME.test(p.name)) {
      errors.push(`${label}: a plugin name is 1 to 40 lowercase letters, digits and underscores, starting with a letter`);
      continue;
    }
    if (p.name === PLUGIN_DIR_KEY) errors.push(`${label}: "${PLUGIN_DIR_KEY}" is the key of the extra plugins' directory, not a plugin name`);
    if (seen.has(p.name)) errors.push(`${label}: declared twice`);
    seen.add(p.name);
    if (typeof p.description !== 'string' || !p.description) errors.push(`${label}: needs a description (one line for wharf plugins list)`);
    if (!(p.config instanceof z.ZodObject)) errors.push(`${label}: config must be a zod object schema (z.strictObject({...}))`);
    if (typeof p.setup !== 'function') errors.push(`${label}: needs a setup(ctx) function`);
    const ids = new Set<string>();
    const onPostgres = Array.isArray(p.engines) && p.engines.includes('postgres');
    for (const m of p.migrations ?? []) {
      const problem = migrationProblem(m, onPostgres);
      if (problem) {
        errors.push(`${label}: migration ${JSON.stringify(m?.id ?? null)} ${problem}`);
      } else if (ids.has(m.id)) {
        errors.push(`${label}: migration id "${m.id}" is declared twice (ids are unique within a plugin)`);
      }
      if (typeof m?.id === 'string') ids.add(m.id);
    }
  }
  if (errors.length) throw new ConfigError(errors);
}

/**
 * The extra plugins' directory the sources name (`plugins.dir`, or WHARF_PLUGINS__DIR), as an
 * absolute path; read before the config is validated, since the plugins found there add their
 * own sections to the schema. A value of the wrong type is left for validation to report.
 */
export function pluginDir(sources: ConfigSources): string | undefined {
  const fromEnv = sources.env?.WHARF_PLUGINS__DIR;
  const raw =
    fromEnv ?? (sources.toml ? (readToml(sources.toml.text, sources.toml.file).plugins as Record<string, unknown> | undefined)?.[PLUGIN_DIR_KEY] : undefined);
  return typeof raw === 'string' && raw !== '' ? path.resolve(sources.cwd ?? process.cwd(), raw) : undefined;
}

/** Reads the config from its sources, validates it whole and returns it frozen, or throws ConfigError. */
export function resolveConfig(plugins: readonly AnyPlugin[], sources: ConfigSources = {}): ResolvedConfig {
  checkPlugins(plugins);
  return resolve(plugins, sources, false);
}

/**
 * The core's sections alone ([server], [log], [database]), from the same sources: for a client
 * command that needs only this instance's address, so a plugin's section it has no use for (an
 * S3 secret kept in the server's environment) is neither read nor required.
 */
export function resolveCoreConfig(sources: ConfigSources = {}): CoreConfig {
  return resolve([], sources, true).core;
}

function resolve(plugins: readonly AnyPlugin[], sources: ConfigSources, coreOnly: boolean): ResolvedConfig {
  const schema = configSchema(plugins);
  const origins = new Map<string, Origin>();
  let raw: Record<string, unknown> = {};

  if (sources.toml) {
    raw = readToml(sources.toml.text, sources.toml.file);
    if (coreOnly) delete raw.plugins;
    for (const [key, line] of keyLines(sources.toml.text)) origins.set(key, `${sources.toml.file}:${line}`);
  }
  const errors: string[] = [];
  for (const [name, value] of Object.entries(sources.env ?? {})) {
    if (!name.startsWith('WHARF_') || !name.includes('__') || value === undefined) continue;
    const keyPath = name.slice('WHARF_'.length).toLowerCase().split('__');
    if (coreOnly && keyPath[0] === 'plugins') continue;
    const leaf = envLeaf(schema, keyPath);
    if (!leaf) {
      errors.push(`${name}: unknown key "${keyPath.join('.')}"`);
      continue;
    }
    setPath(raw, keyPath, coerce(value, leaf));
    origins.set(keyPath.join('.'), name);
  }
  const flagKeys: [keyof NonNullable<ConfigSources['flags']>, string[], string][] = [
    ['listen', ['server', 'listen'], '--listen'],
    ['dataDir', ['server', 'data_dir'], '--data-dir'],
  ];
  for (const [flag, keyPath, flagName] of flagKeys) {
    const value = sources.flags?.[flag];
    if (value === undefined) continue;
    setPath(raw, keyPath, value);
    origins.set(keyPath.join('.'), flagName);
  }
  if (errors.length) throw new ConfigError(errors);

  // Parsed once: without zod's JIT, which would generate and compile a fast path for each of
  // the config's objects, to run it once (BENCHMARKS.md, issue 16 part 6). Same result.
  const parsed = schema.safeParse(raw, { reportInput: true, jitless: true });
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => describeIssue(issue, origins, plugins, sources.toml?.file)));
  }
  const { plugins: pluginSections, ...coreSections } = parsed.data as CoreSections & {
    plugins: Record<string, Record<string, unknown> & { enabled: boolean }>;
  };
  const enabled = plugins.filter((p) => pluginSections[p.name]?.enabled);
  const order = sortPlugins(enabled, plugins);
  const core = deepFreeze(deriveCore(coreSections, sources.cwd ?? process.cwd()));
  const pluginConfigs: Record<string, Readonly<Record<string, unknown>>> = {};
  const problems: string[] = [];
  for (const p of order) {
    const { enabled: _enabled, ...section } = pluginSections[p.name] ?? {};
    pluginConfigs[p.name] = deepFreeze(section);
    for (const problem of validatePlugin(p, pluginConfigs[p.name]!, core)) {
      const keyPath = ['plugins', p.name, ...(problem.key ? problem.key.split('.') : [])];
      problems.push(`${locate(keyPath, origins, sources.toml?.file)}"${keyPath.join('.')}": ${problem.message}`);
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze({
    core,
    plugins: Object.freeze(pluginConfigs),
    order: Object.freeze(order),
    file: sources.toml?.file,
  });
}

/** A plugin's own `validate`; a throw is a problem of its section too, not a crash. */
function validatePlugin(plugin: AnyPlugin, config: Readonly<Record<string, unknown>>, core: CoreConfig): readonly ConfigProblem[] {
  if (!plugin.validate) return [];
  try {
    return plugin.validate(config, core) ?? [];
  } catch (err) {
    return [{ key: '', message: `the plugin's validate failed: ${(err as Error).message}` }];
  }
}

/** Where a key was set (file line, variable or flag) as a message prefix, else the file, else nothing. */
function locate(keyPath: readonly string[], origins: Map<string, Origin>, file: string | undefined): string {
  for (let n = keyPath.length; n > 0; n--) {
    const origin = origins.get(keyPath.slice(0, n).join('.'));
    if (origin) return `${origin}: `;
  }
  return file ? `${file}: ` : '';
}

function deriveCore(sections: CoreSections, cwd: string): CoreConfig {
  const { listen } = sections.server;
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1') || '0.0.0.0';
  const port = Number(listen.slice(colon + 1));
  const dataDir = path.resolve(cwd, sections.server.data_dir);
  const publicHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const publicUrl = (sections.server.public_url ?? `http://${publicHost}:${port}`).replace(/\/+$/, '');
  return {
    server: { ...sections.server, host, port, public_url: publicUrl, data_dir: dataDir },
    log: sections.log,
    database: resolveDatabase(sections.database, cwd, dataDir),
  };
}

/**
 * Orders plugins so that each comes after what it depends on. A dependency that is not enabled
 * (or does not exist) and a cycle are errors naming the plugins.
 */
export function sortPlugins(enabled: readonly AnyPlugin[], all: readonly AnyPlugin[] = enabled): AnyPlugin[] {
  const byName = new Map(enabled.map((p) => [p.name, p]));
  const known = new Set(all.map((p) => p.name));
  const errors: string[] = [];
  for (const p of enabled) {
    for (const dep of p.dependsOn ?? []) {
      if (byName.has(dep)) continue;
      errors.push(
        known.has(dep)
          ? `plugins.${p.name}: depends on plugin "${dep}", which is disabled (set plugins.${dep}.enabled = true or disable ${p.name})`
          : `plugins.${p.name}: depends on plugin "${dep}", which does not exist`,
      );
    }
  }
  if (errors.length) throw new ConfigError(errors);

  const order: AnyPlugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (p: AnyPlugin, trail: string[]): void => {
    const s = state.get(p.name);
    if (s === 'done') return;
    if (s === 'visiting') {
      const cycle = [...trail.slice(trail.indexOf(p.name)), p.name];
      throw new ConfigError([`plugins: dependency cycle ${cycle.join(' -> ')}`]);
    }
    state.set(p.name, 'visiting');
    for (const dep of p.dependsOn ?? []) visit(byName.get(dep)!, [...trail, p.name]);
    state.set(p.name, 'done');
    order.push(p);
  };
  for (const p of enabled) visit(p, []);
  return order;
}

function readToml(text: string, file: string): Record<string, unknown> {
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const reason = err.message.split('\n')[0]?.replace(/^Invalid TOML document: /, '') ?? 'invalid TOML';
      throw new ConfigError([`${file}:${err.line}:${err.column}: malformed TOML: ${reason}`]);
    }
    throw err;
  }
}

/**
 * Maps each key path of a TOML document to the line that sets it (`server.listen` -> 3). A
 * line-based scan: tables, arrays of tables, dotted and quoted keys. Used only for messages.
 */
export function keyLines(text: string): Map<string, number> {
  const lines = new Map<string, number>();
  let table: string[] = [];
  const splitKey = (key: string) =>
    key
      .split('.')
      .map((part) => part.trim().replace(/^"(.*)"$|^'(.*)'$/, '$1$2'))
      .filter(Boolean);
  text.split(/\r?\n/).forEach((line, index) => {
    const header = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$/.exec(line);
    if (header?.[1]) {
      table = splitKey(header[1]);
      const key = table.join('.');
      if (!lines.has(key)) lines.set(key, index + 1);
      return;
    }
    const assign = /^\s*([A-Za-z0-9_\-."' ]+?)\s*=/.exec(line);
    if (assign?.[1]) {
      const key = [...table, ...splitKey(assign[1])].join('.');
      if (!lines.has(key)) lines.set(key, index + 1);
    }
  });
  return lines;
}

function describeIssue(issue: z.core.$ZodIssue, origins: Map<string, Origin>, plugins: readonly AnyPlugin[], file: string | undefined): string {
  const keyPath = issue.path.map(String);
  const where = (key: string[]) => locate(key, origins, file);
  if (issue.code === 'unrecognized_keys') {
    return issue.keys
      .map((k) => {
        const full = [...keyPath, k];
        if (keyPath.length === 1 && keyPath[0] === 'plugins') {
          return `${where(full)}unknown plugin "${k}" (built-in plugins: ${plugins.map((p) => p.name).join(', ')})`;
        }
        return `${where(full)}unknown key "${full.join('.')}"`;
      })
      .join('\n');
  }
  const key = keyPath.join('.') || '(root)';
  let message = issue.message.replace(/^Invalid input: /, '').replace(/^Invalid option: /, '');
  if (issue.code === 'invalid_type') message = `expected ${issue.expected}${received(issue.input)}`;
  return `${where(keyPath)}"${key}": ${message}`;
}

function received(input: unknown): string {
  if (input === undefined) return '';
  const kind = Array.isArray(input) ? 'array' : input === null ? 'null' : typeof input;
  return `, got ${kind}${kind === 'string' || kind === 'number' || kind === 'boolean' ? ` ${JSON.stringify(input)}` : ''}`;
}

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  items?: JsonSchema;
}

/**
 * The JSON form of the setting at `keyPath` (which tells a variable's type), or undefined when
 * there is no such setting. Only that setting's schema is converted: converting the whole
 * schema was 3% of the start's CPU (BENCHMARKS.md, issue 16). The walk goes through what the
 * JSON form inlines (optional, default, prefault, readonly, catch, a pipe's input) to the
 * objects' keys, and stops where it would not have `properties` (a union, a nullable, a record),
 * so it finds what {@link schemaAt} finds in the whole schema's JSON form
 * (test/core/config.test.ts compares them for every setting).
 */
export function envLeaf(schema: z.ZodType, keyPath: readonly string[]): JsonSchema | undefined {
  let node: z.ZodType = schema;
  for (const key of keyPath) {
    const object = inlined(node);
    if (!(object instanceof z.ZodObject)) return undefined;
    // Variable names are the operator's text: `constructor` must not reach Object.prototype.
    const shape = object.shape as Record<string, z.ZodType>;
    if (!Object.hasOwn(shape, key)) return undefined;
    node = shape[key]!;
  }
  const leaf = z.toJSONSchema(node, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  return leaf.properties ? undefined : leaf;
}

/** What the input JSON form of `schema` is made of: its wrappers (which that form inlines) removed. */
function inlined(schema: z.ZodType): z.ZodType {
  let node = schema;
  for (;;) {
    const def = (node as unknown as { _zod: { def: { type: string; innerType?: z.ZodType; in?: z.ZodType } } })._zod.def;
    if (['optional', 'default', 'prefault', 'readonly', 'catch', 'nonoptional'].includes(def.type) && def.innerType) node = def.innerType;
    else if (def.type === 'pipe' && def.in) node = def.in;
    else return node;
  }
}

/** @internal The setting at `keyPath` in the whole schema's JSON form (what {@link envLeaf} must agree with). */
export function schemaAt(schema: JsonSchema, keyPath: string[]): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const key of keyPath) {
    // Variable names are the operator's text: `constructor` must not reach Object.prototype.
    node = node?.properties && Object.hasOwn(node.properties, key) ? node.properties[key] : undefined;
    if (!node) return undefined;
  }
  return node.properties ? undefined : node;
}

/** Environment values are text; give them the type the schema expects, leaving bad text for validation to name. */
function coerce(value: string, leaf: JsonSchema): unknown {
  const types = [leaf.type, ...(leaf.anyOf ?? []).map((s) => s.type)].flat().filter(Boolean);
  if (types.includes('string')) return value;
  if (types.includes('integer') || types.includes('number')) return value.trim() !== '' && Number.isFinite(Number(value)) ? Number(value) : value;
  if (types.includes('boolean')) return value === 'true' || value === '1' ? true : value === 'false' || value === '0' ? false : value;
  if (types.includes('array') || types.includes('object')) {
    try {
      return JSON.parse(value);
    } catch {
      return types.includes('array')
        ? value
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : value;
    }
  }
  return value;
}

function setPath(target: Record<string, unknown>, keyPath: string[], value: unknown): void {
  let node = target;
  for (const key of keyPath.slice(0, -1)) {
    const next = node[key];
    node = (node[key] = next && typeof next === 'object' && !Array.isArray(next) ? next : {}) as Record<string, unknown>;
  }
  node[keyPath[keyPath.length - 1]!] = value;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Documentation of every key, read from the schema: used to check config.example.toml and the README. */
export interface KeyDoc {
  key: string;
  type: string;
  default: unknown;
  description: string;
}

export function documentKeys(plugins: readonly AnyPlugin[]): KeyDoc[] {
  const json = z.toJSONSchema(configSchema(plugins), { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const out: KeyDoc[] = [];
  const walk = (node: JsonSchema, prefix: string[]) => {
    // Leaves before nested tables: in TOML a table's own keys must come before its sub-tables.
    const entries = Object.entries(node.properties ?? {}).sort(([, a], [, b]) => Number(!!a.properties) - Number(!!b.properties));
    for (const [key, child] of entries) {
      const keyPath = [...prefix, key];
      if (child.properties) {
        walk(child, keyPath);
        continue;
      }
      const types = [child.type, ...(child.anyOf ?? []).map((s) => s.type)].flat().filter(Boolean) as string[];
      const type = child.enum ? child.enum.map((v) => JSON.stringify(v)).join(' | ') : [...new Set(types)].join(' | ') || 'any';
      out.push({ key: keyPath.join('.'), type, default: child.default, description: child.description ?? '' });
    }
  };
  walk(json, []);
  return out;
}

/** `[database]`: the engine, and an absolute SQLite path (from `url = "sqlite:..."`, `path`, or the data dir). */
function resolveDatabase(section: CoreSections['database'], cwd: string, dataDir: string): CoreConfig['database'] {
  const { url } = section;
  if (url && !url.startsWith('sqlite:')) return { ...section, engine: 'postgres', path: '' };
  const file = url ? url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '') : section.path;
  return { ...section, url: undefined, engine: 'sqlite', path: file ? path.resolve(cwd, file) : path.join(dataDir, 'wharf.db') };
}

/**
 * What is wrong with a migration's shape, or undefined: an id, and exactly one of sql, sqlite +
 * postgres, apply(db), up(db); up (synchronous, SQLite) only on a plugin that does not run on PostgreSQL.
 */
function migrationProblem(m: Plugin['migrations'] extends readonly (infer M)[] | undefined ? M : never, onPostgres: boolean): string | undefined {
  if (typeof m?.id !== 'string' || !m.id) return 'needs an id';
  const forms = [
    typeof m.sql === 'string',
    typeof m.sqlite === 'string' || typeof m.postgres === 'string',
    typeof m.apply === 'function',
    typeof m.up === 'function',
  ].filter(Boolean).length;
  if (forms !== 1) return 'needs exactly one of sql, sqlite and postgres, apply(db), up(db)';
  if ((typeof m.sqlite === 'string') !== (typeof m.postgres === 'string')) return 'gives SQL for one engine: give both sqlite and postgres, or sql';
  if (onPostgres && typeof m.up === 'function')
    return 'uses up(db), the synchronous SQLite connection, but the plugin declares postgres in engines: use sql or apply(db)';
  return undefined;
}
