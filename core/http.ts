/**
 * The core's HTTP middleware: request ids, the request log line and metrics, errors written in
 * the envelope of the route group a path belongs to, JSON bodies, and the 404/405 fallback.
 */
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Context, Next } from 'koa';
import type { Registry } from 'prom-client';
import { type Envelope, formatters, rateLimitBody, toWharfError, WharfError } from './errors.ts';
import { httpMetrics } from './http-metrics.ts';
import type { MalformedAnswer, MalformedRequest } from './malformed.ts';
import { accessLogger, type Logger } from './logger.ts';
import { longestPrefix } from './paths.ts';
import type { RouteGroup } from './api.ts';

declare module 'koa' {
  interface Request {
    /** The parsed JSON or form body; undefined when the request has none or another type. */
    body?: unknown;
    /** The exact bytes of a JSON body, for signature checks. */
    rawBody?: Buffer;
  }
  interface DefaultState {
    requestId: string;
  }
  interface ExtendableContext {
    /** A logger bound to this request's id. */
    log: Logger;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Picks the route group a path belongs to: the longest prefix it is under (core/paths.ts). */
export function groupFinder(groups: readonly Pick<RouteGroup, 'prefixes' | 'envelope' | 'notFound'>[]) {
  const groupOf = longestPrefix(groups.flatMap((g) => g.prefixes.map((prefix) => [prefix, g] as const)));
  const none: Pick<RouteGroup, 'envelope' | 'notFound'> = { envelope: 'plain', notFound: undefined };
  return function groupFor(path: string): Pick<RouteGroup, 'envelope' | 'notFound'> {
    return groupOf(path) ?? none;
  };
}

const MALFORMED_CODES = { 400: 'bad_request', 408: 'request_timeout', 413: 'payload_too_large', 431: 'headers_too_large' } as const;

/**
 * The answer to a request Node's parser refused (core/malformed.ts): the error in the envelope of
 * the path it named (the plain one when none could be read), with a request id, as every other.
 */
export function malformedAnswers(groupFor: (path: string) => Pick<RouteGroup, 'envelope'>, log: Logger) {
  return function answer({ status, path, reason, message }: MalformedRequest): MalformedAnswer {
    const requestId = randomUUID();
    const err = new WharfError(MALFORMED_CODES[status], message);
    log.debug({ request_id: requestId, status, path, reason }, 'request refused by the HTTP parser');
    return {
      status: err.status,
      headers: { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': requestId },
      body: JSON.stringify(formatters[path === undefined ? 'plain' : groupFor(path).envelope](err, requestId)),
    };
  };
}

/**
 * Outermost middleware: request id, credential resolution attached (lazily, see core/auth.ts), one
 * log line per request, metrics, the 404/405 fallback and the error writer. Everything thrown
 * below it is answered here, in the envelope of the path's route group. One Koa step instead of
 * one per concern: each step of the chain costs every request a bound function, a promise and an
 * async frame (BENCHMARKS.md, issue 16 part 6).
 */
export function requestHandling(options: {
  log: Logger;
  metrics: Registry;
  groupFor: (path: string) => Pick<RouteGroup, 'envelope' | 'notFound'>;
  /** Every router, for the methods a path is known under (405 with `Allow`). */
  routers: readonly Router[];
  /** Attaches the request's credential resolution (`ctx.state.authenticate`) before anything below runs. */
  attach(ctx: Context): void;
}) {
  const { groupFor, routers, attach } = options;
  const access = accessLogger(options.log);
  const recordRequest = httpMetrics(options.metrics);

  return async function handleRequest(ctx: Context, next: Next) {
    const started = performance.now();
    // Node's headers and response directly: Koa's ctx.get and ctx.set go through delegates and
    // build arrays for one header (BENCHMARKS.md, issue 16 part 7). Koa's get answers '' for a
    // missing header, and its set does nothing once headers are sent, which they are not yet.
    const incoming = ctx.req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.res.setHeader('X-Request-Id', requestId);
    try {
      attach(ctx);
      await next();
      if (ctx.status === 404 && ctx.body == null) throw notFoundOrNotAllowed(ctx, routers, groupFor);
    } catch (thrown) {
      const err = toWharfError(thrown);
      // A bug (500) is an error with its stack; a dependency that is down (503: a store, a network)
      // is expected from time to time and says why in one line; a refusal is the caller's.
      if (err.status === 500) ctx.log.error({ err: thrown, code: err.code }, 'request failed');
      else if (err.status > 500) ctx.log.warn({ code: err.code, message: err.message, cause: causeOf(thrown) }, 'request answered unavailable');
      else ctx.log.debug({ code: err.code, message: err.message }, 'request refused');
      writeError(ctx, err, groupFor(ctx.path).envelope);
    } finally {
      const ms = performance.now() - started;
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const method = ctx.req.method!;
      const status = ctx.res.statusCode;
      recordRequest(method, route, status, ms / 1000);
      access({ requestId, method, path: ctx.path, status, durationMs: Math.round(ms * 10) / 10 });
    }
    jsonAsText(ctx);
  };
}

/**
 * JSON bodies without Koa's body type tests. Koa's setter and its response writer test every
 * body against stream, ReadableStream, Blob and Response, and the first `instanceof Response`
 * loads Node's internal fetch (undici): 25 ms of the first request's CPU in a start-up profile
 * (BENCHMARKS.md, issue 16). For a plain object or array the setter here does exactly what
 * Koa's JSON branch does (status 200 unless one was set, no Content-Length, type json unless a
 * JSON type was set); anything else, and a body replacing a stream (which Koa destroys), goes
 * through Koa's setter. {@link jsonAsText} then hands Koa the JSON text.
 */
export function jsonBodies(app: Koa): void {
  const proto = Object.getPrototypeOf(app.response) as object;
  const koaBody = Object.getOwnPropertyDescriptor(proto, 'body');
  if (!koaBody?.get || !koaBody.set) throw new Error("Koa's response has no body accessor");
  const { get, set } = koaBody;
  Object.defineProperty(app.response, 'body', {
    configurable: true,
    enumerable: koaBody.enumerable,
    get,
    set(this: Koa.Response & { _body?: unknown; _explicitStatus?: boolean }, value: unknown) {
      const previous = this._body;
      if (!isJsonValue(value) || (previous !== null && typeof previous === 'object' && typeof (previous as { pipe?: unknown }).pipe === 'function')) {
        set.call(this, value);
        return;
      }
      this._body = value;
      if (!this._explicitStatus) this.status = 200;
      if (this.headerSent) return;
      this.res.removeHeader('Content-Length');
      // Koa's `this.type = 'json'` looks the type up in mime-types at every call: the same value.
      if (!this.type || !/\bjson\b/i.test(this.type)) this.res.setHeader('Content-Type', JSON_TYPE);
    },
  });
}

/** What Koa's `type = 'json'` sets (test/core/json-bodies.test.ts compares the answers with Koa's). */
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * At the end of the outermost middleware: a plain object or array body becomes its JSON text, as
 * Koa's writer would make it (the same bytes, Content-Length its byte length), so the writer
 * takes its string branch. Left to Koa when the response is not Koa's to write or has no type.
 */
export function jsonAsText(ctx: Context): void {
  const response = ctx.response as Koa.Response & { _body?: unknown };
  const body = response._body;
  const res = ctx.res;
  if (!isJsonValue(body) || ctx.respond === false || res.headersSent || !res.hasHeader('Content-Type')) return;
  const text = JSON.stringify(body);
  // What Koa's setter does with a string when the type is set and the status explicit (the JSON
  // setter made it so), without its delegates and body type tests.
  if (typeof text !== 'string') {
    ctx.body = text;
    return;
  }
  response._body = text;
  if (!res.hasHeader('Transfer-Encoding')) res.setHeader('Content-Length', Buffer.byteLength(text));
}

function isJsonValue(value: unknown): value is object {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The message of what caused an error, when it has a cause (no stack). */
function causeOf(thrown: unknown): string | undefined {
  const cause = (thrown as { cause?: unknown })?.cause;
  return cause instanceof Error ? cause.message : undefined;
}

/** Writes an error in the given envelope; 429 uses its own shape everywhere. */
function writeError(ctx: Context, err: WharfError, envelope: Envelope): void {
  // Headers set by the failed handler (a Content-Disposition, say) must not leak into the error.
  for (const name of ['content-disposition', 'content-encoding', 'etag', 'last-modified']) ctx.remove(name);
  ctx.status = err.status;
  ctx.body = err.code === 'rate_limited' ? rateLimitBody(err) : formatters[envelope](err, ctx.state.requestId);
  if (err.retryAfter !== undefined) ctx.set('Retry-After', String(err.retryAfter));
  for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, value);
}

/**
 * What a request no route answered gets: 405 with `Allow` when some route knows its path under
 * another method, otherwise 404 in its group's words.
 */
function notFoundOrNotAllowed(ctx: Context, routers: readonly Router[], groupFor: (path: string) => Pick<RouteGroup, 'notFound'>): WharfError {
  const allowed = new Set<string>();
  for (const router of routers) {
    for (const layer of router.match(ctx.path, ctx.method).path) {
      for (const method of layer.methods) allowed.add(method);
    }
  }
  if (allowed.size === 0) return new WharfError('not_found', groupFor(ctx.path).notFound ?? 'Not found');
  if (allowed.has('GET')) allowed.add('HEAD');
  const allow = [...allowed].sort().join(', ');
  return new WharfError('method_not_allowed', `Method ${ctx.method} is not allowed here (allowed: ${allow})`, { headers: { Allow: allow } });
}

/**
 * `Content-Disposition` for a file name of any characters (RFC 6266 / 8187): a plain ASCII
 * `filename`, plus `filename*` in UTF-8 when the name is not plain ASCII.
 */
export function contentDisposition(kind: 'inline' | 'attachment', fileName: string | null): string {
  if (!fileName) return kind;
  const ascii = fileName.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(fileName).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return ascii === fileName ? `${kind}; filename="${ascii}"` : `${kind}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
