/**
 * Route schemas are built on a route's first request, not at start (core/validate.ts `once`,
 * `z.lazy`): the start builds only the config schemas, which must refuse a bad config at once.
 * A route's first request, whose validation builds its schema, refuses bad input in the same
 * envelope as every later one. zod's construction hook counts what is built, and where.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';

/** Schemas built so far (z.lazy wrappers aside), by the first project file on the stack that is not zod's. */
const built: string[] = [];
const root = path.resolve(import.meta.dirname, '../..');

function builtIn(pattern: RegExp): string[] {
  return built.filter((file) => pattern.test(file));
}

const ROUTE_FILES = /^(plugins\/[^/]+\/routes\/|plugins\/identity\/html\.ts|core\/app\.ts|plugins\/dashboard\/routes\.ts)/;

let app: TestApp;
let pat: string;
let cookie: Record<string, string>;
let apiKey: string;
beforeAll(async () => {
  // Before zod and the app are imported (this file imports them only below), so every schema is seen.
  (globalThis as { __zod_globalConfig?: object }).__zod_globalConfig = {
    postProcessor(schema: { _zod: { def: { type: string } } }) {
      // A z.lazy wrapper is what a route declares in place of its schema: cheap, and built at start.
      if (schema._zod.def.type === 'lazy') return;
      const frame = new Error().stack!.split('\n').find((line) => line.includes(root) && !line.includes('node_modules') && !line.includes('/test/'));
      built.push(frame ? path.relative(root, /\((.*?):\d+:\d+\)$|at (.*?):\d+:\d+$/.exec(frame)!.slice(1).find(Boolean)!.replace('file://', '')) : '?');
    },
  };
  const { startMessagingApp, tenant, sandboxSession } = await import('../plugins/sessions/helpers.ts');
  app = await startMessagingApp();
  expect(built.length).toBeGreaterThan(0);
  expect(builtIn(ROUTE_FILES)).toEqual([]);
  const user = await tenant(app);
  pat = user.pat;
  cookie = user.headers;
  apiKey = (await sandboxSession(app, pat)).apiKey;
});
afterAll(async () => {
  await app?.close();
  delete (globalThis as { __zod_globalConfig?: object }).__zod_globalConfig;
});

describe('route schemas built on first use', () => {
  it('the start built config schemas, no route schema', () => {
    // Checked in beforeAll right after the start (the requests since built some); the config's were built.
    expect(built.some((file) => /^(core\/core-config\.ts|plugins\/sessions\/config\.ts)$/.test(file))).toBe(true);
  });

  it("a messaging route's first request refuses bad input with 422 and every field's messages, like the next one", async () => {
    const before = builtIn(/^plugins\/sessions\/routes\/send-message\.ts$/).length;
    expect(before).toBe(0);
    const first = await app.request('POST', '/api/send-message', {
      body: { to: 'nobody', imageUrl: 'ftp://x', poll: 3 },
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(builtIn(/^plugins\/sessions\/routes\/send-message\.ts$/).length).toBeGreaterThan(0);
    const second = await app.request('POST', '/api/send-message', {
      body: { to: 'nobody', imageUrl: 'ftp://x', poll: 3 },
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(first.status).toBe(422);
    expect(first.body).toEqual({
      success: false,
      message: 'The given data was invalid.',
      errors: {
        imageUrl: ['imageUrl: must be an http or https URL'],
        poll: ['poll must be an object'],
      },
    });
    expect(second).toMatchObject({ status: first.status, body: first.body });
  });

  it("a plain route's first request refuses bad input with 400 {error}, like the next one", async () => {
    expect(builtIn(/^plugins\/identity\/routes\/orgs\.ts$/)).toEqual([]);
    const first = await app.request('POST', '/api/orgs', { body: { name: '', slug: 7 }, headers: cookie });
    expect(builtIn(/^plugins\/identity\/routes\/orgs\.ts$/).length).toBeGreaterThan(0);
    const second = await app.request('POST', '/api/orgs', { body: { name: '', slug: 7 }, headers: cookie });
    expect(first).toMatchObject({ status: 400, body: { error: 'name: must not be empty' } });
    expect(first.body).toEqual({ error: 'name: must not be empty' });
    expect(second).toMatchObject({ status: first.status, body: first.body });
  });

  it('a schema shared by several routes is built once', async () => {
    const shared = () => builtIn(/^plugins\/sessions\/routes\/common\.ts$/).length;
    const bad = { body: { name: 'x', webhook_url: 'nope' }, headers: { authorization: `Bearer ${pat}` } };
    const first = await app.request('POST', '/api/whatsapp-sessions', bad);
    expect(first).toMatchObject({ status: 422, body: { errors: { webhook_url: ['webhook_url: must be an http or https URL'] } } });
    const after = shared();
    for (const path of ['/api/whatsapp-sessions', '/api/messaging-sessions', '/api/sandbox-sessions']) {
      expect(await app.request('POST', path, bad)).toMatchObject({ status: first.status, body: first.body });
    }
    expect(shared()).toBe(after);
  });
});
