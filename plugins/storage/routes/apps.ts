/** `GET|POST|PATCH|DELETE /api/apps`: the apps of the session's active organization. */
import Router from '@koa/router';
import { z } from 'zod';
import { validate } from '../../../core/validate.ts';
import { publicApp } from '../service.ts';
import { appInOrg, queryParam, type RouteDeps, sessionOrg, uuid, uuidParam } from './common.ts';

const name = z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters');
const storageLimit = z.int('must be an integer number of bytes or null').min(0, 'must not be negative').max(Number.MAX_SAFE_INTEGER).nullable();

export const createBody = z.object({ name, storageLimit: storageLimit.optional() });
export const patchBody = z.object({ appId: uuid, name: name.optional(), storageLimit: storageLimit.optional() });
export const deleteBody = z.object({ appId: uuid });

export function appRoutes({ store, storage }: RouteDeps): Router {
  const router = new Router({ prefix: '/api/apps' });

  router.get('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    if (queryParam(ctx, 'appId') !== undefined) {
      ctx.body = { app: storage.appView(appInOrg(store, uuidParam(ctx, 'appId'), orgId)) };
      return;
    }
    ctx.body = { apps: store.appsOfOrg(orgId).map((app) => storage.appView(app)) };
  });

  router.post('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const body = validate(createBody, ctx.request.body);
    const app = await storage.createApp(orgId, { name: body.name, storageLimit: body.storageLimit ?? null });
    ctx.status = 201;
    ctx.body = publicApp(app);
  });

  router.patch('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const body = validate(patchBody, ctx.request.body);
    const app = appInOrg(store, body.appId, orgId);
    ctx.body = publicApp(storage.updateApp(app, { name: body.name, storageLimit: body.storageLimit }));
  });

  router.delete('/', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const body = validate(deleteBody, ctx.request.body);
    await storage.deleteApp(appInOrg(store, body.appId, orgId));
    ctx.body = { success: true };
  });

  return router;
}
