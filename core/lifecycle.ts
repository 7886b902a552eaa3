/**
 * The life of a server: (config already validated) prepare the data dir, load keys, open the
 * database, migrate, set plugins up in dependency order, compose the HTTP app, listen, start the
 * plugins' timers. If a plugin fails to set up, the ones already set up are closed in reverse and
 * the error names the plugin. Closing drains HTTP first, then stops the timers, then closes
 * plugins last-in-first-out, then the database.
 */
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import type Koa from 'koa';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { createHttpApp, type HttpApp } from './app.ts';
import { ApiRegistry, RouteGroup } from './api.ts';
import { AuthRegistry } from './auth.ts';
import type { AnyPlugin, CoreConfig, ResolvedConfig } from './config.ts';
import type { Database, DbHandle } from './db.ts';
import { openPostgres } from './db-postgres.ts';
import { SqliteDb, openSqlite } from './db-sqlite.ts';
import { migrate, migrationSets } from './migrations.ts';
import { keysMismatch } from './keys-check.ts';
import { type Keys, loadKeys, prepareDataDir } from './keys.ts';
import { createLogger, type Logger } from './logger.ts';
import { answerMalformed } from './malformed.ts';
import { writeServePid } from './serve-pid.ts';
import { MIDDLEWARE_PRIORITIES, type PluginInstance, type Services } from './plugin.ts';
import { Timers } from './timers.ts';

/** A start-up failure: one line for the operator, exit code 1. */
export class BootError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BootError';
  }
}

export interface Running {
  config: ResolvedConfig;
  /** Operations declared with schemas (the OpenAPI document). */
  api: ApiRegistry;
  app: Koa;
  /** The data layer (SQLite or PostgreSQL). */
  data: DbHandle;
  /** The synchronous SQLite connection; on PostgreSQL any use throws. */
  db: Database;
  keys: Keys;
  log: Logger;
  /** Lines the plugins want the operator to read (printed by `serve`). */
  notices: string[];
  /** Services of the plugins, by name. */
  services: Partial<Services>;
  /** The HTTP server, when `listen` was asked for. */
  server?: http.Server;
  /** Base URL of the listening server (the bound port, not the configured public URL). */
  url?: string;
  /** Stop accepting, drain, stop the timers, close plugins in reverse order, close the database. Idempotent. */
  close(): Promise<void>;
}

export interface StartOptions {
  /** Bind the HTTP server (the tests drive `app.callback()` without it). */
  listen?: boolean;
  log?: Logger;
}

/**
 * Starts a server from a validated config, in named steps: open the data dir (keys, database),
 * migrate, set the plugins up, compose the HTTP app, listen, start the timers. A step that fails
 * closes what the earlier ones opened and throws a BootError naming what failed.
 */
export async function start(config: ResolvedConfig, options: StartOptions = {}): Promise<Running> {
  const { core } = config;
  const log = options.log ?? createLogger(core.log.level);
  refuseUnported(config);
  const { data, keys } = await openDataDir(core, log);
  const db = syncConnection(data);
  const kernel = createKernel(core);
  const plugins = new StartedPlugins(log);
  const shutDown = async () => {
    await kernel.timers.stop();
    await plugins.close();
    await data.close();
  };
  try {
    await migrateEnabled(data, config.order);
    await checkKeys(data, keys, core.server.data_dir);
    await setUpPlugins(config, { data, db, keys, log, kernel }, plugins);
    const { app, malformed } = composeHttp(config, { data, log, kernel }, plugins);
    const listening = options.listen ? await listen(app, core, malformed) : undefined;
    // Commands that must not run beside this server (`wharf migrate-data`) look for it.
    const forgetPid = listening ? writeServePid(core.server.data_dir, listening.url) : undefined;
    kernel.timers.start();
    let closing: Promise<void> | undefined;
    return {
      config,
      api: kernel.api,
      app,
      data,
      db,
      keys,
      log,
      services: plugins.services as Partial<Services>,
      notices: plugins.list.flatMap((s) => s.instance.notices ?? []),
      server: listening?.server,
      url: listening?.url,
      close: () =>
        (closing ??= (async () => {
          try {
            if (listening) await drain(listening.server, listening.sockets, core.server.shutdown_timeout_ms);
            await shutDown();
          } finally {
            forgetPid?.();
          }
        })()),
    };
  } catch (err) {
    await shutDown();
    throw err;
  }
}

/** What the core itself provides to every plugin: metrics, credentials, routes, timers. */
interface Kernel {
  metrics: Registry;
  auth: AuthRegistry;
  api: ApiRegistry;
  timers: Timers;
}

function createKernel(core: CoreConfig): Kernel {
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics, prefix: 'wharf_' });
  return { metrics, auth: new AuthRegistry(), api: new ApiRegistry({ bodyLimit: core.server.body_limit_bytes }), timers: new Timers() };
}

/** On PostgreSQL, an enabled plugin whose store is not ported to the data layer stops the start. */
export function refuseUnported(config: ResolvedConfig): void {
  if (config.core.database.engine !== 'postgres') return;
  const unported = config.order.find((p) => !p.engines?.includes('postgres'));
  if (unported) throw new BootError(`plugin ${unported.name} does not run on PostgreSQL yet; disable it or use SQLite`);
}

/** Opens the configured database: one line for the operator when it cannot. */
export async function openData(core: CoreConfig, log?: Logger): Promise<DbHandle> {
  const { database } = core;
  if (database.engine === 'postgres') {
    try {
      return await openPostgres(database.url!, {
        poolSize: database.pool_size,
        connectTimeoutMs: database.connect_timeout_ms,
        onIdleError: (err) => log?.warn({ err }, 'a PostgreSQL connection failed; the pool replaces it'),
      });
    } catch (err) {
      throw new BootError((err as Error).message, { cause: err });
    }
  }
  try {
    return openSqlite(database.path, {
      busyTimeoutMs: database.busy_timeout_ms,
      checkpoint: {
        mode: database.checkpoints,
        startAt: database.checkpoint_worker_commits,
        onReady: () => log?.info('the WAL checkpoints of the database run in a worker thread from now on'),
        onFallback: (err) => log?.warn({ err }, 'the WAL checkpoints of the database run on the event loop again: their worker thread failed'),
      },
    });
  } catch (err) {
    throw new BootError(`cannot open database ${database.path}: ${(err as Error).message}`, { cause: err });
  }
}

/** The synchronous SQLite connection of contract 1.0 plugins; on PostgreSQL a stand-in that says why it is not there. */
export function syncConnection(data: DbHandle): Database {
  if (data instanceof SqliteDb) {
    // Each use first commits the data layer's group of transactions waiting for the end of the turn.
    return new Proxy(data.raw, {
      get(target, key) {
        const value = Reflect.get(data.settled(), key, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }
  return new Proxy({} as Database, {
    get(_target, key) {
      throw new Error(`ctx.db (the SQLite connection) is not available on PostgreSQL (used: db.${String(key)}); use ctx.data`);
    },
  });
}

/**
 * What commands open (`wharf migrate`, a plugin's command): the data dir and the database,
 * checked like a start; migrated unless `migrateNow` is false. Throws a BootError.
 */
export async function openForCommand(config: ResolvedConfig, migrateNow = true): Promise<{ data: DbHandle; db: Database }> {
  refuseUnported(config);
  try {
    prepareDataDir(config.core.server.data_dir);
  } catch (err) {
    throw new BootError((err as Error).message, { cause: err });
  }
  const data = await openData(config.core);
  if (migrateNow) {
    try {
      await migrateEnabled(data, config.order);
    } catch (err) {
      await data.close();
      throw err;
    }
  }
  return { data, db: syncConnection(data) };
}

/** Step 1: the data dir (created 0700), its keys and the database. */
async function openDataDir(core: CoreConfig, log: Logger): Promise<{ data: DbHandle; keys: Keys }> {
  try {
    prepareDataDir(core.server.data_dir);
  } catch (err) {
    throw new BootError((err as Error).message, { cause: err });
  }
  const keys = loadKeys(core.server.data_dir);
  return { data: await openData(core, log), keys };
}

/** Step 2: every pending migration of the enabled plugins, in one transaction. */
async function migrateEnabled(data: DbHandle, order: readonly AnyPlugin[]): Promise<void> {
  try {
    await migrate(data, migrationSets(order));
  } catch (err) {
    throw new BootError(`database migration failed: ${(err as Error).message}`, { cause: err });
  }
}

/** Step 2b: the data dir's keys are the database's (core/keys-check.ts). */
async function checkKeys(data: DbHandle, keys: Keys, dataDir: string): Promise<void> {
  const mismatch = await keysMismatch(data, keys);
  if (mismatch) {
    throw new BootError(
      `the keys in ${path.join(dataDir, 'keys')} are not this database's (${mismatch}): it was set up with other keys; copy keys/ from an instance of this database (see Deployment: several instances in the README)`,
    );
  }
}

/** The plugins set up so far, their services by name, and their closing in reverse. */
class StartedPlugins {
  readonly list: { plugin: AnyPlugin; instance: PluginInstance }[] = [];
  readonly services: Record<string, unknown> = Object.create(null);
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
  }

  add(plugin: AnyPlugin, instance: PluginInstance): void {
    this.list.push({ plugin, instance });
    if (instance.service !== undefined) this.services[plugin.name] = instance.service;
  }

  /** Closes every plugin set up, last first; a failing close is logged and the others still close. */
  async close(): Promise<void> {
    for (const { plugin, instance } of this.list.splice(0).reverse()) {
      try {
        await instance.close?.();
      } catch (err) {
        this.#log.error({ err, plugin: plugin.name }, 'plugin close failed');
      }
    }
  }
}

/** Step 3: each enabled plugin's setup, dependencies first. */
async function setUpPlugins(
  config: ResolvedConfig,
  shared: { data: DbHandle; db: Database; keys: Keys; log: Logger; kernel: Kernel },
  plugins: StartedPlugins,
): Promise<void> {
  const { data, db, keys, kernel } = shared;
  for (const plugin of config.order) {
    const deps = new Set(plugin.dependsOn ?? []);
    const log = shared.log.child({ plugin: plugin.name });
    let instance: PluginInstance;
    try {
      instance = await plugin.setup({
        name: plugin.name,
        config: config.plugins[plugin.name] ?? {},
        core: config.core,
        data,
        db,
        log,
        keys,
        auth: kernel.auth,
        api: kernel.api,
        metrics: kernel.metrics,
        use(name) {
          if (!deps.has(name)) throw new Error(`plugin ${plugin.name} uses "${String(name)}" without declaring it in dependsOn`);
          return plugins.services[name] as never;
        },
        every: (name, ms, fn) => kernel.timers.every(plugin.name, log, name, ms, fn),
      });
      checkInstance(instance);
    } catch (err) {
      throw new BootError(`plugin "${plugin.name}" failed to start: ${(err as Error).message}`, { cause: err });
    }
    plugins.add(plugin, instance);
  }
}

/** What `setup` returned, checked where a plugin written in plain JavaScript could get it wrong. */
function checkInstance(instance: PluginInstance): void {
  if (typeof instance !== 'object' || instance === null) throw new Error('setup must return an object ({ routes?, middleware?, service?, close? })');
  for (const m of instance.middleware ?? []) {
    const priority: string | undefined = m.priority;
    if (priority !== undefined && (priority === 'credentials' || !Object.hasOwn(MIDDLEWARE_PRIORITIES, priority))) {
      throw new Error(`middleware "${m.name}" has priority ${JSON.stringify(m.priority)}; use one of limits, guards, default`);
    }
  }
  for (const group of instance.routes ?? []) {
    if (!(group instanceof RouteGroup)) throw new Error('routes must be groups made with ctx.api.group()');
  }
}

/** Step 4: the Koa app of every plugin's routes and middleware, and the health routes. */
function composeHttp(config: ResolvedConfig, shared: { data: DbHandle; log: Logger; kernel: Kernel }, plugins: StartedPlugins): HttpApp {
  const { core } = config;
  const { data, kernel } = shared;
  return createHttpApp({
    log: shared.log,
    metrics: kernel.metrics,
    auth: kernel.auth,
    api: kernel.api,
    groups: plugins.list.flatMap((s) => s.instance.routes ?? []),
    middleware: plugins.list.flatMap((s) => s.instance.middleware ?? []),
    trustProxy: core.server.trust_proxy,
    metricsEnabled: core.server.metrics,
    openapi: () =>
      kernel.api.document({
        title: 'Wharf API',
        version: '1.0.0',
        description: 'File storage (apps, tokens, files, uploads) and the messaging gateway (sessions, messages, webhooks), one server.',
        serverUrl: core.server.public_url,
      }),
    async readiness() {
      const checks: Record<string, boolean> = {};
      try {
        checks.database = await data.ping();
      } catch {
        checks.database = false;
      }
      for (const { plugin, instance } of plugins.list) {
        if (!instance.ready) continue;
        try {
          checks[plugin.name] = await instance.ready();
        } catch {
          checks[plugin.name] = false;
        }
      }
      return checks;
    },
  });
}

interface Listening {
  server: http.Server;
  sockets: Set<Socket>;
  url: string;
}

/** How long an idle keep-alive connection stays open. */
const KEEP_ALIVE_MS = 65_000;

/** Step 5: bind the HTTP server, with the header and request timeouts. */
async function listen(app: Koa, core: CoreConfig, malformed: HttpApp['malformed']): Promise<Listening> {
  const { headers_timeout_ms: headersTimeout, request_timeout_ms: requestTimeout } = core.server;
  const server = http.createServer(
    {
      headersTimeout: Math.min(headersTimeout, requestTimeout),
      requestTimeout,
      // Node checks these timeouts on an interval (30 s by default): check often enough that
      // they hold to within a fraction of the shorter one.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(Math.min(headersTimeout, requestTimeout) / 4))),
    },
    app.callback(),
  );
  // Idle keep-alive connections stay open longer than the idle timeouts of common load balancers
  // and clients (60 s): whoever reuses a connection must not meet Node's default of 5 s closing it
  // under them (a proxy answers 502, a client "other side closed").
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  answerMalformed(server, malformed);
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(core.server.port, core.server.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'EADDRINUSE' ? 'address already in use' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new BootError(`cannot listen on ${core.server.listen}: ${reason}`, { cause: err });
  }
  return { server, sockets, url: baseUrl(server.address() as AddressInfo) };
}

function baseUrl(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** Stop accepting; close idle keep-alive connections; give in-flight requests until the timeout. */
async function drain(server: http.Server, sockets: Set<Socket>, timeoutMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => {
    server.closeAllConnections();
    for (const socket of sockets) socket.destroy();
  }, timeoutMs);
  timer.unref();
  // Idle connections that become idle after their last response must close too.
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  sweep.unref();
  await closed;
  clearTimeout(timer);
  clearInterval(sweep);
}
