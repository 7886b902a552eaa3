/**
 * Personal access tokens: `GET|POST /api/personal-access-tokens`, `DELETE .../{id}`. A token is
 * minted by a signed-in user (dashboard or CLI) or by another PAT, acts for that user in one
 * organization, is shown once, and only its SHA-256 is stored. Owners and admins see and revoke
 * every token of the organization; members their own.
 */
import type { RouteGroup } from '../../../core/api.ts';
import { z } from 'zod';
import { WharfError } from '../../../core/errors.ts';
import type { IdentityService } from '../../identity/types.ts';
import { newPat } from '../credentials.ts';
import type { Account } from '../service.ts';
import type { PatRow } from '../store.ts';
import { accountOf, operation, type RouteDeps, success } from './common.ts';

const createBody = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('What the token is for.'),
  expires_at: z.iso
    .datetime({ offset: true })
    .nullable()
    .optional()
    .describe('When the token stops working (ISO 8601, in the future); absent or null: never.'),
});

const tokenSchema = z.object({
  id: z.int(),
  name: z.string(),
  hint: z.string(),
  user_id: z.string(),
  created_by: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
});

function view(row: PatRow) {
  return {
    id: row.id,
    name: row.name,
    hint: `…${row.hint}`,
    user_id: row.user_id,
    created_by: row.created_by,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    expires_at: row.expires_at,
  };
}

export function tokenRoutes(deps: RouteDeps & { identity: IdentityService }): RouteGroup {
  const router = deps.api.group({ prefixes: ['/api/personal-access-tokens'], envelope: 'messaging' });
  const base = '/api/personal-access-tokens';
  const { store } = deps.sessions;
  const tag = 'Personal access tokens';
  const manager = (account: Account) => {
    const role = deps.identity.roleOf(account.userId, account.orgId);
    return role === 'owner' || role === 'admin';
  };

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: base,
      summary: "List the organization's tokens (owners and admins: all of them; members: their own)",
      tag,
      credential: 'account',
      success: { schema: success(z.array(tokenSchema)) },
    },
    (ctx) => {
      const account = accountOf(ctx);
      const all = manager(account);
      ctx.body = { success: true, data: store.patsOfOrg(account.orgId).filter((t) => all || t.user_id === account.userId).map(view) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: base,
      summary: 'Mint a token for the caller in the current organization; the token is shown once',
      tag,
      credential: 'account',
      body: createBody,
      success: { status: 201, schema: success(tokenSchema.extend({ token: z.string() })) },
    },
    (ctx, { body }) => {
      const account = accountOf(ctx);
      const now = new Date();
      let expiresAt: string | null = null;
      if (body.expires_at) {
        const at = new Date(body.expires_at);
        if (at.getTime() <= now.getTime()) {
          throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { expires_at: ['expires_at must be in the future'] } });
        }
        expiresAt = at.toISOString();
      }
      const pat = newPat();
      const createdBy = account.actor.kind === 'pat' ? `pat:${account.actor.id}` : account.actor.kind;
      const row = store.insertPat(
        { orgId: account.orgId, userId: account.userId, name: body.name, hash: pat.hash, hint: pat.hint, createdBy, expiresAt },
        now.toISOString(),
      );
      ctx.status = 201;
      ctx.body = { success: true, data: { ...view(row), token: pat.token } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'DELETE',
      path: `${base}/:id`,
      summary: 'Revoke a token; it fails from the next request on',
      tag,
      credential: 'account',
      errors: { 404: 'No such token (or not yours to revoke): `{success: false, error, message}`' },
    },
    (ctx) => {
      const account = accountOf(ctx);
      const id = /^[1-9]\d{0,15}$/.test(String(ctx.params.id)) ? Number(ctx.params.id) : 0;
      const row = id ? store.pat(id, account.orgId) : undefined;
      if (!row || row.revoked_at || (row.user_id !== account.userId && !manager(account))) throw new WharfError('not_found', 'Token not found');
      store.revokePat(row.id, new Date().toISOString());
      ctx.body = { success: true, data: { id: row.id, revoked: true } };
    },
  );

  return router;
}
