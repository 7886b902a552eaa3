/**
 * Composes the Koa application from what the plugins returned: the core middleware, plugin
 * middleware by named priority, every route group, and the 404/405 fallback. It checks, collects and
 * composes; it handles no request itself except the health and metrics routes.
 */
import Koa from 'koa';
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from './api.ts';
import type { Registry } from 'prom-client';
import type { AuthRegistry } from './auth.ts';
import { groupFinder, jsonBodies, malformedAnswers, requestHandling } from './http.ts';
import type { MalformedAnswer, MalformedRequest } from './malformed.ts';
import type { Logger } from './logger.ts';
import type { RouteGroup } from './api.ts';
import { MIDDLEWARE_PRIORITIES, type PluginMiddleware } from './plugin.ts';
import { routesUnder } from './routing.ts';

export interface HttpAppParts {
  log: Logger;
  metrics: Registry;
  auth: AuthRegistry;
  /** The route registry: the core declares its health routes on it. */
  api: ApiRegistry;
  groups: readonly RouteGroup[];
  middleware: readonly PluginMiddleware[];
  trustProxy: boolean;
  metricsEnabled: boolean;
  /** Readiness of the database and every plugin, by name. */
  readiness(): Promise<Record<string, boolean>>;
  /** The OpenAPI document of the declared operations. */
  openapi(): Record<string, unknown>;
}

export interface HttpApp {
  app: Koa;
  /** The answer to a request Node's parser refused, in the envelope of its path (core/malformed.ts). */
  malformed(request: MalformedRequest): MalformedAnswer;
}

export function createHttpApp(parts: HttpAppParts): HttpApp {
  // Behind a proxy, only the address the proxy itself appended is believed: a client can put
  // anything in the X-Forwarded-For it sends.
  const app = new Koa({ proxy: parts.trustProxy, maxIpsCount: parts.trustProxy ? 1 : 0 });
  app.silent = true;
  jsonBodies(app);
  const rootLog = parts.log;
  Object.defineProperty(app.context, 'log', {
    configurable: true,
    get(this: Koa.Context) {
      const self = this as Koa.Context & { _log?: Logger };
      return (self._log ??= rootLog.child({ request_id: this.state.requestId }));
    },
  });

  const groups = [healthRoutes(parts), ...parts.groups];
  const groupFor = groupFinder(groups);
  // The core's own concerns (request id, credentials attached, log line, metrics, errors, 404/405)
  // are one step of the chain; the plugins' middleware follow by priority.
  const auth = parts.auth;
  app.use(
    requestHandling({
      log: rootLog,
      metrics: parts.metrics,
      groupFor,
      routers: groups.map((g) => g.router),
      attach: (ctx) => auth.attach(ctx),
    }),
  );
  const rank = (m: { priority?: keyof typeof MIDDLEWARE_PRIORITIES }) => MIDDLEWARE_PRIORITIES[m.priority ?? 'default'];
  for (const m of [...parts.middleware].sort((a, b) => rank(a) - rank(b))) app.use(m.fn);
  app.use(routesUnder(groups));
  return { app, malformed: malformedAnswers(groupFor, rootLog) };
}

function healthRoutes(parts: HttpAppParts): RouteGroup {
  const group = parts.api.group({ prefixes: ['/healthz', '/readyz', '/metrics', '/api/openapi.json'], envelope: 'plain' });
  const tag = 'Server';
  group.route({
    method: 'GET',
    path: '/healthz',
    summary: 'Liveness: the process answers',
    tag,
    auth: PUBLIC,
    success: { schema: z.lazy(() => z.object({ status: z.literal('ok') })) },
    handler(ctx) {
      ctx.body = { status: 'ok' };
    },
  });
  group.route({
    method: 'GET',
    path: '/readyz',
    summary: 'Readiness: the database and every plugin, by name',
    tag,
    auth: PUBLIC,
    success: { schema: z.lazy(() => z.object({ status: z.literal('ready'), checks: z.record(z.string(), z.boolean()) })) },
    errors: { 503: 'Not ready: `{error, checks}`' },
    async handler(ctx) {
      const checks = await parts.readiness();
      const ready = Object.values(checks).every(Boolean);
      ctx.status = ready ? 200 : 503;
      ctx.body = ready ? { status: 'ready', checks } : { error: 'not ready', checks };
    },
  });
  if (parts.metricsEnabled) {
    group.route({
      method: 'GET',
      path: '/metrics',
      summary: 'Prometheus metrics (text exposition format)',
      tag,
      auth: PUBLIC,
      success: { contentType: 'text/plain' },
      async handler(ctx) {
        ctx.type = parts.metrics.contentType;
        ctx.body = await parts.metrics.metrics();
      },
    });
  }
  group.route({
    method: 'GET',
    path: '/api/openapi.json',
    summary: 'This document',
    tag,
    auth: PUBLIC,
    handler(ctx) {
      ctx.body = parts.openapi();
    },
  });
  return group;
}
