/**
 * Dispatch to the route groups' routers. A request reaches only the routers of the groups whose
 * prefixes cover its path (core/paths.ts), in order, and one that matches no route passes it to
 * the next. A request whose exact path and method name a route without parameters goes straight
 * to that route's handler, without koa-router's per-request work (its host test, a regular
 * expression test per route, the chain of closures it composes for every match: about 3 µs of a
 * /healthz request, BENCHMARKS.md issue 16 part 7). A direct entry is worked out on the first
 * request for a route's literal path and method, not when the app is composed (asking every
 * router for every literal route was 3.5–4.6 ms of a start, issue 16 part 8), by asking the routers
 * themselves what they would run for that exact path and method; the answer is kept, "not direct"
 * included. A request takes the entry only where the answer is that one route alone, so it gets
 * what the routers would have given it. Every other request (another case, a trailing slash,
 * parameters, group middleware, 404 and 405) goes through the routers as before. Only the routes'
 * own literal paths are ever worked out and kept: what a request names cannot grow the cache.
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { coveringSets } from './paths.ts';

/** What koa-router's `Layer` offers that is read here (its type is not exported). */
interface RouteLayer {
  path: string | RegExp;
  methods: string[];
  paramNames: unknown[];
  stack: Koa.Middleware[];
  name?: string;
}

/** The part of a route group dispatch needs: its router and the path prefixes it owns. */
export interface Routed {
  router: Router;
  prefixes: readonly string[];
}

/** Options for tests: `direct: false` sends every request through the routers. */
export function routesUnder(groups: readonly Routed[], options: { direct?: boolean } = {}): Koa.Middleware {
  const routes = groups.map((group) => group.router.routes());
  const owners = coveringSets(groups.map((group) => group.prefixes));
  /** Dispatches to the owning groups' routers from the `from`-th on. */
  const dispatch = (ctx: Koa.Context, next: Koa.Next, owning: readonly number[], from: number): Promise<unknown> => {
    let i = from;
    const nextGroup = (): Promise<unknown> => {
      if (i === owning.length) return next();
      const group = routes[owning[i++]!]!;
      return group(ctx as Parameters<typeof group>[0], nextGroup) as Promise<unknown>;
    };
    return nextGroup();
  };
  const direct = options.direct === false ? new Map<string, Map<string, Literal>>() : literalRoutes(groups);
  return function routeGroups(ctx, next) {
    const path = ctx.path;
    const literal = direct.get(ctx.method)?.get(path);
    const hit = literal && (literal.direct === undefined ? workOut(literal, groups, owners, ctx.method, path) : literal.direct);
    if (hit) {
      const { layer, owning, after } = hit;
      // What koa-router sets on a match that a handler may read (the metrics read _matchedRoute,
      // declared routes params); not `matched`, `router` and `routeMatched`, which only its
      // allowedMethods reads (not used: core/http.ts answers 405).
      const context = ctx as Koa.Context & Record<string, unknown>;
      context.captures = [];
      const params = { ...(context.params as object) };
      (ctx.request as Koa.Request & { params?: object }).params = params;
      context.params = params;
      context.routerPath = layer.path;
      context.routerName = layer.name || undefined;
      context._matchedRoute = layer.path;
      // The route's handler; should it pass the request on, it goes to the next groups as from the router.
      return layer.stack[0]!(ctx, () => dispatch(ctx, next, owning, after));
    }
    return dispatch(ctx, next, owners(path.toLowerCase()), 0);
  };
}

interface Direct {
  layer: RouteLayer;
  /** The groups owning the path, and the position after the one whose router has the route. */
  owning: readonly number[];
  after: number;
}

/** A route's literal path under one method: the routes declaring it, and once worked out, its direct entry or null (not direct). */
interface Literal {
  layers: Set<RouteLayer>;
  direct?: Direct | null;
}

/** A route's path with no parameter, wildcard, optional part or escape: a literal path. */
const LITERAL = /^\/[A-Za-z0-9._~!$&'+,;=@%/-]*$/;

/** Method -> exact path -> the routes with that literal path (nothing asked of the routers yet: see workOut). */
function literalRoutes(groups: readonly Routed[]): Map<string, Map<string, Literal>> {
  const byMethod = new Map<string, Map<string, Literal>>();
  for (const group of groups) {
    for (const layer of group.router.stack as unknown as RouteLayer[]) {
      if (typeof layer.path !== 'string' || layer.paramNames.length > 0 || !LITERAL.test(layer.path)) continue;
      for (const method of layer.methods) {
        const paths = byMethod.get(method) ?? new Map<string, Literal>();
        byMethod.set(method, paths);
        const literal = paths.get(layer.path) ?? { layers: new Set() };
        paths.set(layer.path, literal);
        literal.layers.add(layer);
      }
    }
  }
  return byMethod;
}

/**
 * A literal path's direct entry, worked out on its first request and kept: the route the routers
 * would run for `method path` when that is one of the routes declaring this literal path, alone
 * (no middleware of the group, no other route first, no host test); otherwise null.
 */
function workOut(
  literal: Literal,
  groups: readonly Routed[],
  owners: (lowercasePath: string) => readonly number[],
  method: string,
  path: string,
): Direct | null {
  const found = whatRoutersRun(groups, owners, method, path);
  literal.direct = found && literal.layers.has(found.layer) && found.layer.stack.length === 1 ? found : null;
  return literal.direct;
}

/** What routeGroups would hand `method path` to: the one route layer the first matching router runs, or undefined. */
function whatRoutersRun(groups: readonly Routed[], owners: (lowercasePath: string) => readonly number[], method: string, path: string): Direct | undefined {
  const owning = owners(path.toLowerCase());
  for (let k = 0; k < owning.length; k++) {
    const router = groups[owning[k]!]!.router as Router & { opts: { host?: unknown; exclusive?: unknown } };
    if (router.opts.host !== undefined || router.opts.exclusive) return undefined;
    const match = router.match(path, method);
    if (!match.route) continue;
    const run = match.pathAndMethod as unknown as RouteLayer[];
    return run.length === 1 ? { layer: run[0]!, owning, after: k + 1 } : undefined;
  }
  return undefined;
}
