/** `GET|POST|DELETE /api/tokens` (dashboard session) and `POST /api/tokens/validate` (public). */
import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { requirePrincipal } from '../../core/auth.ts';
import { WharfError } from '../../core/errors.ts';
import { randomToken, sha256Hex } from '../../core/tokens.ts';
import { validate } from '../../core/validate.ts';
import type { StorageService } from '../storage/types.ts';
import type { TokensStore } from './store.ts';
import type { LastUsed } from './usage.ts';

/** The fixed live prefix of every app API token. */
export const TOKEN_PREFIX = 'svc_live_';
/** Characters of a token shown in listings: the prefix and 7 of the random part. */
const DISPLAY_LENGTH = TOKEN_PREFIX.length + 7;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const uuid = z.string().regex(UUID, 'must be a UUID');

export const createBody = z.object({ appId: uuid, name: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters') });
export const deleteBody = z.object({ tokenId: uuid });
export const validateBody = z.object({ token: z.string().min(1, 'must not be empty') });

/** A new raw token: the live prefix and 32 random bytes as URL-safe text. */
export function newToken(): string {
  return `${TOKEN_PREFIX}${randomToken(32)}`;
}

export interface TokenRouteDeps {
  store: TokensStore;
  storage: StorageService;
  usage: LastUsed;
}

export function tokenRoutes({ store, storage, usage }: TokenRouteDeps): Router {
  const router = new Router({ prefix: '/api/tokens' });

  async function sessionOrg(ctx: Context): Promise<string> {
    const principal = await requirePrincipal(ctx, ['session'], 'dashboard session');
    if (!principal.orgId) throw new WharfError('bad_request', 'No active organization: create one or choose one (PUT /auth/active-org)');
    return principal.orgId;
  }

  function appOf(appId: string, orgId: string) {
    const app = storage.getAppInOrg(appId, orgId);
    if (!app) throw new WharfError('not_found', 'App not found');
    return app;
  }

  router.get('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const appId = ctx.query.appId;
    if (Array.isArray(appId)) throw new WharfError('bad_request', 'appId must be given once');
    if (!appId) throw new WharfError('bad_request', 'appId is required');
    if (!UUID.test(appId)) throw new WharfError('bad_request', 'appId: must be a UUID');
    const app = appOf(appId, orgId);
    usage.flush();
    ctx.body = { tokens: store.ofApp(app.id) };
  });

  router.post('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const body = validate(createBody, ctx.request.body);
    const app = appOf(body.appId, orgId);
    const token = newToken();
    store.insert({ id: randomUUID(), appId: app.id, name: body.name, hash: sha256Hex(token), prefix: token.slice(0, DISPLAY_LENGTH), now: new Date().toISOString() });
    ctx.status = 201;
    ctx.body = { token };
  });

  router.delete('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const body = validate(deleteBody, ctx.request.body);
    const token = store.byId(body.tokenId);
    if (!token || !storage.getAppInOrg(token.appId, orgId)) throw new WharfError('not_found', 'Token not found');
    store.delete(token.id);
    ctx.body = { success: true };
  });

  router.post('/validate', (ctx) => {
    const body = validate(validateBody, ctx.request.body);
    const found = body.token.startsWith(TOKEN_PREFIX) ? store.byHash(sha256Hex(body.token)) : undefined;
    if (!found) throw new WharfError('unauthorized', 'Invalid API token');
    const app = storage.getApp(found.appId);
    if (!app) throw new WharfError('not_found', 'App not found');
    usage.touch(found.id);
    ctx.body = { valid: true, appId: app.id, bucketName: app.bucketName, storage: storage.connectionFor(app) };
  });

  return router;
}
