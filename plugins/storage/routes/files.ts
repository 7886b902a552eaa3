/**
 * `GET|POST|DELETE /api/files` and `GET /api/files/download`. An app API token (Bearer, or in
 * the body for POST) acts for its own app; a dashboard session acts for the apps of its
 * organization, named by `appId` or through a file's id.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { type AuthRegistry, authenticate } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import { validate } from '../../../core/validate.ts';
import type { AppState, Direction } from '../store.ts';
import type { AppTokenPrincipal } from '../types.ts';
import { appInOrg, fileInput, fileList, MAX_ITEMS, queryParam, type RouteDeps, sessionOrg, uuid, uuidParam } from './common.ts';

export const registerBody = z.object({ token: z.string().min(1, 'must not be empty'), files: fileList(fileInput) });
export const deleteBody = z.object({
  keys: z
    .array(z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'))
    .min(1, 'must hold at least one key')
    .max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} keys`)
    .optional(),
  fileId: uuid.optional(),
  fileIds: z.array(uuid).min(1, 'must hold at least one id').max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} ids`).optional(),
});

const INVALID_TOKEN = 'Invalid API token';

/** A positive integer query parameter within bounds, or its default; 400 naming it otherwise. */
function intParam(ctx: Context, name: string, fallback: number, min: number, max: number): number {
  const raw = queryParam(ctx, name);
  if (raw === undefined || raw === '') return fallback;
  const n = /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new WharfError('bad_request', `${name} must be an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}`);
  }
  return n;
}

export function fileRoutes({ store, storage }: RouteDeps, auth: AuthRegistry): Router {
  const router = new Router({ prefix: '/api/files' });

  /** The app a Bearer app token acts for (401 when invalid), or undefined when the request carries none. */
  async function tokenApp(ctx: Context): Promise<{ app?: AppState; session?: true }> {
    const result = await authenticate(ctx);
    if (result.failure === 'invalid') throw new WharfError('unauthorized', ctx.get('authorization') ? INVALID_TOKEN : 'Invalid or expired credential');
    const principal = result.principal as { kind: string } | undefined;
    if (!principal) return {};
    if (principal.kind === 'appToken') {
      const app = store.app((principal as AppTokenPrincipal).appId);
      if (!app) throw new WharfError('unauthorized', INVALID_TOKEN);
      return { app };
    }
    if (principal.kind === 'session') return { session: true };
    throw new WharfError('forbidden', 'This operation requires an app API token or a dashboard session');
  }

  router.get('/', async (ctx) => {
    const caller = await tokenApp(ctx);
    let app = caller.app;
    if (!app) {
      const appId = queryParam(ctx, 'appId');
      if (appId === undefined || appId === '') throw new WharfError('bad_request', 'appId is required without a Bearer API token');
      if (!caller.session) throw new WharfError('unauthorized', 'Authentication required');
      app = appInOrg(store, uuidParam(ctx, 'appId'), await sessionOrg(ctx));
    }
    const dir = queryParam(ctx, 'dir') ?? 'desc';
    if (dir !== 'asc' && dir !== 'desc') throw new WharfError('bad_request', 'dir must be "asc" or "desc"');
    const page = intParam(ctx, 'page', 1, 1, Number.MAX_SAFE_INTEGER);
    const pageSize = intParam(ctx, 'pageSize', 10, 1, 100);
    const search = queryParam(ctx, 'search') || undefined;
    if (search && search.length > 1024) throw new WharfError('bad_request', 'search must be at most 1024 characters');
    ctx.body = storage.listFiles(app, { search, dir: dir as Direction, page, pageSize });
  });

  router.post('/', async (ctx) => {
    const body = validate(registerBody, ctx.request.body);
    const result = await auth.resolveToken(body.token, ctx);
    const principal = result.principal as { kind: string } | undefined;
    if (principal?.kind !== 'appToken') throw new WharfError('unauthorized', INVALID_TOKEN);
    const app = store.app((principal as AppTokenPrincipal).appId);
    if (!app) throw new WharfError('unauthorized', INVALID_TOKEN);
    ctx.body = { files: await storage.registerFiles(app, body.files) };
  });

  router.delete('/', async (ctx) => {
    const caller = await tokenApp(ctx);
    const body = validate(deleteBody, ctx.request.body);
    if (!body.keys && !body.fileId && !body.fileIds) throw new WharfError('bad_request', 'keys, fileId or fileIds is required');
    if (caller.app) {
      if (!body.keys) throw new WharfError('bad_request', 'keys is required with a Bearer API token (fileId and fileIds are for dashboard sessions)');
      await storage.deleteFiles(caller.app, body.keys);
      ctx.body = { success: true };
      return;
    }
    if (!caller.session) throw new WharfError('unauthorized', 'Authentication required');
    const orgId = await sessionOrg(ctx);
    const ids = [...new Set([...(body.fileId ? [body.fileId] : []), ...(body.fileIds ?? [])])];
    if (!ids.length) throw new WharfError('bad_request', 'fileId or fileIds is required with a dashboard session (keys need a Bearer API token)');
    // Every file must be found before anything is deleted.
    const byApp = new Map<string, { app: AppState; keys: string[] }>();
    for (const id of ids) {
      const file = store.fileInOrg(id, orgId);
      if (!file) throw new WharfError('not_found', `File ${id} not found`);
      const entry = byApp.get(file.appId) ?? { app: appInOrg(store, file.appId, orgId), keys: [] };
      entry.keys.push(file.key);
      byApp.set(file.appId, entry);
    }
    for (const { app, keys } of byApp.values()) await storage.deleteFiles(app, keys);
    ctx.body = { success: true };
  });

  router.get('/download', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const fileId = uuidParam(ctx, 'fileId');
    const file = store.fileInOrg(fileId, orgId);
    if (!file) throw new WharfError('not_found', 'File not found');
    const app = appInOrg(store, file.appId, orgId);
    ctx.body = { url: await storage.presignDownload(app, file) };
  });

  return router;
}
