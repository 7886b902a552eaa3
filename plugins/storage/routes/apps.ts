/** `GET|POST|PATCH|DELETE /api/apps`: the apps of the session's active organization. */
import { z } from 'zod';
import type { ApiRegistry } from '../../../core/api.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { STORAGE_LIMIT_MAX } from '../../../core/limits.ts';
import { displayName, queryParam, uuid } from '../../../core/validate.ts';
import { appInOrg, dashboardSession, type RouteDeps, TAG as tag } from './common.ts';

const name = z.lazy(() => displayName());
// z.number, not z.int: z.int refuses a number past 2^53 as "not an integer", where the truth is "too big".
const storageLimit = z.lazy(() =>
  z
    .number('must be a number of bytes or null')
    .max(STORAGE_LIMIT_MAX, `is too big: at most ${STORAGE_LIMIT_MAX} bytes (8 PiB)`)
    .int('must be a whole number of bytes')
    .min(0, 'must not be negative')
    .nullable(),
);

export const createBody = z.lazy(() => z.object({ name, storageLimit: storageLimit.optional() }));
const patchBody = z.lazy(() => z.object({ appId: uuid, name: name.optional(), storageLimit: storageLimit.optional() }));
export const deleteBody = z.lazy(() => z.object({ appId: uuid }));
const getQuery = z.lazy(() => z.object({ appId: queryParam.one(uuid).describe("One app's id") }));

export function appRoutes(api: ApiRegistry, { store, storage }: RouteDeps): RouteGroup {
  const group = api.group({ prefixes: ['/api/apps'], envelope: 'plain' });
  const auth = dashboardSession;

  group.route({
    method: 'GET',
    path: '/api/apps',
    summary:
      "The active organization's apps (newest first), or one with appId, each with its usage (storedBytes, fileCount, unregisteredBytes, unregisteredCount, pendingBytes, usedBytes, usageCheckedAt)",
    tag,
    auth,
    query: getQuery,
    errors: { 404: 'App not found: `{error}`' },
    async handler(ctx, { query, auth: orgId }) {
      ctx.body = query.appId
        ? { app: await storage.appView(await appInOrg(store, query.appId, orgId)) }
        : { apps: await Promise.all((await store.appsOfOrg(orgId)).map((app) => storage.appView(app))) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/apps',
    summary: 'Create an app and provision its bucket',
    tag,
    auth,
    body: createBody,
    success: { status: 201 },
    errors: { 503: 'Store unavailable or not configured; nothing was created: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      const app = await storage.createApp(orgId, { name: body.name, storageLimit: body.storageLimit ?? null });
      ctx.status = 201;
      ctx.body = await storage.appView(app);
    },
  });

  group.route({
    method: 'PATCH',
    path: '/api/apps',
    summary: 'Rename an app or change its storage limit',
    tag,
    auth,
    body: patchBody,
    errors: { 404: 'App not found: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      const app = await appInOrg(store, body.appId, orgId);
      ctx.body = await storage.appView(await storage.updateApp(app, { name: body.name, storageLimit: body.storageLimit }));
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/apps',
    summary: 'Empty and remove the bucket, then the app with its tokens and files',
    tag,
    auth,
    body: deleteBody,
    errors: { 404: 'App not found: `{error}`', 503: 'Store unavailable: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      await storage.deleteApp(await appInOrg(store, body.appId, orgId));
      ctx.body = { success: true };
    },
  });

  return group;
}
