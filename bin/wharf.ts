#!/bin/sh
//usr/bin/env true; h=$(dirname "$(readlink -f "$0")"); [ -x "$h/../node_modules/.bin/node" ] && exec "$h/../node_modules/.bin/node" "$0" "$@"; v=$(node -v 2>/dev/null); case $v in v2[4-9].*|v[3-9]?.*) exec node "$0" "$@";; esac; echo "wharf: needs Node 24 (the node on PATH is ${v:-missing}): run npm install in $(dirname "$h"), which puts Node 24 in node_modules/.bin" >&2; exit 1
/**
 * The `wharf` command: the server (`serve`), its operations (`migrate`, `backup`, `migrate-data`, `migrate-objects`, `config check`,
 * `plugins list`, `plugins new`, `version`) and the commands plugins add (built-in ones and
 * those of `[plugins] dir`). Heavy modules load inside the
 * handlers that need them, so `wharf version` and `wharf --help` start nothing.
 *
 * Lines 1-2 are a shell launcher, so `./bin/wharf.ts`, `npx wharf` and a symlink on PATH work
 * whatever Node the machine has: a Node older than 22.18 cannot even parse a .ts file, so the
 * check has to happen before Node starts. The shell runs line 2 and execs the project's pinned
 * Node (node_modules/.bin, from npm install), else a Node 24+ on PATH, else prints one line and
 * exits 1. The shell runs `//usr/bin/env true` (that is, `true`) first; Node reads line 1 as a
 * hashbang and line 2 as a comment, which no formatter rewrites.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Argv } from 'yargs';
import pkg from '../package.json' with { type: 'json' };
import { ConfigError, pluginDir, resolveConfig, resolveCoreConfig, type AnyPlugin, type ConfigSources, type ResolvedConfig } from '../core/config.ts';
import type { CommandContext, PluginCommand } from '../core/plugin.ts';
import type { CoreConfig } from '../core/core-config.ts';
import { WharfError } from '../core/errors.ts';
import { builtinPlugins } from '../plugins/index.ts';
import { addClientCommands } from '../client/commands.ts';
import { humanBytes } from '../client/bytes.ts';
import { count } from '../client/output.ts';
import { driverOf, type StoragePluginConfig } from '../plugins/storage/config.ts';

interface GlobalArgs {
  config?: string;
  dataDir?: string;
  listen?: string;
  json?: boolean;
}

/** Exit codes: 1 a failure at run time, 2 a configuration or usage error. */
const EXIT_FAILURE = 1;
const EXIT_CONFIG = 2;

function fail(message: string, code = EXIT_FAILURE): never {
  process.stderr.write(`wharf: ${message}\n`);
  process.exit(code);
}

function configSources(args: GlobalArgs, file = args.config ?? process.env.WHARF_CONFIG): ConfigSources {
  const sources: ConfigSources = { env: process.env, flags: { listen: args.listen, dataDir: args.dataDir } };
  if (file) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      fail(`config error: ${file}: ${code === 'ENOENT' ? 'file not found' : (err as Error).message}`, EXIT_CONFIG);
    }
    sources.toml = { text, file };
  }
  return sources;
}

/**
 * The plugins of this run: the built-in ones and those of `[plugins] dir`, and which of them the
 * config enables. Found before the command line is parsed, so that the enabled plugins'
 * commands exist (and only theirs); a problem loading them is kept for the commands that read
 * the config (`--help`, `version` and the client commands still work).
 */
interface PluginSet {
  list: readonly AnyPlugin[];
  /** Plugin name -> the file an external plugin was loaded from. */
  sources: ReadonlyMap<string, string>;
  problem?: ConfigError;
  /** The plugins the config enables; absent when the config does not load (or was not read). */
  enabled?: ReadonlySet<string>;
}

async function findPlugins(words: readonly string[], config: string | undefined, builtin: readonly AnyPlugin[], needEnabled = true): Promise<PluginSet> {
  const none: PluginSet = { list: builtin, sources: new Map() };
  const [command, sub, checked] = words;
  // `version` needs no plugin, and must answer even when a plugin's module is broken.
  if (command === 'version') return none;
  const file = command === 'config' && sub === 'check' && checked ? checked : (config ?? process.env.WHARF_CONFIG);
  let text: string | undefined;
  try {
    if (file) text = fs.readFileSync(file, 'utf8');
  } catch {
    return none; // the command that reads the config says what is wrong with the file
  }
  const toml = text === undefined ? undefined : { text, file: file! };
  let found = none;
  try {
    const dir = pluginDir({ toml, env: process.env });
    if (dir) {
      const { loadExternalPlugins } = await import('../core/external-plugins.ts');
      const loaded = await loadExternalPlugins(dir, builtin);
      found = { list: [...builtin, ...loaded.plugins], sources: loaded.sources };
    }
  } catch (err) {
    if (err instanceof ConfigError) return { ...none, problem: err };
    throw err;
  }
  // Only the command line's plugin commands need the enabled set; `serve` validates the config itself.
  if (!needEnabled) return found;
  try {
    return { ...found, enabled: new Set(resolveConfig(found.list, { toml, env: process.env }).order.map((p) => p.name)) };
  } catch (err) {
    if (err instanceof ConfigError) return found; // said by the commands that read the config
    throw err;
  }
}

function failConfig(err: ConfigError): never {
  fail(err.lines.map((l) => `config error: ${l}`).join('\nwharf: '), EXIT_CONFIG);
}

/** What `load` resolves; a config error said in one line per problem, exit 2. */
function orFailConfig<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) failConfig(err);
    throw err;
  }
}

function loadConfig(args: GlobalArgs, plugins: PluginSet, file?: string): ResolvedConfig {
  if (plugins.problem) failConfig(plugins.problem);
  return orFailConfig(() => resolveConfig(plugins.list, configSources(args, file)));
}

/** The core's sections alone: a client command's local address, whatever the plugins' sections hold. */
const loadCoreConfig = (args: GlobalArgs): CoreConfig => orFailConfig(() => resolveCoreConfig(configSources(args)));

/** The database of a command, opened like a start (migrated unless told not to); one line and exit 1 when it cannot be. */
async function openOrFail(config: ResolvedConfig, migrateNow = true) {
  const { openForCommand, BootError } = await import('../core/lifecycle.ts');
  try {
    return await openForCommand(config, migrateNow);
  } catch (err) {
    if (err instanceof BootError) fail(err.message);
    throw err;
  }
}

function commandContext(args: GlobalArgs, plugins: PluginSet): CommandContext {
  return {
    async open() {
      const config = loadConfig(args, plugins);
      const { loadKeys } = await import('../core/keys.ts');
      const { data, db } = await openOrFail(config);
      return { config: config.core, plugins: config.plugins, data, db, keys: loadKeys(config.core.server.data_dir), close: () => data.close() };
    },
    print(text, json) {
      process.stdout.write(args.json && json !== undefined ? `${JSON.stringify(json)}\n` : `${text}\n`);
    },
  };
}

async function serve(args: GlobalArgs, plugins: PluginSet): Promise<void> {
  const config = loadConfig(args, plugins);
  const { start, BootError } = await import('../core/lifecycle.ts');
  let running: Awaited<ReturnType<typeof start>>;
  try {
    running = await start(config, { listen: true });
  } catch (err) {
    if (err instanceof BootError) fail(err.message);
    throw err;
  }
  const { log } = running;
  log.info(
    { url: running.url, public_url: config.core.server.public_url, data_dir: config.core.server.data_dir, plugins: config.order.map((p) => p.name) },
    'listening',
  );
  process.stderr.write(`Wharf ${pkg.version} listening on ${running.url} (public URL ${config.core.server.public_url})\n`);
  for (const line of running.notices) process.stderr.write(`${line}\n`);
  // Said once listening, so a server that fails to start never points at a link it did not print.
  // The notices themselves (a setup link is a credential) stay out of the log.
  if (running.notices.length)
    log.warn({ lines: running.notices.length }, 'notices for the operator are printed on stderr (for example the first-start setup link)');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    running.close().then(
      () => {
        log.info('stopped');
        log.flush(() => process.exit(0));
      },
      (err) => {
        log.error({ err }, 'shutdown failed');
        log.flush(() => process.exit(EXIT_FAILURE));
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

async function versions(): Promise<{ wharf: string; node: string; sqlite: string }> {
  const { openDatabase } = await import('../core/db.ts');
  const db = openDatabase(':memory:');
  const sqlite = (db.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
  db.close();
  return { wharf: pkg.version, node: process.versions.node, sqlite };
}

/**
 * Adds the commands of the enabled plugins (when the config does not load: of those enabled by
 * default, whose handlers then say what is wrong with it). Returns the first word of each
 * command left out, with its plugin's name.
 */
function addPluginCommands(cli: Argv<GlobalArgs>, plugins: PluginSet): Map<string, string> {
  const groups = new Map<string, PluginCommand[]>();
  const absent = new Map<string, string>();
  for (const plugin of plugins.list) {
    const enabled = plugins.enabled ? plugins.enabled.has(plugin.name) : (plugin.enabledByDefault ?? true);
    for (const command of plugin.commands ?? []) {
      if (!enabled) {
        absent.set(command.group ?? command.command.split(' ')[0]!, plugin.name);
        continue;
      }
      const list = groups.get(command.group ?? '') ?? [];
      list.push(command);
      groups.set(command.group ?? '', list);
    }
  }
  const toModule = (command: PluginCommand) => ({
    command: command.command,
    describe: command.describe,
    builder: (y: Argv) => (command.builder ? command.builder(y) : y),
    handler: async (argv: Record<string, unknown>) => {
      try {
        const code = await command.handler(argv, commandContext(argv as GlobalArgs, plugins));
        if (code) process.exitCode = code;
      } catch (err) {
        if (err instanceof WharfError) fail(err.message);
        throw err;
      }
    },
  });
  for (const [group, commands] of groups) {
    if (!group) {
      for (const c of commands) cli.command(toModule(c));
      continue;
    }
    cli.command(group, GROUP_DESCRIPTIONS[group] ?? `${group[0]!.toUpperCase()}${group.slice(1)} commands`, (y) => {
      for (const c of commands) y.command(toModule(c));
      return y.demandCommand(1, `name a ${group} command`);
    });
  }
  return absent;
}

/** The summary `wharf migrate-data` prints: the tables copied, those left, and the keys that go with the data. */
function formatMigrateData(r: import('../core/migrate-data.ts').MigrateDataResult): string {
  const width = Math.max(5, ...r.tables.map((t) => t.table.length), ...r.skipped.map((t) => t.table.length));
  const lines = [
    `copied ${count(r.rows, 'row')} in ${count(r.tables.length, 'table')} to ${r.target} in ${(r.ms / 1000).toFixed(1)} s (${count(r.migrations, 'migration')} applied there first); row counts equal on both sides:`,
    `  ${'table'.padEnd(width)}  rows`,
    ...r.tables.map((t) => `  ${t.table.padEnd(width)}  ${t.rows}`),
  ];
  if (r.skipped.length) {
    lines.push('left in SQLite, not copied:');
    for (const t of r.skipped) lines.push(`  ${t.table.padEnd(width)}  ${t.rows ?? '-'}  ${t.reason}`);
  }
  if (r.targetOnly.length) lines.push(`on the target only, made by its migrations (nothing to copy into them): ${r.targetOnly.join(', ')}`);
  for (const c of r.skippedColumns) lines.push(`column ${c.table}.${c.column} is not on the target: not copied (${count(c.rows, 'row')} with a value)`);
  lines.push(
    `keys: secrets in these tables are encrypted with the keys in ${r.keys.dir} (${r.keys.files.join(', ') || 'none found'}): every instance serving this database needs a copy of that directory in its data dir, or they cannot be read`,
    `next: set [database] url to the target (or WHARF_DATABASE__URL) and start wharf serve with this data dir; moving to several instances on the s3 driver, run wharf migrate-objects first (the embedded store's objects into the S3 store)`,
  );
  return `${lines.join('\n')}\n`;
}

/** The summary `wharf migrate-objects` prints: per bucket, then the failures by key. */
function formatMigrateObjects(r: import('../plugins/storage/migrate-objects.ts').MigrateObjectsResult): string {
  const width = Math.max(6, ...r.buckets.map((b) => b.bucket.length));
  const lines = [
    `${r.source} -> ${r.target}: ${count(r.buckets.length, 'bucket')}, ${count(r.objects, 'object')}: ${r.copied} copied (${humanBytes(r.bytes)}), ${r.skipped} skipped (already there, same size and ETag), ${r.failed} failed, in ${(r.ms / 1000).toFixed(1)} s`,
  ];
  if (r.buckets.length) {
    lines.push(`  ${'bucket'.padEnd(width)}  objects  copied  skipped  failed  bytes copied`);
    for (const b of r.buckets)
      lines.push(
        `  ${b.bucket.padEnd(width)}  ${String(b.objects).padStart(7)}  ${String(b.copied).padStart(6)}  ${String(b.skipped).padStart(7)}  ${String(b.failed).padStart(6)}  ${humanBytes(b.bytes)}`,
      );
  }
  if (r.vanished) lines.push(`${count(r.vanished, 'object')} deleted from the embedded store during the run: not copied`);
  const shown = r.failures.slice(0, 50);
  if (shown.length) lines.push('failed:', ...shown.map((f) => `  ${f.bucket}/${f.key}: ${f.reason}`));
  if (r.failures.length > shown.length) lines.push(`  and ${r.failures.length - shown.length} more (--json lists them all)`);
  if (r.records?.checked) {
    const missing = r.records.missing;
    lines.push(
      `file records: ${count(r.records.files, 'file')} of ${count(r.records.apps, 'app')} in the database, ${missing.length ? `${missing.length} without an object in the S3 store:` : 'every one with its object in the S3 store'}`,
      ...missing.slice(0, 50).map((m) => `  ${m.bucket}/${m.key}`),
    );
    if (missing.length > 50) lines.push(`  and ${missing.length - 50} more (--json lists them all)`);
  } else if (r.records)
    lines.push('file records not checked: the database of this config has no storage tables yet (run wharf migrate-data into it, then this again)');
  if (r.serverRunning)
    lines.push(
      `a server still runs on this data dir (pid ${r.serverRunning.pid}): what it writes from now on is not copied; stop it and run this again before the new instances start`,
    );
  return `${lines.join('\n')}\n`;
}

/** What `wharf --help` says of a plugin's command group, a capitalised phrase like the other commands'. */
const GROUP_DESCRIPTIONS: Record<string, string> = {
  admin: 'Users of this server, from its data directory: create one, reset a password',
};

/**
 * `serve` with nothing but the global options (what a service manager runs), read without yargs:
 * loading yargs and building the command tree was 6% of the start. Anything else (--help, an
 * unknown or repeated option, a value that looks like an option) returns undefined and goes
 * through yargs as before.
 */
export function plainServe(argv: readonly string[]): GlobalArgs | undefined {
  if (argv[0] !== 'serve') return undefined;
  const names = { '--config': 'config', '--data-dir': 'dataDir', '--listen': 'listen' } as const;
  const args: GlobalArgs = {};
  for (let i = 1; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--json' && args.json === undefined) {
      args.json = true;
      continue;
    }
    const eq = word.indexOf('=');
    const key = names[(eq === -1 ? word : word.slice(0, eq)) as keyof typeof names];
    const value = eq === -1 ? argv[++i] : word.slice(eq + 1);
    if (!key || args[key] !== undefined || value === undefined || value.startsWith('-')) return undefined;
    args[key] = value;
  }
  return args;
}

export async function main(argv: string[], builtin: readonly AnyPlugin[] = builtinPlugins): Promise<void> {
  const fast = plainServe(argv);
  // The config is validated once, by serve: resolving it here too was 10% of the start's CPU.
  if (fast) return serve(fast, await findPlugins(['serve'], fast.config, builtin, false));
  const { default: yargs } = await import('yargs');
  const pre = yargs(argv).option('config', { type: 'string' }).help(false).version(false).parseSync();
  const words = pre._.map(String);
  const plugins = await findPlugins(words, pre.config, builtin);
  const cli = yargs(argv)
    .scriptName('wharf')
    .usage('$0 <command> [options]')
    .option('config', { type: 'string', describe: 'TOML config file (or WHARF_CONFIG); none = embedded defaults', global: true })
    .option('data-dir', { type: 'string', describe: 'Data directory (overrides server.data_dir)', global: true })
    .option('listen', { type: 'string', describe: 'HOST:PORT to listen on (overrides server.listen)', global: true })
    .option('json', { type: 'boolean', describe: 'Print results as JSON', global: true })
    .command('serve', 'Run the server', {}, (args) => serve(args as GlobalArgs, plugins))
    .command(
      'migrate <action>',
      'Show or apply database migrations',
      (y) => y.positional('action', { choices: ['status', 'up'] as const, demandOption: true }),
      async (args) => {
        const config = loadConfig(args, plugins);
        const { migrate, migrationSets, migrationStatus } = await import('../core/migrations.ts');
        const { data } = await openOrFail(config, false);
        try {
          const sets = migrationSets(config.order);
          const rows = args.action === 'up' ? await migrate(data, sets) : await migrationStatus(data, sets);
          if (args.json) {
            process.stdout.write(`${JSON.stringify(rows)}\n`);
          } else if (args.action === 'up') {
            process.stdout.write(rows.length ? rows.map((r) => `applied ${r.plugin}/${r.id}\n`).join('') : 'nothing to apply\n');
          } else {
            for (const r of rows) process.stdout.write(`${r.appliedAt ? 'applied' : 'pending'}  ${r.plugin}/${r.id}${r.appliedAt ? `  ${r.appliedAt}` : ''}\n`);
          }
        } catch (err) {
          fail((err as Error).message);
        } finally {
          await data.close();
        }
      },
    )
    .command(
      'backup <dest>',
      'Copy the database (online, while the server runs) and the keys into a new directory; --with-objects adds the embedded store',
      (y) =>
        y
          .positional('dest', { type: 'string', demandOption: true, describe: 'Directory to create (refused when it exists and is not empty)' })
          .option('force', { type: 'boolean', describe: 'Replace DEST when it exists and is not empty' })
          .option('with-objects', { type: 'boolean', describe: 'Copy the objects of the embedded fs store too' }),
      async (args) => {
        const config = loadConfig(args, plugins);
        const { backup, BackupError } = await import('../core/backup.ts');
        const storage = config.plugins.storage as StoragePluginConfig | undefined;
        const fsObjects =
          storage && driverOf(storage) === 'fs' ? path.resolve(storage.fs.objects_dir ?? path.join(config.core.server.data_dir, 'objects')) : undefined;
        // The embedded store's directory, when it has been used.
        const objectsDir = fsObjects && fs.existsSync(fsObjects) ? fsObjects : undefined;
        if (args.withObjects && !objectsDir)
          fail('--with-objects: no embedded fs store here (storage disabled, on s3, or never started): nothing to copy', EXIT_CONFIG);
        let result: Awaited<ReturnType<typeof backup>>;
        try {
          result = await backup({
            dataDir: config.core.server.data_dir,
            database: config.core.database,
            dest: String(args.dest),
            force: args.force,
            objectsDir: args.withObjects ? objectsDir : undefined,
          });
        } catch (err) {
          if (err instanceof BackupError) fail(err.message);
          throw err;
        }
        const db = result.database;
        const notIncluded = objectsDir && !result.objects ? `the embedded store's objects in ${objectsDir} (--with-objects copies them)` : undefined;
        if (args.json) {
          process.stdout.write(`${JSON.stringify({ ...result, ...(notIncluded ? { notIncluded: [notIncluded] } : {}) })}\n`);
          return;
        }
        const parts = [
          db.engine === 'sqlite' ? `database ${humanBytes(db.bytes)} (SQLite online backup)` : 'database not copied (PostgreSQL)',
          `keys ${count(result.keys.files, 'file')}${result.keys.files ? '' : ' (none: encrypted columns cannot be read back without them)'}`,
          ...(result.objects
            ? [
                `objects ${result.objects.objects} (${humanBytes(result.objects.bytes)})${result.objects.leftOut ? `, ${result.objects.leftOut} deleted during the backup left out` : ''}`,
              ]
            : []),
          ...(notIncluded ? [`not included: ${notIncluded}`] : []),
        ];
        process.stdout.write(`backup written to ${result.dest} in ${(result.ms / 1000).toFixed(1)} s: ${parts.join(', ')}\n`);
        if (db.engine === 'postgres') process.stdout.write(`the PostgreSQL database is not in it: back it up with ${db.pgDump}\n`);
      },
    )
    .command(
      'migrate-data',
      'Move this instance from its SQLite database into an empty PostgreSQL database (the server stopped; back up first)',
      (y) =>
        y.option('to', {
          type: 'string',
          demandOption: true,
          describe: 'The empty PostgreSQL database: postgres://USER:PASSWORD@HOST:PORT/DATABASE',
        }),
      async (args) => {
        const config = loadConfig(args, plugins);
        if (config.core.database.engine !== 'sqlite')
          fail('this instance already runs on PostgreSQL ([database] url): migrate-data moves a SQLite instance', EXIT_CONFIG);
        const { migrateData, MigrateDataError } = await import('../core/migrate-data.ts');
        let result: Awaited<ReturnType<typeof migrateData>>;
        try {
          result = await migrateData({
            source: config.core.database.path,
            dataDir: config.core.server.data_dir,
            to: String(args.to),
            plugins: config.order,
            connectTimeoutMs: config.core.database.connect_timeout_ms,
          });
        } catch (err) {
          if (err instanceof MigrateDataError) fail(err.message);
          throw err;
        }
        process.stdout.write(args.json ? `${JSON.stringify(result)}\n` : formatMigrateData(result));
      },
    )
    .command(
      'migrate-objects',
      "Copy the objects of this data dir's embedded store into the S3 store of [plugins.storage.s3] (after migrate-data; idempotent, run it again to resume)",
      (y) =>
        y
          .option('objects-dir', {
            type: 'string',
            describe: "The embedded store's directory (default: [plugins.storage.fs] objects_dir, else <data dir>/objects)",
          })
          .option('concurrency', { type: 'number', default: 4, describe: 'Objects copied at once' }),
      async (args) => {
        const config = loadConfig(args, plugins);
        const storage = config.plugins.storage as StoragePluginConfig | undefined;
        if (!storage) fail('the storage plugin is disabled in this config: migrate-objects copies into its S3 store');
        if (driverOf(storage) !== 's3')
          fail(
            'this config is on the embedded store (driver "fs"): give the config of the new instances, on the s3 driver ([plugins.storage.s3] endpoint, access_key, secret_key; driver = "s3")',
          );
        const concurrency = Number(args.concurrency);
        if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) fail('--concurrency must be a whole number from 1 to 64', EXIT_CONFIG);
        const dataDir = config.core.server.data_dir;
        const { migrateObjects, MigrateObjectsError } = await import('../plugins/storage/migrate-objects.ts');
        // Ctrl-C (or a kill) stops starting objects and abandons those under way; a second one ends at once.
        const stop = new AbortController();
        process.once('SIGINT', () => stop.abort());
        process.once('SIGTERM', () => stop.abort());
        let result: Awaited<ReturnType<typeof migrateObjects>>;
        try {
          result = await migrateObjects({
            objectsDir: args.objectsDir ?? storage.fs.objects_dir ?? path.join(dataDir, 'objects'),
            dataDir,
            s3: storage.s3,
            concurrency,
            signal: stop.signal,
            // The records to check: the new instances' database; never a SQLite file made here (the old data dir is only read).
            database:
              config.core.database.engine === 'postgres' || fs.existsSync(config.core.database.path)
                ? async () => (await import('../core/lifecycle.ts')).openData(config.core)
                : undefined,
          });
        } catch (err) {
          if (err instanceof MigrateObjectsError) fail(err.message);
          throw err;
        }
        process.stdout.write(args.json ? `${JSON.stringify(result)}\n` : formatMigrateObjects(result));
        if (result.interrupted) fail(`interrupted after ${count(result.copied, 'object')} copied: run the same command again to finish`);
        if (result.failed)
          fail(`${count(result.failed, 'object')} not copied (listed ${args.json ? 'in failures' : 'above'}): run the same command again to retry them`);
        if (result.records?.missing.length)
          fail(
            `${count(result.records.missing.length, 'file record')} of the database ${result.records.missing.length === 1 ? 'has' : 'have'} no object in the S3 store (listed ${args.json ? 'in records.missing' : 'above'}): the new instances cannot serve ${result.records.missing.length === 1 ? 'it' : 'them'}`,
          );
      },
    )
    .command('config', 'Configuration', (y) =>
      y
        .command(
          'check [file]',
          'Validate a config file, or the one --config/WHARF_CONFIG names, or the embedded defaults, with the WHARF_* variables, without starting anything',
          (c) => c.positional('file', { type: 'string', describe: 'TOML file (default: --config, WHARF_CONFIG, else the embedded defaults)' }),
          (args) => {
            const file = args.file ?? args.config ?? process.env.WHARF_CONFIG;
            const config = loadConfig(args, plugins, file);
            const env = Object.keys(process.env).filter((k) => k.startsWith('WHARF_') && k.includes('__')).length;
            const what = file ? path.basename(file) : 'embedded defaults';
            process.stdout.write(
              `${what}${env ? ` + ${count(env, 'WHARF_* variable')}` : ''}: ok (plugins: ${config.order.map((p) => p.name).join(', ') || 'none'})\n`,
            );
          },
        )
        .demandCommand(1, 'name a config command'),
    )
    .command('plugins', 'Plugins', (y) =>
      y
        .command('list', 'List the plugins (built in, and those of [plugins] dir) and whether the config enables them', {}, (args) => {
          const config = loadConfig(args as GlobalArgs, plugins);
          const enabled = new Set(config.order.map((p) => p.name));
          const rows = plugins.list.map((p) => ({
            name: p.name,
            enabled: enabled.has(p.name),
            dependsOn: [...(p.dependsOn ?? [])],
            description: p.description,
            source: plugins.sources.get(p.name) ?? 'built-in',
          }));
          if (args.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
          else {
            for (const r of rows) {
              const needs = r.dependsOn.length ? ` (needs ${r.dependsOn.join(', ')})` : '';
              const from = r.source === 'built-in' ? '' : ` [${r.source}]`;
              process.stdout.write(`${r.name.padEnd(12)} ${r.enabled ? 'enabled ' : 'disabled'}  ${r.description}${needs}${from}\n`);
            }
          }
        })
        .command(
          'new <name>',
          'Write a new plugin project (TypeScript, built with esbuild) that loads from [plugins] dir',
          (c) =>
            c
              .positional('name', { type: 'string', demandOption: true, describe: 'Plugin name: lowercase letters, digits and underscores' })
              .option('dir', { type: 'string', describe: 'Where to write it (default ./<name>)' }),
          async (args) => {
            const name = String(args.name);
            if (!/^[a-z][a-z0-9_]{0,39}$/.test(name))
              fail(`plugin name "${name}": 1 to 40 lowercase letters, digits and underscores, starting with a letter`, EXIT_CONFIG);
            if (plugins.list.some((p) => p.name === name)) fail(`plugin name "${name}" is taken by a plugin this wharf already has`, EXIT_CONFIG);
            const dir = path.resolve(args.dir ?? name);
            const { scaffoldPlugin } = await import('./plugin-template.ts');
            try {
              await scaffoldPlugin(name, dir);
            } catch (err) {
              fail((err as Error).message);
            }
            const rel = path.relative(process.cwd(), dir) || '.';
            process.stdout.write(
              `created ${rel}/: the ${name} plugin\n` +
                `  cd ${rel} && npm install && npm run build    # dist/${name}.mjs\n` +
                `  then copy dist/${name}.mjs into the directory [plugins] dir names (see ${rel}/README.md)\n`,
            );
          },
        )
        .demandCommand(1, 'name a plugins command'),
    )
    .command(
      'licenses',
      'Print the third-party notices: what this build bundles, under which licences (the binary is distributed under GPL-3.0 terms)',
      {},
      async () => {
        const { thirdPartyNotices } = await import('./licenses.ts');
        process.stdout.write(await thirdPartyNotices());
      },
    )
    .command('version', 'Print the versions of Wharf, Node and SQLite', {}, async (args) => {
      const v = await versions();
      process.stdout.write(args.json ? `${JSON.stringify(v)}\n` : `wharf ${v.wharf}\nnode ${v.node}\nsqlite ${v.sqlite}\n`);
    });
  addClientCommands(cli as unknown as Argv, { localInstance: (args) => loadCoreConfig(args as GlobalArgs).server.public_url });
  const absent = addPluginCommands(cli as unknown as Argv<GlobalArgs>, plugins);
  await cli
    .demandCommand(1, 'name a command (see wharf --help)')
    .strict()
    .version(pkg.version)
    .help()
    .alias('h', 'help')
    .fail((message, err) => {
      if (err) throw err;
      // A command of a plugin left out: disabled, or the config does not load (its error says why).
      const plugin = words[0] === undefined ? undefined : absent.get(words[0]);
      if (plugin && !plugins.enabled) loadConfig({ config: pre.config }, plugins);
      if (plugin) fail(`unknown command ${words[0]}: the ${plugin} plugin, which adds it, is not enabled (see wharf plugins list)`, EXIT_CONFIG);
      fail(`${message} (see wharf --help)`, EXIT_CONFIG);
    })
    .parseAsync();
}

/**
 * Runs the command line as a process: from source (below) and from the bundle and the single
 * executable (build/entry.ts).
 */
export function run(argv: string[]): void {
  // `wharf licenses | head`, `wharf files ls | less` quit early: a closed pipe ends the command quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  main(argv).catch((err) => fail(err instanceof Error ? (err.stack ?? err.message) : String(err)));
}

/** The arguments after node and the script (or the executable's path, twice in a single executable). */
export const commandLine = (): string[] => process.argv.slice(2);

if (import.meta.main) run(commandLine());
