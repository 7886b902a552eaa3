/**
 * `POST /api/files/upload`, dashboard session: phase 1 (no `action`) reserves bytes and returns
 * presigned PUT URLs; phase 2 (`action: "complete"`) verifies the objects and records them.
 */
import type Router from '@koa/router';
import { z } from 'zod';
import { WharfError } from '../../../core/errors.ts';
import { validate } from '../../../core/validate.ts';
import { appInOrg, fileInput, fileList, type RouteDeps, sessionOrg, uuid } from './common.ts';

export const requestBody = z.object({
  appId: uuid,
  prefix: z.string().max(1024, 'must be at most 1024 characters').optional(),
  files: fileList(fileInput.omit({ key: true })),
});
export const completeBody = z.object({
  appId: uuid,
  action: z.literal('complete'),
  files: fileList(fileInput),
});

/** Adds the upload route to the files router (it lives under /api/files). */
export function uploadRoutes(router: Router, { store, storage }: RouteDeps): void {
  router.post('/upload', async (ctx) => {
    const orgId = await sessionOrg(ctx);
    const raw = ctx.request.body as { action?: unknown } | undefined;
    const action = raw && typeof raw === 'object' && !Array.isArray(raw) ? raw.action : undefined;
    if (action === undefined) {
      const body = validate(requestBody, raw);
      const app = appInOrg(store, body.appId, orgId);
      ctx.body = { uploads: await storage.reserveUploads(app, body.prefix, body.files) };
      return;
    }
    if (action !== 'complete') throw new WharfError('bad_request', 'action must be "complete" (or absent, to request upload URLs)');
    const body = validate(completeBody, raw);
    const app = appInOrg(store, body.appId, orgId);
    ctx.body = { files: await storage.completeUploads(app, body.files) };
  });
}
