/**
 * Composes the Koa application from what the plugins returned: the core middleware, plugin
 * middleware by priority, every route group, and the 404/405 fallback. It checks, collects and
 * composes; it handles no request itself except the health and metrics routes.
 */
import Router from '@koa/router';
import Koa from 'koa';
import type { Registry } from 'prom-client';
import type { AuthRegistry } from './auth.ts';
import { bodyParser, envelopeFinder, methodNotAllowed, requestHandling } from './http.ts';
import type { Logger } from './logger.ts';
import type { PluginMiddleware, RouteGroup } from './plugin.ts';

export interface HttpAppParts {
  log: Logger;
  metrics: Registry;
  auth: AuthRegistry;
  groups: readonly RouteGroup[];
  middleware: readonly PluginMiddleware[];
  bodyLimit: number;
  trustProxy: boolean;
  metricsEnabled: boolean;
  /** Readiness of the database and every plugin, by name. */
  readiness(): Promise<Record<string, boolean>>;
  /** The OpenAPI document of the declared operations. */
  openapi(): Record<string, unknown>;
}

/** Where the core's body parser sits among plugin middleware priorities. */
export const BODY_PARSER_PRIORITY = 500;
/** Where principal resolution is attached: before every plugin middleware. */
export const AUTH_PRIORITY = 0;

export function createHttpApp(parts: HttpAppParts): Koa {
  // Behind a proxy, only the address the proxy itself appended is believed: a client can put
  // anything in the X-Forwarded-For it sends.
  const app = new Koa({ proxy: parts.trustProxy, maxIpsCount: parts.trustProxy ? 1 : 0 });
  app.silent = true;
  const rootLog = parts.log;
  Object.defineProperty(app.context, 'log', {
    configurable: true,
    get(this: Koa.Context) {
      const self = this as Koa.Context & { _log?: Logger };
      return (self._log ??= rootLog.child({ request_id: this.state.requestId }));
    },
  });

  const groups = [healthRoutes(parts), ...parts.groups];
  const envelopeFor = envelopeFinder(groups);
  app.use(requestHandling({ log: rootLog, metrics: parts.metrics, envelopeFor }));
  app.use(methodNotAllowed(groups.map((g) => g.router)));

  const stack: PluginMiddleware[] = [
    { name: 'core:auth', priority: AUTH_PRIORITY, fn: parts.auth.middleware() },
    { name: 'core:body', priority: BODY_PARSER_PRIORITY, fn: bodyParser({ limit: parts.bodyLimit }) },
    ...parts.middleware,
  ].sort((a, b) => a.priority - b.priority);
  for (const m of stack) app.use(m.fn);
  // A request reaches only the routers whose prefixes it is under: every router otherwise tests
  // each of its routes against every request, and the messaging API alone has hundreds.
  for (const group of groups) app.use(routesUnder(group));
  return app;
}

function routesUnder(group: RouteGroup): Koa.Middleware {
  const routes = group.router.routes();
  const prefixes = group.prefixes.map((p) => p.replace(/\/+$/, '').toLowerCase());
  return function routeGroup(ctx, next) {
    const path = ctx.path.toLowerCase();
    const under = prefixes.some((p) => p === '' || path === p || path.startsWith(`${p}/`));
    return under ? routes(ctx as Parameters<typeof routes>[0], next) : next();
  };
}

function healthRoutes(parts: HttpAppParts): RouteGroup {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const checks = await parts.readiness();
    const ready = Object.values(checks).every(Boolean);
    ctx.status = ready ? 200 : 503;
    ctx.body = ready ? { status: 'ready', checks } : { error: 'not ready', checks };
  });
  if (parts.metricsEnabled) {
    router.get('/metrics', async (ctx) => {
      ctx.type = parts.metrics.contentType;
      ctx.body = await parts.metrics.metrics();
    });
  }
  router.get('/api/openapi.json', (ctx) => {
    ctx.body = parts.openapi();
  });
  return { prefixes: ['/healthz', '/readyz', '/metrics', '/api/openapi.json'], envelope: 'plain', router };
}
