/**
 * The file-storage API in GET /api/openapi.json: each route described with the zod schemas it
 * validates with (the routes validate themselves, in the spec's order, so they are described,
 * not mounted, through the registry).
 */
import { z } from 'zod';
import type { ApiRegistry } from '../../core/api.ts';
import { createBody as createApp, deleteBody as deleteApp, patchBody as patchApp } from './routes/apps.ts';
import { deleteBody as deleteFiles, registerBody } from './routes/files.ts';
import { completeBody, requestBody } from './routes/uploads.ts';

const tag = 'File storage';
const error = (text: string) => `${text}: \`{error}\``;

export function describeStorageApi(api: ApiRegistry): void {
  api.scheme('dashboardSession', { type: 'apiKey', in: 'cookie', name: '__session', description: 'A signed-in dashboard session.' });
  api.scheme('appToken', { type: 'http', scheme: 'bearer', description: "An app's API token (svc_live_...)." });
  const session = ['dashboardSession'];
  const appIdQuery = z.object({ appId: z.string().optional().describe("One app's id") });
  api.describe({ method: 'GET', path: '/api/apps', summary: "The active organization's apps, or one with appId, each with its usage (storedBytes, fileCount, unregisteredBytes, unregisteredCount, usedBytes, usageCheckedAt)", tag, security: session, query: appIdQuery, errors: { 400: error('No active organization'), 404: error('App not found') } });
  api.describe({ method: 'POST', path: '/api/apps', summary: 'Create an app and provision its bucket', tag, security: session, body: createApp, success: { status: 201 }, errors: { 400: error('name missing, or no active organization'), 503: error('Store unavailable') } });
  api.describe({ method: 'PATCH', path: '/api/apps', summary: "Rename an app or change its storage limit", tag, security: session, body: patchApp, errors: { 400: error('appId missing'), 404: error('App not found') } });
  api.describe({ method: 'DELETE', path: '/api/apps', summary: 'Empty and remove the bucket, then the app with its tokens and files', tag, security: session, body: deleteApp, errors: { 400: error('appId missing'), 404: error('App not found') } });
  api.describe({
    method: 'GET',
    path: '/api/files',
    summary: "An app's files: the Bearer token's app, or appId with a session",
    tag,
    security: ['appToken', 'dashboardSession'],
    query: z.object({
      appId: z.string().optional(),
      search: z.string().optional().describe('Case-sensitive substring of the name'),
      page: z.int().min(1).optional(),
      pageSize: z.int().min(1).max(100).optional(),
      dir: z.enum(['asc', 'desc']).optional(),
    }),
    errors: { 400: error('Neither appId nor a Bearer token'), 401: error('Invalid token') },
  });
  api.describe({ method: 'POST', path: '/api/files', summary: 'Record files already uploaded to the bucket (token in the body)', tag, security: [], body: registerBody, errors: { 400: error('token or files missing'), 401: error('Invalid token'), 413: error('Over the storage limit') } });
  api.describe({ method: 'DELETE', path: '/api/files', summary: 'Delete files: keys with a Bearer token, fileId or fileIds with a session', tag, security: ['appToken', 'dashboardSession'], body: deleteFiles, errors: { 400: error('No keys, fileId or fileIds'), 401: error('Invalid token') } });
  api.describe({ method: 'GET', path: '/api/files/download', summary: 'A presigned GET URL valid one hour', tag, security: session, query: z.object({ fileId: z.string() }), errors: { 400: error('fileId missing'), 404: error('File or app not found') } });
  api.describe({ method: 'POST', path: '/api/files/upload', summary: 'Phase 1 (presigned PUT URLs); with action "complete", phase 2 (record the uploaded files)', tag, security: session, body: z.union([requestBody, completeBody]), errors: { 400: error('appId or files missing'), 404: error('App not found'), 413: error('Over the storage limit') } });
}
