/** What the storage routes share: credentials, the active organization, app lookup, schemas. */
import type { Context } from 'koa';
import { z } from 'zod';
import { requirePrincipal } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import type { Storage } from '../service.ts';
import type { AppState, StorageStore } from '../store.ts';

export interface RouteDeps {
  store: StorageStore;
  storage: Storage;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const uuid = z.string().regex(UUID, 'must be a UUID');
/** Requests name at most this many files or keys. */
export const MAX_ITEMS = 1000;

export const fileInput = z.object({
  key: z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'),
  name: z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'),
  size: z.int().min(0, 'must not be negative').max(Number.MAX_SAFE_INTEGER),
  type: z.string().min(1, 'must not be empty').max(255, 'must be at most 255 characters'),
});

export function fileList<T extends z.ZodType>(item: T) {
  return z.array(item).min(1, 'must hold at least one file').max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} files`);
}

/** The session's organization: 401/403 without a dashboard session, 400 without an active organization. */
export async function sessionOrg(ctx: Context): Promise<string> {
  const principal = await requirePrincipal(ctx, ['session'], 'dashboard session');
  if (!principal.orgId) throw new WharfError('bad_request', 'No active organization: create one or choose one (PUT /auth/active-org)');
  return principal.orgId;
}

/** The app if it is in the organization; 404 alike for a missing app and another organization's. */
export function appInOrg(store: StorageStore, appId: string, orgId: string): AppState {
  const app = store.appInOrg(appId, orgId);
  if (!app) throw new WharfError('not_found', 'App not found');
  return app;
}

/** A single query parameter: undefined when absent, 400 when repeated. */
export function queryParam(ctx: Context, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw new WharfError('bad_request', `${name} must be given once`);
  return value;
}

/** A UUID query parameter: 400 naming it when missing or malformed. */
export function uuidParam(ctx: Context, name: string): string {
  const value = queryParam(ctx, name);
  if (value === undefined || value === '') throw new WharfError('bad_request', `${name} is required`);
  if (!UUID.test(value)) throw new WharfError('bad_request', `${name}: must be a UUID`);
  return value;
}
