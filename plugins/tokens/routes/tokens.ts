/** `GET|POST|DELETE /api/tokens` (dashboard session) and `POST /api/tokens/validate` (public). */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { randomToken, sha256Hex } from '../../../core/tokens.ts';
import { displayName, queryParam, uuid } from '../../../core/validate.ts';
import type { StorageService } from '../../storage/types.ts';
import type { TokensStore } from '../store.ts';
import type { LastUsed } from '../usage.ts';

/** The fixed live prefix of every app API token. */
export const TOKEN_PREFIX = 'svc_live_';
/** Characters of a token shown in listings: the prefix and 7 of the random part. */
const DISPLAY_LENGTH = TOKEN_PREFIX.length + 7;

export const listQuery = z.lazy(() => z.object({ appId: queryParam.one(uuid).pipe(z.string({ error: 'is required' })) }));
export const createBody = z.lazy(() => z.object({ appId: uuid, name: displayName(100) }));
export const deleteBody = z.lazy(() => z.object({ tokenId: uuid }));
const validateBody = z.lazy(() => z.object({ token: z.string().min(1, 'must not be empty') }));

/** A new raw token: the live prefix and 32 random bytes as URL-safe text. */
function newToken(): string {
  return `${TOKEN_PREFIX}${randomToken(32)}`;
}

export interface TokenRouteDeps {
  api: ApiRegistry;
  store: TokensStore;
  storage: StorageService;
  usage: LastUsed;
}

export function tokenRoutes({ api, store, storage, usage }: TokenRouteDeps): RouteGroup {
  const group = api.group({ prefixes: ['/api/tokens'], envelope: 'plain' });
  const tag = 'File storage';
  const auth = storage.credentials.dashboardSession;

  async function appOf(appId: string, orgId: string) {
    const app = await storage.getAppInOrg(appId, orgId);
    if (!app) throw new WharfError('not_found', 'App not found');
    return app;
  }

  group.route({
    method: 'GET',
    path: '/api/tokens',
    summary: "An app's API tokens, newest first (never the token itself)",
    tag,
    auth,
    query: listQuery,
    errors: { 404: 'App not found: `{error}`' },
    async handler(ctx, { query, auth: orgId }) {
      const app = await appOf(query.appId, orgId);
      await usage.flush();
      ctx.body = { tokens: await store.ofApp(app.id) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/tokens',
    summary: 'Create an API token, returned only this once',
    tag,
    auth,
    body: createBody,
    success: { status: 201, schema: z.lazy(() => z.object({ token: z.string() })) },
    errors: { 404: 'App not found: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      const app = await appOf(body.appId, orgId);
      const token = newToken();
      await store.insert({
        id: randomUUID(),
        appId: app.id,
        name: body.name,
        hash: sha256Hex(token),
        prefix: token.slice(0, DISPLAY_LENGTH),
        now: new Date().toISOString(),
      });
      ctx.status = 201;
      ctx.body = { token };
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/tokens',
    summary: 'Revoke an API token (at once)',
    tag,
    auth,
    body: deleteBody,
    errors: { 404: 'Token not found: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      const token = await store.byId(body.tokenId);
      if (!token || !(await storage.getAppInOrg(token.appId, orgId))) throw new WharfError('not_found', 'Token not found');
      await store.delete(token.id);
      ctx.body = { success: true };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/tokens/validate',
    summary: "Validate a token: the app, its bucket and the store's connection details",
    tag,
    auth: PUBLIC,
    body: validateBody,
    errors: { 401: 'Invalid token: `{error}`', 404: 'App not found: `{error}`' },
    async handler(ctx, { body }) {
      const found = body.token.startsWith(TOKEN_PREFIX) ? await store.byHash(sha256Hex(body.token)) : undefined;
      if (!found) throw new WharfError('unauthorized', 'Invalid API token');
      const app = await storage.getApp(found.appId);
      if (!app) throw new WharfError('not_found', 'App not found');
      await usage.touch(found.id);
      ctx.body = { valid: true, appId: app.id, bucketName: app.bucketName, storage: storage.connectionFor(app) };
    },
  });

  return group;
}
