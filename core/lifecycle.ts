/**
 * The life of a server: (config already validated) prepare the data dir, load keys, open the
 * database, migrate, set plugins up in dependency order, compose the HTTP app, listen. If a
 * plugin fails to set up, the ones already set up are closed in reverse and the error names the
 * plugin. Closing drains HTTP first, then closes plugins last-in-first-out, then the database.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type Koa from 'koa';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { createHttpApp } from './app.ts';
import { ApiRegistry } from './api.ts';
import { AuthRegistry } from './auth.ts';
import type { AnyPlugin, ResolvedConfig } from './config.ts';
import { type Database, type MigrationSet, migrate, openDatabase } from './db.ts';
import { type Keys, loadKeys, prepareDataDir } from './keys.ts';
import { createLogger, type Logger } from './logger.ts';
import type { RouteGroup } from './api.ts';
import type { PluginInstance, PluginMiddleware, Services } from './plugin.ts';

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
  /** Stop accepting, drain, close plugins in reverse order, close the database. Idempotent. */
  close(): Promise<void>;
}

export interface StartOptions {
  /** Bind the HTTP server (the tests drive `app.callback()` without it). */
  listen?: boolean;
  log?: Logger;
}

/** Migration sets of the enabled plugins, in setup order. */
export function migrationSets(order: readonly AnyPlugin[]): MigrationSet[] {
  return order.filter((p) => p.migrations?.length).map((p) => ({ plugin: p.name, migrations: p.migrations! }));
}

export async function start(config: ResolvedConfig, options: StartOptions = {}): Promise<Running> {
  const { core } = config;
  const log = options.log ?? createLogger(core.log.level);
  try {
    prepareDataDir(core.server.data_dir);
  } catch (err) {
    throw new BootError((err as Error).message, { cause: err });
  }
  const keys = loadKeys(core.server.data_dir);
  let db: Database;
  try {
    db = openDatabase(core.database.path, { busyTimeoutMs: core.database.busy_timeout_ms });
  } catch (err) {
    throw new BootError(`cannot open database ${core.database.path}: ${(err as Error).message}`, { cause: err });
  }

  const started: { plugin: AnyPlugin; instance: PluginInstance }[] = [];
  const closePlugins = async () => {
    for (const { plugin, instance } of started.splice(0).reverse()) {
      try {
        await instance.close?.();
      } catch (err) {
        log.error({ err, plugin: plugin.name }, 'plugin close failed');
      }
    }
  };

  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics, prefix: 'wharf_' });
  const auth = new AuthRegistry();
  const api = new ApiRegistry({ bodyLimit: core.server.body_limit_bytes });
  const services: Partial<Record<string, unknown>> = {};
  try {
    try {
      migrate(db, migrationSets(config.order));
    } catch (err) {
      throw new BootError(`database migration failed: ${(err as Error).message}`, { cause: err });
    }
    for (const plugin of config.order) {
      const deps = new Set(plugin.dependsOn ?? []);
      let instance: PluginInstance;
      try {
        instance = await plugin.setup({
          name: plugin.name,
          config: config.plugins[plugin.name] ?? {},
          core,
          db,
          log: log.child({ plugin: plugin.name }),
          keys,
          auth,
          api,
          metrics,
          use(name) {
            if (!deps.has(name)) throw new Error(`plugin ${plugin.name} uses "${String(name)}" without declaring it in dependsOn`);
            return services[name] as never;
          },
        });
      } catch (err) {
        throw new BootError(`plugin "${plugin.name}" failed to start: ${(err as Error).message}`, { cause: err });
      }
      started.push({ plugin, instance });
      if (instance.service !== undefined) services[plugin.name] = instance.service;
    }
  } catch (err) {
    await closePlugins();
    db.close();
    throw err;
  }

  const app = createHttpApp({
    log,
    metrics,
    auth,
    api,
    groups: started.flatMap((s) => s.instance.routes ?? []) as RouteGroup[],
    middleware: started.flatMap((s) => s.instance.middleware ?? []) as PluginMiddleware[],
    trustProxy: core.server.trust_proxy,
    metricsEnabled: core.server.metrics,
    openapi: () =>
      api.document({
        title: 'Wharf API',
        version: '1.0.0',
        description: 'File storage (apps, tokens, files, uploads) and the messaging gateway (sessions, messages, webhooks), one server.',
        serverUrl: core.server.public_url,
      }),
    async readiness() {
      const checks: Record<string, boolean> = {};
      try {
        checks.database = db.prepare('SELECT 1 AS ok').get() !== undefined;
      } catch {
        checks.database = false;
      }
      for (const { plugin, instance } of started) {
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

  let server: http.Server | undefined;
  const sockets = new Set<Socket>();
  if (options.listen) {
    const { headers_timeout_ms: headersTimeout, request_timeout_ms: requestTimeout } = core.server;
    server = http.createServer(
      {
        headersTimeout: Math.min(headersTimeout, requestTimeout),
        requestTimeout,
        // Node checks these timeouts on an interval (30 s by default): check often enough that
        // they hold to within a fraction of the shorter one.
        connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(Math.min(headersTimeout, requestTimeout) / 4))),
      },
      app.callback(),
    );
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(core.server.port, core.server.host, () => {
          server!.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const reason = code === 'EADDRINUSE' ? 'address already in use' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
      await closePlugins();
      db.close();
      throw new BootError(`cannot listen on ${core.server.listen}: ${reason}`, { cause: err });
    }
  }

  let closing: Promise<void> | undefined;
  const running: Running = {
    config,
    api,
    app,
    db,
    keys,
    log,
    services: services as Partial<Services>,
    notices: started.flatMap((s) => s.instance.notices ?? []),
    server,
    url: server ? baseUrl(server.address() as AddressInfo) : undefined,
    close: () =>
      (closing ??= (async () => {
        if (server) await drain(server, sockets, core.server.shutdown_timeout_ms);
        await closePlugins();
        db.close();
      })()),
  };
  return running;
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
