/**
 * `/api/orgs`: the caller's organizations, creating one, its members (owners and admins manage)
 * and invitations to it, and the invitations the caller received.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { requirePrincipal } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import { validate } from '../../../core/validate.ts';
import { requireManager, type Invitations } from '../invitations.ts';
import type { IdentityStore } from '../store.ts';
import { ROLES, type IdentityService, type Invitation, type Org, type Role } from '../types.ts';

/** `POST /api/orgs`. */
export const createOrgBody = z.object({ name: z.string().trim().min(1).max(100), slug: z.string().min(1).max(48).optional() });
/** `POST /api/orgs/{org}/invitations`, and `POST /api/orgs/{org}/members`, its alias. */
export const inviteBody = z.object({ email: z.string().min(3).max(320), role: z.enum(ROLES).default('member') });
/** `PATCH /api/orgs/{org}/members/{userId}`. */
export const roleBody = z.object({ role: z.enum(ROLES) });

const USER_KINDS = ['session', 'oauth'] as const;

/** An invitation as `POST` and `GET /api/orgs/{org}/invitations` show it. */
const invitationView = (i: Invitation, withInviter: boolean) => ({
  id: i.id,
  email: i.email,
  role: i.role,
  ...(withInviter ? { invitedBy: i.invitedBy } : {}),
  invitedAt: i.invitedAt,
  expiresAt: i.expiresAt,
});

export interface OrgRouteOptions {
  /** Built-in mode's invitations; absent in OIDC mode, where the invitation routes answer 404 with `unavailable`. */
  invitations?: Invitations;
  unavailable?: string;
}

export function orgRoutes(store: IdentityStore, identity: IdentityService, options: OrgRouteOptions = {}): Router {
  const router = new Router({ prefix: '/api/orgs' });

  /** The invitations service, or 404 first thing (before credentials or body) where there is none. */
  function invitations(): Invitations {
    if (!options.invitations) throw new WharfError('not_found', options.unavailable ?? 'Not available');
    return options.invitations;
  }

  /** The organization named in the path and the caller's role in it; 404 when not a member, exists or not. */
  async function orgOf(ctx: Context): Promise<{ org: Org; role: Role; userId: string }> {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    const org = store.org(String(ctx.params.org));
    const role = org && store.role(p.userId, org.id);
    if (!org || !role) throw new WharfError('not_found', 'Organization not found');
    return { org, role, userId: p.userId };
  }

  router.get('/', async (ctx) => {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    ctx.body = { orgs: store.orgsOf(p.userId).map(({ id, slug, name, role }) => ({ id, slug, name, role })) };
  });

  router.post('/', async (ctx) => {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    const { name, slug } = validate(createOrgBody, ctx.request.body);
    const org = identity.createOrg({ name, slug, ownerId: p.userId });
    ctx.status = 201;
    ctx.body = { id: org.id, slug: org.slug, name: org.name, role: 'owner' };
  });

  router.get('/:org/members', async (ctx) => {
    const { org } = await orgOf(ctx);
    ctx.body = { members: store.members(org.id) };
  });

  // Inviting: the same answer, 202, whether or not an account has the email. `/members` is the
  // path clients used when this added the user at once; it now invites too.
  router.post(['/:org/invitations', '/:org/members'], async (ctx) => {
    const service = invitations();
    const { org, role, userId } = await orgOf(ctx);
    const body = validate(inviteBody, ctx.request.body);
    const invitation = service.invite({ orgId: org.id, inviterId: userId, inviterRole: role, email: body.email, role: body.role });
    ctx.status = 202;
    ctx.body = { invitation: invitationView(invitation, false) };
  });

  router.get('/:org/invitations', async (ctx) => {
    const service = invitations();
    const { org, role } = await orgOf(ctx);
    ctx.body = { invitations: service.pending(org.id, role).map((i) => invitationView(i, true)) };
  });

  router.delete('/:org/invitations/:id', async (ctx) => {
    const service = invitations();
    const { org, role } = await orgOf(ctx);
    service.revoke(org.id, String(ctx.params.id), role);
    ctx.body = { success: true };
  });

  // The caller's own invitations, matched by its account's email.
  router.get('/invitations', async (ctx) => {
    const service = invitations();
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    ctx.body = { invitations: service.received(p.userId) };
  });

  router.post('/invitations/:id/accept', async (ctx) => {
    const service = invitations();
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    const { id, slug, name, role } = service.accept(p.userId, String(ctx.params.id));
    ctx.body = { org: { id, slug, name, role } };
  });

  router.post('/invitations/:id/decline', async (ctx) => {
    const service = invitations();
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    service.decline(p.userId, String(ctx.params.id));
    ctx.body = { success: true };
  });

  router.patch('/:org/members/:userId', async (ctx) => {
    const { org, role } = await orgOf(ctx);
    requireManager(role);
    const body = validate(roleBody, ctx.request.body);
    const target = String(ctx.params.userId);
    const current = store.role(target, org.id);
    if (!current) throw new WharfError('not_found', 'Member not found');
    if ((current === 'owner' || body.role === 'owner') && role !== 'owner') throw new WharfError('forbidden', 'Only owners change owners');
    store.transaction(() => {
      store.setMember(org.id, target, body.role);
      if (store.ownerCount(org.id) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
    });
    ctx.body = { member: { userId: target, role: body.role } };
  });

  router.delete('/:org/members/:userId', async (ctx) => {
    const { org, role, userId } = await orgOf(ctx);
    const target = String(ctx.params.userId);
    if (target !== userId) requireManager(role);
    const current = store.role(target, org.id);
    if (!current) throw new WharfError('not_found', 'Member not found');
    if (current === 'owner' && role !== 'owner') throw new WharfError('forbidden', 'Only owners remove owners');
    store.transaction(() => {
      store.removeMember(org.id, target);
      if (store.ownerCount(org.id) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
    });
    ctx.body = { success: true };
  });

  return router;
}
