/**
 * Operations declared once, with zod schemas, that both validate requests and describe the API
 * (`GET /api/openapi.json`). A plugin calls `ctx.api.route(router, spec, handler)`: the
 * handler receives the parsed body and query, so what is documented is what is enforced.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { validate } from './validate.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OperationSpec<B extends z.ZodType | undefined, Q extends z.ZodType | undefined> {
  method: Method;
  /** Koa-router path, `:name` for parameters, relative to the router's prefix. */
  path: string;
  summary: string;
  tag: string;
  /** Security schemes that may call it (names registered with `scheme`), or [] for public. */
  security: readonly string[];
  body?: B;
  query?: Q;
  /**
   * Runs before validation: the credential check, so a caller without the right credential
   * gets 401 or 403 whatever its body (the spec's order), never a 422 that probes the schema.
   */
  authorize?: (ctx: Context) => unknown | Promise<unknown>;
  /** Status a validation failure answers: 400 for the file-storage API, 422 for messaging. */
  invalidStatus?: 400 | 422;
  /** Documented success status and body. */
  success?: { status?: number; description?: string; schema?: z.ZodType };
  /** Documented error statuses. */
  errors?: Record<number, string>;
}

type Parsed<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface OperationInput<B, Q> {
  body: B;
  query: Q;
  params: Record<string, string>;
}

interface Recorded {
  method: Method;
  path: string;
  spec: OperationSpec<z.ZodType | undefined, z.ZodType | undefined>;
}

/** The registry behind `/api/openapi.json`. One per app. */
export class ApiRegistry {
  readonly #operations: Recorded[] = [];
  readonly #schemes = new Map<string, Record<string, unknown>>();

  /** Declares a security scheme (an OpenAPI security scheme object). */
  scheme(name: string, definition: Record<string, unknown>): void {
    this.#schemes.set(name, definition);
  }

  /**
   * Records the description of an operation whose route validates with these same schemas
   * itself (the file-storage routes, which answer the spec's 400s in their own order).
   */
  describe(spec: OperationSpec<z.ZodType | undefined, z.ZodType | undefined>): void {
    this.#operations.push({ method: spec.method, path: spec.path, spec });
  }

  /** Mounts an operation on `router` (validation, then `handler`) and records its description. */
  route<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(
    router: Router,
    spec: OperationSpec<B, Q>,
    handler: (ctx: Context, input: OperationInput<Parsed<B>, Parsed<Q>>) => unknown | Promise<unknown>,
  ): void {
    const prefix = (router as unknown as { opts?: { prefix?: string } }).opts?.prefix ?? '';
    this.#operations.push({ method: spec.method, path: prefix + spec.path, spec: spec as Recorded['spec'] });
    const invalidStatus = spec.invalidStatus ?? 400;
    const verb = spec.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    router[verb](spec.path, async (ctx) => {
      if (spec.authorize) await spec.authorize(ctx);
      const body = spec.body ? validate(spec.body, ctx.request.body, { status: invalidStatus }) : undefined;
      const query = spec.query ? validate(spec.query, ctx.query, { status: invalidStatus }) : undefined;
      await handler(ctx, { body, query, params: ctx.params as Record<string, string> } as OperationInput<Parsed<B>, Parsed<Q>>);
    });
  }

  /** The OpenAPI 3.1 document of every operation declared so far. */
  document(info: { title: string; version: string; description?: string; serverUrl: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const { method, path, spec } of this.#operations) {
      const openPath = path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const params = [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
      const queryParams: Record<string, unknown>[] = [];
      if (spec.query) {
        const json = z.toJSONSchema(spec.query, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, schema] of Object.entries(json.properties ?? {})) {
          queryParams.push({ name, in: 'query', required: json.required?.includes(name) ?? false, schema });
        }
      }
      const responses: Record<string, unknown> = {
        [String(spec.success?.status ?? 200)]: {
          description: spec.success?.description ?? 'Success',
          ...(spec.success?.schema ? { content: { 'application/json': { schema: toSchema(spec.success.schema, 'output') } } } : {}),
        },
      };
      for (const [status, description] of Object.entries(spec.errors ?? {})) responses[status] = { description };
      (paths[openPath] ??= {})[method.toLowerCase()] = {
        summary: spec.summary,
        tags: [spec.tag],
        operationId: `${method.toLowerCase()}${openPath.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
        security: spec.security.map((name) => ({ [name]: [] })),
        ...(params.length || queryParams.length ? { parameters: [...params, ...queryParams] } : {}),
        ...(spec.body ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(spec.body, 'input') } } } } : {}),
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

function toSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}
