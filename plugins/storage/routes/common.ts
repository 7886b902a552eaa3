/** What the storage routes share: the credentials they accept, app lookup, schemas. */
import { z } from 'zod';
import type { Credential } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import { once, plainText } from '../../../core/validate.ts';
import type { Storage } from '../service.ts';
import type { AppState, StorageStore } from '../store.ts';
import type { AppTokenPrincipal } from '../types.ts';

export interface RouteDeps {
  store: StorageStore;
  storage: Storage;
}

/** Requests name at most this many files or keys. */
export const MAX_ITEMS = 1000;

export const fileInput = once(() =>
  z.object({
    key: z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'),
    name: plainText(z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters')),
    size: z.int().min(0, 'must not be negative').max(Number.MAX_SAFE_INTEGER),
    type: z.string().min(1, 'must not be empty').max(255, 'must be at most 255 characters'),
  }),
);

export function fileList<T extends z.ZodType>(item: T) {
  return z.array(item).min(1, 'must hold at least one file').max(MAX_ITEMS, `must hold at most ${MAX_ITEMS} files`);
}

/**
 * A signed-in dashboard user, loaded as its active organization's id (the spec's "Session"
 * credential): 400 when it has none selected. Apps, tokens, downloads and dashboard uploads take it.
 */
export const dashboardSession: Credential<string> = {
  kinds: ['session'],
  needs: 'dashboard session',
  schemes: ['dashboardSession'],
  load(_ctx, principal) {
    const { orgId } = principal as { orgId: string | null };
    if (!orgId) throw new WharfError('bad_request', 'No active organization: create one or choose one (PUT /auth/active-org)');
    return orgId;
  },
};

export const INVALID_TOKEN = 'Invalid API token';

/** Who calls a file route that takes either credential: an app token's app, or a session's organization. */
export type FileCaller = { app: AppState; orgId?: undefined } | { app?: undefined; orgId: string };

/** An app API token (Bearer) acting for its app, or a dashboard session acting in its organization. */
export function appTokenOrSession(store: StorageStore): Credential<FileCaller> {
  return {
    kinds: ['appToken', 'session'],
    needs: 'app API token or a dashboard session',
    schemes: ['appToken', 'dashboardSession'],
    invalid: INVALID_TOKEN,
    async load(ctx, principal) {
      if (principal.kind !== 'appToken') return { orgId: await dashboardSession.load!(ctx, principal) };
      const app = await store.app((principal as AppTokenPrincipal).appId);
      if (!app) throw new WharfError('unauthorized', INVALID_TOKEN);
      return { app };
    },
  };
}

/** The app if it is in the organization; 404 alike for a missing app and another organization's. */
export async function appInOrg(store: StorageStore, appId: string, orgId: string): Promise<AppState> {
  const app = await store.appInOrg(appId, orgId);
  if (!app) throw new WharfError('not_found', 'App not found');
  return app;
}

export const TAG = 'File storage';
