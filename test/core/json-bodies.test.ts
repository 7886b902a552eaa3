import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import Koa from 'koa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonAsText, jsonBodies } from '../../core/http.ts';

/** Each case sets a response the way a handler would; both apps must answer it byte for byte alike. */
const cases: Record<string, (ctx: Koa.Context) => void> = {
  object: (ctx) => {
    ctx.body = { status: 'ok' };
  },
  array: (ctx) => {
    ctx.body = [1, 'two', { three: 3 }];
  },
  'status set first': (ctx) => {
    ctx.status = 201;
    ctx.body = { id: 'x' };
  },
  'status set after': (ctx) => {
    ctx.body = { id: 'x' };
    ctx.status = 202;
  },
  'a JSON type set first': (ctx) => {
    ctx.type = 'application/problem+json';
    ctx.body = { title: 'no' };
  },
  'another type set first': (ctx) => {
    ctx.type = 'text/plain';
    ctx.body = { a: 1 };
  },
  'Content-Length set first': (ctx) => {
    ctx.set('Content-Length', '3');
    ctx.body = { a: 1 };
  },
  'null prototype': (ctx) => {
    ctx.body = Object.assign(Object.create(null), { a: 1 });
  },
  'replaces a string': (ctx) => {
    ctx.body = 'text first';
    ctx.body = { a: 1 };
  },
  'replaces a stream': (ctx) => {
    ctx.body = Readable.from(['never sent']);
    ctx.body = { a: 1 };
  },
  'a Date (not a plain object)': (ctx) => {
    ctx.body = new Date(0);
  },
  'a class instance': (ctx) => {
    ctx.body = new (class Thing {
      a = 1;
    })();
  },
  'a Buffer': (ctx) => {
    ctx.body = Buffer.from('bytes');
  },
  'null after an object': (ctx) => {
    ctx.body = { a: 1 };
    ctx.body = null;
  },
  'an empty status after an object': (ctx) => {
    ctx.body = { a: 1 };
    ctx.status = 204;
  },
  'Content-Type removed after': (ctx) => {
    ctx.body = { a: 1 };
    ctx.remove('Content-Type');
  },
  'Transfer-Encoding set': (ctx) => {
    ctx.set('Transfer-Encoding', 'chunked');
    ctx.body = { a: 'chunked' };
  },
  unicode: (ctx) => {
    ctx.body = { text: 'héllo ✓ 𝄞' };
  },
};

function serve(app: Koa): Promise<{ server: http.Server; url: string }> {
  app.use((ctx) => cases[decodeURIComponent(ctx.path.slice(1))]!(ctx));
  const server = http.createServer(app.callback());
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

let koa: Awaited<ReturnType<typeof serve>>;
let ours: Awaited<ReturnType<typeof serve>>;
beforeAll(async () => {
  koa = await serve(new Koa());
  const app = new Koa();
  jsonBodies(app);
  app.use(async (ctx, next) => {
    await next();
    jsonAsText(ctx);
  });
  ours = await serve(app);
});
afterAll(() => {
  koa.server.close();
  ours.server.close();
});

describe("JSON bodies skip Koa's body type tests and answer exactly as Koa does", () => {
  it.each(Object.keys(cases))('%s', async (name) => {
    const answer = async (url: string, method = 'GET') => {
      const res = await fetch(`${url}/${encodeURIComponent(name)}`, { method });
      const headers = Object.fromEntries([...res.headers].filter(([key]) => key !== 'date'));
      return { status: res.status, headers, body: await res.text() };
    };
    const expected = await answer(koa.url);
    expect(await answer(ours.url)).toStrictEqual(expected);
    expect(await answer(ours.url, 'HEAD')).toStrictEqual(await answer(koa.url, 'HEAD'));
    // The case answered something (a wrong case name would answer 404 on both).
    expect(expected.status).not.toBe(404);
  });
});
