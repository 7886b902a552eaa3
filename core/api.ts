/**
 * One way to declare a route. A declaration names the method and path, the credential that may
 * call it, zod schemas for its path parameters, query and body, and the handler; from it the core
 *
 * 1. authorizes: 401 without a valid credential, 403 with one of another kind, before anything
 *    about the request is judged (the spec's order: a caller without the right credential never
 *    learns what the schema wants);
 * 2. reads the body (JSON or form, up to `server.body_limit_bytes`) and validates parameters,
 *    query and body, answering in the route group's envelope: 400 `{error}` on plain routes, 422
 *    `{success: false, message, errors}` on messaging routes;
 * 3. runs the handler with the parsed input and what the credential loaded;
 * 4. documents the operation in `GET /api/openapi.json`, so what is documented is what is enforced.
 *
 * A plugin gets a group from `ctx.api.group({prefixes, envelope})`, declares routes on it with
 * `group.route({...})` and returns the group in `routes`.
 */
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { type Principal, type PrincipalKind, requirePrincipal } from './auth.ts';
import { hasBody, readBody } from './body.ts';
import { type Envelope, type FieldErrors, WharfError } from './errors.ts';
import { refusal, validate } from './validate.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: the principal kinds that satisfy it and what the handler receives. The
 * plugin that owns a kind of caller declares its credentials once (the storage plugin's "dashboard
 * session", the sessions plugin's "personal access token") and its routes name them.
 */
export interface Credential<T = Principal> {
  /** Principal kinds accepted; `any` takes every kind (who-am-I routes). */
  kinds: readonly PrincipalKind[] | 'any';
  /** What a 403 says is needed: "This operation requires a <needs>". */
  needs: string;
  /** OpenAPI security scheme names (declared with `api.scheme`). */
  schemes: readonly string[];
  /** What a 401 says when the credential sent does not resolve (default "Invalid or expired credential"). */
  invalid?: string;
  /** Turns the principal into what the handler gets; may refuse (401, 403, 404) too. Default: the principal. */
  load?(ctx: Context, principal: Principal): T | Promise<T>;
}

/** Routes anyone may call (sign-in, discovery, token validation with the token in the body). */
export const PUBLIC = 'public';

type Out<T> = T extends z.ZodType ? z.output<T> : undefined;
/** Path parameters: what the schema makes of them, or the raw strings. */
type Params<T> = T extends z.ZodType ? z.output<T> : Record<string, string>;

export interface RouteInput<P, Q, B, A> {
  params: P;
  query: Q;
  body: B;
  /** What the credential loaded (the principal unless it has `load`); undefined on public routes. */
  auth: A;
}

export interface RouteSpec<P extends z.ZodType | undefined, Q extends z.ZodType | undefined, B extends z.ZodType | undefined, A> {
  method: Method;
  /** The full path, `:name` for a parameter (`/api/orgs/:org/members`). */
  path: string;
  summary: string;
  tag: string;
  auth: Credential<A> | typeof PUBLIC;
  /** Path parameters (strings in, whatever the schema makes of them out). */
  params?: P;
  query?: Q;
  body?: B;
  /** Request media types to document besides JSON (the body reader also parses forms). */
  bodyTypes?: readonly string[];
  success?: { status?: number; description?: string; schema?: z.ZodType; contentType?: string };
  /** Error statuses to document; credential and validation errors are added from the declaration. */
  errors?: Record<number, string>;
  handler(ctx: Context, input: RouteInput<Params<P>, Out<Q>, Out<B>, A>): unknown | Promise<unknown>;
}

type AnySpec = RouteSpec<z.ZodType | undefined, z.ZodType | undefined, z.ZodType | undefined, unknown>;

/** How each envelope writes what the declaration refuses, for the OpenAPI descriptions. */
const SHAPES: Readonly<Record<Envelope, { auth: string; invalid: [number, string] }>> = {
  plain: { auth: '`{error}`', invalid: [400, 'A missing or malformed parameter, query or body field: `{error}`'] },
  messaging: { auth: '`{success: false, message}`', invalid: [422, 'Validation failed: `{success: false, message, errors: {field: [messages]}}`'] },
};

export interface GroupOptions {
  /** Path prefixes the group owns: a request under them that matches no route answers 404/405 in its envelope. */
  prefixes: readonly string[];
  envelope: Envelope;
  /** What such a 404 says (default "Not found"). */
  notFound?: string;
}

/**
 * A route group: the path prefixes it owns (a request under one that matches no route answers 404,
 * or 405 with `Allow`, in the group's envelope), its envelope, and the routes declared on it.
 */
export class RouteGroup {
  /** @internal The core mounts it; plugins declare routes with `route()`. */
  readonly router = new Router();
  readonly prefixes: readonly string[];
  readonly envelope: Envelope;
  readonly notFound: string | undefined;
  readonly #registry: ApiRegistry;

  constructor(registry: ApiRegistry, options: GroupOptions) {
    this.#registry = registry;
    this.prefixes = options.prefixes;
    this.envelope = options.envelope;
    this.notFound = options.notFound;
  }

  /** Declares a route: mounted on this group's router and recorded for the OpenAPI document. */
  route<P extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined, B extends z.ZodType | undefined = undefined, A = Principal>(
    spec: RouteSpec<P, Q, B, A>,
  ): this {
    this.#registry.mount(this, spec as unknown as AnySpec);
    return this;
  }

  /** Middleware for every route of this group (after authorization, before the handler's input is read). */
  use(middleware: Middleware): this {
    this.router.use(middleware as never);
    return this;
  }
}

/** The registry of declared routes behind `/api/openapi.json`. One per app. */
export class ApiRegistry {
  readonly #operations: { group: RouteGroup; spec: AnySpec }[] = [];
  readonly #schemes = new Map<string, Record<string, unknown>>();
  readonly #bodyLimit: number;

  constructor(options: { bodyLimit: number }) {
    this.#bodyLimit = options.bodyLimit;
  }

  /** Declares a security scheme (an OpenAPI security scheme object). */
  scheme(name: string, definition: Record<string, unknown>): void {
    this.#schemes.set(name, definition);
  }

  /** A new route group: requests under `prefixes` that match no route answer 404/405 in `envelope`. */
  group(options: GroupOptions): RouteGroup {
    return new RouteGroup(this, options);
  }

  /** @internal Used by RouteGroup.route. */
  mount(group: RouteGroup, spec: AnySpec): void {
    this.#operations.push({ group, spec });
    const status = group.envelope === 'messaging' ? 422 : 400;
    const bodyLimit = this.#bodyLimit;
    const verb = spec.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    group.router[verb](spec.path, async function declaredRoute(ctx) {
      let auth: unknown;
      if (spec.auth !== PUBLIC) {
        const credential = spec.auth as Credential<unknown>;
        const principal = await requirePrincipal(ctx, credential.kinds === 'any' ? undefined : credential.kinds, credential.needs, credential.invalid);
        auth = credential.load ? await credential.load(ctx, principal) : principal;
      }
      // Without a body there is nothing to read: no promise to wait for (most GETs).
      const body = hasBody(ctx) ? await readBody(ctx, bodyLimit) : 'none';
      // A body of a type the route does not take (text/plain JSON, say) is refused by name, not
      // reported as missing fields.
      if (body === 'unread' && spec.body && !(spec.bodyTypes ?? []).some((type) => type === '*/*' || ctx.request.is(type))) {
        throw new WharfError(
          'unsupported_media_type',
          `Send the body as application/json${spec.bodyTypes?.length ? ` or ${spec.bodyTypes.join(', ')}` : ''} (Content-Type was ${ctx.get('content-type') || 'missing'})`,
        );
      }
      const params = spec.params ? validate(spec.params, ctx.params, { status }) : ctx.params;
      const query = spec.query ? validate(spec.query, strictQuery(ctx, status), { status }) : undefined;
      const input = spec.body ? validate(spec.body, ctx.request.body, { status }) : undefined;
      await spec.handler(ctx, { params, query, body: input, auth });
    });
  }

  /** Every declared operation, as `METHOD /path` with `{param}` placeholders. */
  operations(): { method: Method; path: string; envelope: Envelope; spec: AnySpec }[] {
    return this.#operations.map(({ group, spec }) => ({ method: spec.method, path: openPath(spec.path), envelope: group.envelope, spec }));
  }

  /** The OpenAPI 3.1 document of every operation declared so far. */
  document(info: { title: string; version: string; description?: string; serverUrl: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const { group, spec } of this.#operations) {
      const path = openPath(spec.path);
      const parameters: Record<string, unknown>[] = [];
      const paramSchemas = spec.params ? properties(spec.params) : undefined;
      for (const name of [...spec.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!)) {
        parameters.push({ name, in: 'path', required: true, schema: paramSchemas?.properties?.[name] ?? { type: 'string' } });
      }
      if (spec.query) {
        const json = properties(spec.query);
        for (const [name, schema] of Object.entries(json.properties ?? {})) {
          parameters.push({ name, in: 'query', required: json.required?.includes(name) ?? false, schema });
        }
      }
      const successType = spec.success?.contentType ?? 'application/json';
      const responses: Record<string, unknown> = {
        [String(spec.success?.status ?? 200)]: {
          description: spec.success?.description ?? 'Success',
          ...(spec.success?.schema
            ? { content: { [successType]: { schema: toSchema(spec.success.schema, 'output') } } }
            : spec.success?.contentType
              ? { content: { [successType]: {} } }
              : {}),
        },
      };
      const shape = SHAPES[group.envelope];
      if (spec.auth !== PUBLIC) {
        responses['401'] = { description: `Missing or invalid credential: ${shape.auth}` };
        if (spec.auth.kinds !== 'any')
          responses['403'] = { description: `Valid credential of another kind (this operation needs a ${spec.auth.needs}): ${shape.auth}` };
      }
      if (spec.params || spec.query || spec.body) responses[String(shape.invalid[0])] = { description: shape.invalid[1] };
      for (const [code, description] of Object.entries(spec.errors ?? {})) responses[code] = { description };
      const bodySchema = spec.body ? toSchema(spec.body, 'input') : undefined;
      (paths[path] ??= {})[spec.method.toLowerCase()] = {
        summary: spec.summary,
        tags: [spec.tag],
        operationId: operationId(spec.method, path),
        security: spec.auth === PUBLIC ? [] : spec.auth.schemes.map((name) => ({ [name]: [] })),
        // The shape of this operation's error bodies: `plain` is {error}, `messaging` is
        // {success: false, message, errors?} (and `error` too for what a handler refuses).
        'x-error-envelope': group.envelope,
        ...(parameters.length ? { parameters } : {}),
        ...(bodySchema
          ? {
              requestBody: {
                required: true,
                content: Object.fromEntries(['application/json', ...(spec.bodyTypes ?? [])].map((type) => [type, { schema: bodySchema }])),
              },
            }
          : {}),
        responses,
      };
    }
    return {
      openapi: '3.1.0',
      info: { title: info.title, version: info.version, ...(info.description ? { description: info.description } : {}) },
      servers: [{ url: info.serverUrl }],
      paths,
      components: { securitySchemes: Object.fromEntries(this.#schemes) },
    };
  }
}

function openPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function operationId(method: Method, path: string): string {
  return `${method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`;
}

function properties(schema: z.ZodType): { properties?: Record<string, unknown>; required?: string[] } {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, unknown>; required?: string[] };
}

function toSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

/**
 * The request's query parameters, refused (400 naming the parameter) when one is not valid
 * percent-encoded UTF-8: Node's parser would turn `%FF` into U+FFFD silently, and a search for
 * that would match names holding the replacement character.
 */
function strictQuery(ctx: Context, status: 400 | 422 | undefined): Record<string, unknown> {
  const raw = ctx.querystring;
  if (raw.includes('%')) {
    for (const pair of raw.split('&')) {
      try {
        decodeURIComponent(pair.replace(/\+/g, ' '));
      } catch {
        const eq = pair.indexOf('=');
        const name = safeName(eq < 0 ? pair : pair.slice(0, eq));
        const message = `${name}: must be UTF-8, percent-encoded`;
        const fields: FieldErrors = Object.create(null);
        fields[name] = [message];
        throw refusal(fields, message, status);
      }
    }
  }
  return ctx.query;
}

/** A parameter's name for a message: decoded when it can be, at most 64 characters. */
function safeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' ')).slice(0, 64);
  } catch {
    return 'a query parameter';
  }
}
