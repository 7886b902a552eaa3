/**
 * `/api/files`: `GET|POST|DELETE /api/files`, `GET /api/files/download` and the two-phase
 * `POST /api/files/upload`. An app API token (Bearer, or in the body for POST) acts for its own
 * app; a dashboard session acts for the apps of its organization, named by `appId` or through a
 * file's id.
 */
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from '../../../core/api.ts';
import type { AuthRegistry } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { once, plainText, queryParam, uuid } from '../../../core/validate.ts';
import type { AppState } from '../store.ts';
import type { AppTokenPrincipal } from '../types.ts';
import { appInOrg, appTokenOrSession, dashboardSession, fileInput, fileList, INVALID_TOKEN, MAX_ITEMS, type RouteDeps, TAG as tag } from './common.ts';

export const listQuery = z.lazy(() =>
  z.object({
    appId: queryParam.one(uuid).describe('The app, with a dashboard session (ignored with a Bearer token)'),
    search: queryParam.one(plainText(z.string().max(1024, 'must be at most 1024 characters'))).describe('Case-sensitive substring of the name'),
    page: queryParam.int(1, 1, Number.MAX_SAFE_INTEGER),
    pageSize: queryParam.int(10, 1, 100),
    dir: queryParam.one(z.enum(['asc', 'desc'], { error: 'must be "asc" or "desc"' })).describe('Direction on uploadedAt (default desc)'),
  }),
);
const registerBody = z.lazy(() => z.object({ token: z.string().min(1, 'must not be empty'), files: fileList(fileInput()) }));
export const deleteBody = z.lazy(() =>
  z.object({
    keys: z
      .array(z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'))
      .min(1, 'must hold at least one key')
      .max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} keys`)
      .optional(),
    fileId: uuid.optional(),
    fileIds: z.array(uuid).min(1, 'must hold at least one id').max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} ids`).optional(),
  }),
);
const downloadQuery = z.lazy(() => z.object({ fileId: queryParam.one(uuid).pipe(z.string({ error: 'is required' })) }));

export const requestBody = once(() =>
  z.object({
    appId: uuid,
    action: z.undefined().optional(),
    prefix: z.string().max(1024, 'must be at most 1024 characters').optional(),
    files: fileList(fileInput().omit({ key: true })),
  }),
);
const completeBody = once(() => z.object({ appId: uuid, action: z.literal('complete'), files: fileList(fileInput()) }));
/** Phase 1 without `action`, phase 2 with `action: "complete"`. */
export const uploadBody = z.lazy(() =>
  z.discriminatedUnion('action', [requestBody(), completeBody()], {
    error: (issue) => (issue.code === 'invalid_union' ? 'must be "complete" (or absent, to request upload URLs)' : undefined),
  }),
);

export function fileRoutes(api: ApiRegistry, { store, storage }: RouteDeps, auth: AuthRegistry): RouteGroup {
  const group = api.group({ prefixes: ['/api/files'], envelope: 'plain' });
  const tokenOrSession = appTokenOrSession(store);

  group.route({
    method: 'GET',
    path: '/api/files',
    summary: "An app's files: the Bearer token's app, or appId with a session",
    tag,
    auth: tokenOrSession,
    query: listQuery,
    errors: { 404: 'App not found: `{error}`' },
    async handler(ctx, { query, auth: caller }) {
      if (!caller.app && !query.appId) throw new WharfError('bad_request', 'appId is required without a Bearer API token');
      const app = caller.app ?? (await appInOrg(store, query.appId!, caller.orgId));
      ctx.body = await storage.listFiles(app, { search: query.search, dir: query.dir ?? 'desc', page: query.page, pageSize: query.pageSize });
    },
  });

  group.route({
    method: 'POST',
    path: '/api/files',
    summary: 'Record files already uploaded to the bucket (the token travels in the body)',
    tag,
    auth: PUBLIC,
    body: registerBody,
    errors: { 401: 'Invalid token: `{error}`', 413: 'Recording them would take the app over its storage limit: `{error}`' },
    async handler(ctx, { body }) {
      const result = await auth.resolveToken(body.token, ctx);
      const principal = result.principal as { kind: string } | undefined;
      const app = principal?.kind === 'appToken' ? await store.app((principal as AppTokenPrincipal).appId) : undefined;
      if (!app) throw new WharfError('unauthorized', INVALID_TOKEN);
      ctx.body = { files: await storage.registerFiles(app, body.files) };
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/files',
    summary: 'Delete files (objects, then records): keys with a Bearer token, fileId or fileIds with a session',
    tag,
    auth: tokenOrSession,
    body: deleteBody,
    errors: { 404: 'A file not found (nothing is deleted): `{error}`' },
    async handler(ctx, { body, auth: caller }) {
      if (!body.keys && !body.fileId && !body.fileIds) throw new WharfError('bad_request', 'keys, fileId or fileIds is required');
      if (caller.app) {
        if (!body.keys) throw new WharfError('bad_request', 'keys is required with a Bearer API token (fileId and fileIds are for dashboard sessions)');
        await storage.deleteFiles(caller.app, body.keys);
        ctx.body = { success: true };
        return;
      }
      const ids = [...new Set([...(body.fileId ? [body.fileId] : []), ...(body.fileIds ?? [])])];
      if (!ids.length) throw new WharfError('bad_request', 'fileId or fileIds is required with a dashboard session (keys need a Bearer API token)');
      // Every file must be found before anything is deleted.
      const byApp = new Map<string, { app: AppState; keys: string[] }>();
      for (const id of ids) {
        const file = await store.fileInOrg(id, caller.orgId);
        if (!file) throw new WharfError('not_found', `File ${id} not found`);
        const entry = byApp.get(file.appId) ?? { app: await appInOrg(store, file.appId, caller.orgId), keys: [] };
        entry.keys.push(file.key);
        byApp.set(file.appId, entry);
      }
      for (const { app, keys } of byApp.values()) await storage.deleteFiles(app, keys);
      ctx.body = { success: true };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/files/download',
    summary: 'A presigned GET URL valid one hour',
    tag,
    auth: dashboardSession,
    query: downloadQuery,
    errors: { 404: 'File or app not found: `{error}`' },
    async handler(ctx, { query, auth: orgId }) {
      const file = await store.fileInOrg(query.fileId, orgId);
      if (!file) throw new WharfError('not_found', 'File not found');
      ctx.body = { url: await storage.presignDownload(await appInOrg(store, file.appId, orgId), file) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/files/upload',
    summary: 'Phase 1 (no action): reserve the bytes and answer presigned PUT URLs; phase 2 (action "complete"): verify the uploaded objects and record them',
    tag,
    auth: dashboardSession,
    body: uploadBody,
    errors: { 404: 'App not found: `{error}`', 413: 'Over the storage limit: `{error}`' },
    async handler(ctx, { body, auth: orgId }) {
      const app = await appInOrg(store, body.appId, orgId);
      ctx.body =
        body.action === 'complete'
          ? { files: await storage.completeUploads(app, body.files) }
          : { uploads: await storage.reserveUploads(app, body.prefix, body.files) };
    },
  });

  return group;
}
