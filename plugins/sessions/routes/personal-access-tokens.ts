/**
 * Personal access tokens (account-level credential): `GET|POST /api/personal-access-tokens`,
 * `DELETE /api/personal-access-tokens/{id}`. Who sees and revokes which token is the service's
 * rule (`../personal-access-tokens.ts`).
 */
import { z } from 'zod';
import { displayName, once } from '../../../core/validate.ts';
import type { RouteGroup } from '../../../core/api.ts';
import type { PatRow } from '../store.ts';
import { type RouteDeps, success } from './common.ts';

const createBody = z.lazy(() =>
  z.strictObject({
    name: displayName(100).describe('What the token is for.'),
    expires_at: z.iso
      .datetime({ offset: true })
      .nullable()
      .optional()
      .describe('When the token stops working (ISO 8601, in the future); absent or null: never.'),
  }),
);

const tokenSchema = once(() =>
  z.object({
    id: z.int(),
    name: z.string(),
    hint: z.string(),
    user_id: z.string(),
    created_by: z.string(),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
    expires_at: z.string().nullable(),
  }),
);

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

export function personalAccessTokenRoutes(deps: RouteDeps): RouteGroup {
  const { pats } = deps;
  const base = '/api/personal-access-tokens';
  const group = deps.api.group({ prefixes: [base], envelope: 'messaging' });
  const auth = deps.sessions.credentials.account;
  const tag = 'Personal access tokens';

  group.route({
    method: 'GET',
    path: base,
    summary: "List the organization's tokens (owners and admins: all of them; members: their own)",
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.array(tokenSchema()))) },
    async handler(ctx, { auth }) {
      ctx.body = { success: true, data: (await pats.list(auth)).map(view) };
    },
  });

  group.route({
    method: 'POST',
    path: base,
    summary: 'Mint a token for the caller in the current organization; the token is shown once',
    tag,
    auth,
    body: createBody,
    success: { status: 201, schema: z.lazy(() => success(tokenSchema().extend({ token: z.string() }))) },
    async handler(ctx, { auth, body }) {
      const { row, token } = await pats.mint(auth, { name: body.name, expiresAt: body.expires_at });
      ctx.status = 201;
      ctx.body = { success: true, data: { ...view(row), token } };
    },
  });

  group.route({
    method: 'DELETE',
    path: `${base}/:id`,
    summary: 'Revoke a token; it fails from the next request on',
    tag,
    auth,
    errors: { 404: 'No such token (or not yours to revoke): `{success: false, error, message}`' },
    async handler(ctx, { auth, params }) {
      const row = await pats.revoke(auth, params.id);
      ctx.body = { success: true, data: { id: row.id, revoked: true } };
    },
  });

  return group;
}
