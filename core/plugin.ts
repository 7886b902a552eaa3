/**
 * The plugin contract. A plugin declares its name, what it depends on, a strict config schema,
 * its migrations and its commands; `setup` receives a context and returns what the plugin adds
 * to the running server. The core checks, collects and composes; it knows no plugin by name.
 */
import type { Middleware } from 'koa';
import type { Argv } from 'yargs';
import type { z } from 'zod';
import type { ApiRegistry, PUBLIC, RouteGroup } from './api.ts';
import type { AuthRegistry } from './auth.ts';
import type { ConstraintError, Database, DatabaseEngine, Db } from './db.ts';
import type { Keys } from './keys.ts';
import type { Logger } from './logger.ts';
import type { Registry } from 'prom-client';
import type { CoreConfig } from './core-config.ts';
import type { WharfError } from './errors.ts';

/**
 * A problem a plugin's `validate` finds in its section: the key inside the section (`oidc.issuer`;
 * empty for the section as a whole) and what is wrong, as the end of one line for the operator.
 */
export interface ConfigProblem {
  key: string;
  message: string;
}

/**
 * A schema change; never edited once shipped. All pending ones run in one transaction at start.
 * Exactly one of: `sql` (the same for both engines), `sqlite` and `postgres` (one each), `apply`
 * (async code on the data layer), or `up` (contract 1.0: synchronous code on the SQLite
 * connection; only for a plugin that does not declare `engines` with postgres).
 */
export interface Migration {
  /** Unique within the plugin (a duplicate is refused when plugins load) and sortable: `001-create-users`. */
  id: string;
  sql?: string;
  sqlite?: string;
  postgres?: string;
  /** Since contract 1.1. Use only `db` inside; it is the migration's transaction. */
  apply?(db: Db): Promise<void>;
  /** Contract 1.0: runs synchronously on the SQLite connection. */
  up?(db: Database): void;
}

/**
 * Services that plugins export, keyed by plugin name. A plugin adds itself by augmenting this
 * interface, so `ctx.use('identity')` is typed:
 *
 * ```ts
 * declare module '../../core/plugin.ts' { interface Services { identity: IdentityService } }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: empty on purpose, augmented by plugins.
export interface Services {}

/**
 * Where middleware runs, by name, earliest first. Every stage runs inside the core's request
 * handling (request id, log line, the error writer) and before the routes; none sees a parsed
 * body (a declared route reads it after authorizing). Within a stage, middleware runs in plugin
 * setup order.
 *
 * - `credentials`: the core attaches credential resolution (lazy: nothing is resolved until a
 *   route or a stage below asks).
 * - `limits`: refuse a flooding caller before anything else judges its request, so every
 *   refusal further down (401, 403, 404, 413) already carries the rate-limit headers.
 * - `guards`: refuse a request for where it comes from (the cross-site request guard).
 * - `default`: anything else.
 */
export const MIDDLEWARE_PRIORITIES = Object.freeze({ credentials: 0, limits: 10, guards: 20, default: 100 });
export type MiddlewarePriority = Exclude<keyof typeof MIDDLEWARE_PRIORITIES, 'credentials'>;

export interface PluginMiddleware {
  name: string;
  /** Where it runs (see MIDDLEWARE_PRIORITIES); default `default`. */
  priority?: MiddlewarePriority;
  fn: Middleware;
}

/** What the core hands each plugin's `setup`. */
export interface PluginContext<C> {
  name: string;
  /** This plugin's section of the config, validated and frozen. */
  config: Readonly<C>;
  /** The core's own settings (listen address, public URL, data dir). */
  core: Readonly<CoreConfig>;
  /**
   * The data layer (since contract 1.1): async, on SQLite or PostgreSQL, whichever `[database]`
   * names. A plugin that declares `engines: ['sqlite', 'postgres']` uses only this.
   */
  data: Db;
  /**
   * The synchronous SQLite connection (contract 1.0), for plugins not yet ported to `data`. On
   * PostgreSQL there is none: any use throws.
   */
  db: Database;
  log: Logger;
  keys: Keys;
  auth: AuthRegistry;
  /** Operations declared with schemas: validation and the OpenAPI document. */
  api: ApiRegistry;
  metrics: Registry;
  /** The service of a plugin this one declared in `dependsOn`. */
  use<K extends keyof Services>(name: K): Services[K];
  /**
   * Runs `fn` every `ms` milliseconds once the server has started; a throw or a rejection is
   * logged with `name`; a run does not start while the previous one is still going; the timer
   * stops when the server closes (before this plugin's `close`, after a run in progress ends).
   */
  every(name: string, ms: number, fn: () => unknown): void;
}

/** What a plugin adds to the running server. */
export interface PluginInstance<S = unknown> {
  /** What dependents get from `ctx.use(name)`. */
  service?: S;
  /** Route groups made with `ctx.api.group()`, their routes declared with `group.route()`. */
  routes?: RouteGroup[];
  middleware?: PluginMiddleware[];
  /** Readiness for `GET /readyz`; a false answer or a throw makes the server not ready. */
  ready?(): boolean | Promise<boolean>;
  /** Lines for the operator, printed on stderr once the server listens (a first-start setup link, say). */
  notices?: string[];
  /** Called after HTTP has drained, in reverse setup order. */
  close?(): void | Promise<void>;
}

/** What a command handler gets: the parsed arguments and a way to reach the server's state. */
export interface CommandContext {
  /** Loads the config (from `--config`, `WHARF_*` and flags), opens the database and applies migrations. */
  open(): Promise<{
    config: CoreConfig;
    plugins: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
    /** The data layer (since contract 1.1). */
    data: Db;
    /** The synchronous SQLite connection (contract 1.0); on PostgreSQL any use throws. */
    db: Database;
    keys: Keys;
    close(): Promise<void>;
  }>;
  /** Prints a result: JSON under `--json`, otherwise the text. */
  print(text: string, json?: unknown): void;
}

/**
 * A command a plugin adds to `wharf`. Declared on the plugin itself, not returned by `setup`,
 * so that `wharf --help` can list it without starting anything.
 */
export interface PluginCommand {
  /** yargs command string, for example `create-user` or `upload <file>`. */
  command: string;
  /** The command group it belongs to (`admin`, `files`, ...); omitted = top level. */
  group?: string;
  describe: string;
  builder?(yargs: Argv): Argv;
  /** Returns the exit code (0 when omitted). */
  handler(args: Record<string, unknown>, ctx: CommandContext): Promise<number | undefined>;
}

export interface Plugin<C extends Record<string, unknown> = Record<string, unknown>, S = unknown> {
  /** Equals its TOML section key: `[plugins.<name>]`. Lowercase. */
  name: string;
  /** One line for `wharf plugins list`. */
  description: string;
  /** Plugins that must be enabled and set up first. */
  dependsOn?: readonly string[];
  /** Strict config schema (a `z.strictObject` whose fields all have defaults or are optional). */
  config: z.ZodObject;
  /**
   * The database engines the plugin's store runs on (since contract 1.1). Default `['sqlite']`:
   * the plugin uses the synchronous `ctx.db`, and with `[database] url` on PostgreSQL the server
   * refuses to start while it is enabled. A plugin that lists `postgres` uses only `ctx.data`.
   */
  engines?: readonly DatabaseEngine[];
  /** Whether the plugin runs when its section does not say `enabled`. Default true. */
  enabledByDefault?: boolean;
  /**
   * Rules across keys that the schema cannot say (`mode = "oidc"` needs an issuer), checked with
   * the whole config, when the plugin is enabled: `wharf config check` and `serve` refuse the
   * config with one line per problem (exit 2), before anything starts.
   */
  validate?(config: Readonly<C>, core: Readonly<CoreConfig>): readonly ConfigProblem[] | undefined;
  migrations?: readonly Migration[];
  commands?: readonly PluginCommand[];
  setup(ctx: PluginContext<C>): PluginInstance<S> | Promise<PluginInstance<S>>;
}

/** Declares a plugin with its config type inferred from its schema. */
export function definePlugin<Schema extends z.ZodObject, S = unknown>(
  plugin: Omit<Plugin<z.output<Schema>, S>, 'config'> & { config: Schema },
): Plugin<z.output<Schema>, S> {
  return plugin;
}

/**
 * The version of this contract, `MAJOR.MINOR`. A plugin loaded from `[plugins] dir` declares the
 * version it was built against; the core refuses another major version, and a newer minor one
 * (it may use what this core does not have). Raise the minor version when the contract gains
 * something, the major one when a plugin built before would break.
 *
 * 1.1: the async data layer (`ctx.data`, `Db`), `engines`, migrations as `sql`, `sqlite` +
 * `postgres` or `apply(db)`; `CommandContext.open()` gives `data` and an async `close`.
 */
export const PLUGIN_CONTRACT = '1.1';

/**
 * What the core hands a plugin built outside this repository, before anything else: the
 * runtime values its declaration needs. They are the core's own instances: a schema made with
 * this `z` is one the core's validation and OpenAPI document understand, an error thrown as this
 * `WharfError` is answered with its code's status in the route group's envelope.
 */
export interface PluginKit {
  /** The contract version of the core that loads the plugin. */
  contract: string;
  z: typeof z;
  WharfError: typeof WharfError;
  /** `auth` of a route anyone may call. */
  PUBLIC: typeof PUBLIC;
  /** Declares the plugin with its config type inferred from its schema (the `definePlugin` of built-in plugins). */
  plugin: typeof definePlugin;
  /** What the data layer throws for a unique or foreign-key violation, on either engine (since 1.1). */
  ConstraintError: typeof ConstraintError;
}

/** What the module of a plugin in `[plugins] dir` default-exports (wharf-plugin's `definePlugin` makes it). */
export interface ExternalPlugin {
  /** The contract version the plugin was built against (`1.0`). */
  contract: string;
  /** Called once when the plugin loads, with the core's kit; returns the declaration. */
  // biome-ignore lint/suspicious/noExplicitAny: a plugin of any config type.
  define(kit: PluginKit): Plugin<any, any>;
}
