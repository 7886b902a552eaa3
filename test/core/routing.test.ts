import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Koa from 'koa';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApiRegistry, PUBLIC, type RouteGroup } from '../../core/api.ts';
import { groupFinder, jsonBodies, requestHandling } from '../../core/http.ts';
import { createLogger } from '../../core/logger.ts';
import { routesUnder } from '../../core/routing.ts';

/**
 * The same route groups served twice: with the direct entries for literal paths (as the server
 * runs) and with every request through koa-router. Each request must get the same answer from
 * both, the first time (when a literal path's entry is worked out) and the next (when it is
 * kept); a literal path's entry must not ask a router once worked out, and must not be worked
 * out before its first request.
 */
function groups(): RouteGroup[] {
  const api = new ApiRegistry({ bodyLimit: 1024 });
  const answer = (name: string) => (ctx: Koa.Context) => {
    ctx.body = { name, route: (ctx as { _matchedRoute?: string })._matchedRoute, params: ctx.params };
  };
  const route = (group: RouteGroup, method: 'GET' | 'POST' | 'DELETE', path: string, name: string, params?: z.ZodType) =>
    group.route({ method, path, summary: name, tag: 't', auth: PUBLIC, ...(params ? { params } : {}), handler: answer(name) });

  const a = api.group({ prefixes: ['/a'], envelope: 'plain' });
  // A parameter route declared before a literal one it also matches: the router runs it first.
  route(a, 'GET', '/a/:id', 'a by id', z.object({ id: z.string() }));
  route(a, 'GET', '/a/search', 'a search (shadowed)');
  route(a, 'POST', '/a/search', 'a search post');
  route(a, 'GET', '/a/static/list', 'a list');
  route(a, 'DELETE', '/a/static/list', 'a list delete');
  route(a, 'GET', '/a/Mixed.Case', 'a mixed case');
  // The same literal path in a later group that owns it too: the first group's router answers.
  const everywhere = api.group({ prefixes: ['/'], envelope: 'plain' });
  route(everywhere, 'GET', '/a/static/list', 'everywhere list (second)');
  route(everywhere, 'GET', '/root/only', 'root only');
  // A literal path of a later group that an earlier owning group's parameter route matches alone.
  route(everywhere, 'GET', '/a/other', 'everywhere other (shadowed by a by id)');
  // A group with its own middleware: its routes stay with the router.
  const m = api.group({ prefixes: ['/m'], envelope: 'messaging' });
  m.use(async (ctx, next) => {
    ctx.set('X-Group', 'm');
    await next();
  });
  route(m, 'GET', '/m/x', 'm x');
  // A route whose handler passes the request on: it reaches the next owning group.
  const p = api.group({ prefixes: ['/p'], envelope: 'plain' });
  p.router.get('/p/pass', (_ctx, next) => next());
  const q = api.group({ prefixes: ['/p'], envelope: 'plain' });
  route(q, 'GET', '/p/pass', 'q pass');
  return [a, everywhere, m, p, q];
}

const requests: [method: string, path: string][] = [
  ['GET', '/a/static/list'],
  ['HEAD', '/a/static/list'],
  ['DELETE', '/a/static/list'],
  ['POST', '/a/static/list'],
  ['PUT', '/a/static/list'],
  ['GET', '/a/static/list/'],
  ['GET', '/A/Static/List'],
  ['GET', '/a/static/list?x=1&y=%20'],
  ['GET', '/a/static'],
  ['GET', '/a/search'],
  ['POST', '/a/search'],
  ['GET', '/a/other'],
  ['GET', '/a/some-id'],
  ['GET', '/a/some%20id'],
  ['GET', '/a/Mixed.Case'],
  ['GET', '/a/mixed.case'],
  ['GET', '/a/MixedxCase'],
  ['GET', '/root/only'],
  ['HEAD', '/root/only'],
  ['POST', '/root/only'],
  ['GET', '/root/only/'],
  ['GET', '/m/x'],
  ['DELETE', '/m/x'],
  ['GET', '/p/pass'],
  ['GET', '/nowhere'],
  ['GET', '/a/static/list/more'],
];

interface Served {
  url: string;
  server: http.Server;
  /** Calls of the routers' `match`. */
  matches: number;
}

async function serve(direct: boolean): Promise<Served> {
  const all = groups();
  const served = { matches: 0 } as Served;
  for (const group of all) {
    const match = group.router.match.bind(group.router);
    group.router.match = (path: string, method: string) => {
      served.matches++;
      return match(path, method);
    };
  }
  const app = new Koa();
  app.silent = true;
  jsonBodies(app);
  const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
  app.use(
    requestHandling({
      log: createLogger('info', discard),
      metrics: new Registry(),
      groupFor: groupFinder(all),
      routers: all.map((g) => g.router),
      attach: () => {},
    }),
  );
  app.use(routesUnder(all, { direct }));
  served.server = http.createServer(app.callback());
  await new Promise<void>((resolve) => served.server.listen(0, '127.0.0.1', resolve));
  served.url = `http://127.0.0.1:${(served.server.address() as AddressInfo).port}`;
  return served;
}

let direct: Served;
let routers: Served;
beforeAll(async () => {
  direct = await serve(true);
  routers = await serve(false);
});
afterAll(() => {
  direct.server.close();
  routers.server.close();
});

async function answer(served: Served, method: string, path: string) {
  const res = await fetch(served.url + path, { method });
  const headers = Object.fromEntries([...res.headers].filter(([name]) => name !== 'date' && name !== 'x-request-id'));
  return { status: res.status, headers, body: await res.text() };
}

describe('literal routes answered without the routers answer as the routers do', () => {
  it('asks no router before the first request (the entries are worked out on demand)', () => {
    expect(direct.matches).toBe(0);
  });

  it.each(requests)('%s %s, first and second time', async (method, path) => {
    const expected = await answer(routers, method, path);
    expect(await answer(direct, method, path)).toStrictEqual(expected);
    expect(await answer(direct, method, path)).toStrictEqual(expected);
  });

  it('answers the exact literal paths without asking a router once worked out, and everything else through them', async () => {
    /** The routers' `match` calls for a request on `served`. */
    const asked = async (served: Served, method: string, path: string) => {
      const before = served.matches;
      await answer(served, method, path);
      return served.matches - before;
    };
    // The requests above worked every literal path's entry out. Taken directly: a literal route
    // that its group's router runs alone, under any method it has.
    for (const [method, path] of [
      ['GET', '/a/static/list'],
      ['HEAD', '/a/static/list'],
      ['DELETE', '/a/static/list'],
      ['GET', '/a/static/list?x=1'],
      ['POST', '/a/search'],
      ['GET', '/root/only'],
      ['HEAD', '/root/only'],
    ] as const) {
      expect(await asked(routers, method, path), `${method} ${path} through the routers`).toBeGreaterThan(0);
      expect(await asked(direct, method, path), `${method} ${path}`).toBe(0);
    }
    // Through the routers, exactly as often as without the entries (so "not direct" is kept, not
    // worked out again): another case or a trailing slash, a parameter route first, group
    // middleware, a method the route lacks (405 asks them all), no route.
    for (const [method, path] of [
      ['GET', '/A/static/list'],
      ['GET', '/a/static/list/'],
      ['GET', '/a/search'],
      ['GET', '/a/other'],
      ['GET', '/m/x'],
      ['PUT', '/a/static/list'],
      ['GET', '/nowhere'],
    ] as const) {
      const expected = await asked(routers, method, path);
      expect(expected, `${method} ${path} through the routers`).toBeGreaterThan(0);
      expect(await asked(direct, method, path), `${method} ${path}`).toBe(expected);
    }
    // A direct route whose handler passes the request on: only the next owning group's router is asked.
    expect(await asked(direct, 'GET', '/p/pass')).toBe(1);
  });

  it("works a literal path's entry out on its first request, once", async () => {
    const fresh = await serve(true);
    try {
      expect(fresh.matches).toBe(0);
      /** The routers' `match` calls for a request on `fresh`, whose answer must be the routers'. */
      const asked = async (method: string, path: string) => {
        const before = fresh.matches;
        expect(await answer(fresh, method, path)).toStrictEqual(await answer(routers, method, path));
        return fresh.matches - before;
      };
      // Direct: the first request asks the routers (working the entry out), the next ones do not.
      expect(await asked('GET', '/root/only')).toBeGreaterThan(0);
      expect(await asked('GET', '/root/only')).toBe(0);
      // Not direct (a parameter route declared first): worked out once, then only the routing asks.
      const firstTime = await asked('GET', '/a/search');
      expect(await asked('GET', '/a/search')).toBeLessThan(firstTime);
    } finally {
      fresh.server.close();
    }
  });

  it('gives the route label and parameters the metrics and handlers read', async () => {
    const res = await fetch(`${direct.url}/a/static/list`);
    expect(await res.json()).toStrictEqual({ name: 'a list', route: '/a/static/list', params: {} });
    const shadowed = await fetch(`${direct.url}/a/search`);
    expect(await shadowed.json()).toStrictEqual({ name: 'a by id', route: '/a/:id', params: { id: 'search' } });
  });
});
