/** `/api/orgs`: the caller's organizations, creating one, and its members (owners and admins manage). */
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { requirePrincipal } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import { validate } from '../../../core/validate.ts';
import type { IdentityStore } from '../store.ts';
import { ROLES, type IdentityService, type Org, type Role } from '../types.ts';

const createBody = z.object({ name: z.string().trim().min(1).max(100), slug: z.string().min(1).max(48).optional() });
const addMemberBody = z.object({ email: z.string().min(3).max(320), role: z.enum(ROLES).default('member') });
const roleBody = z.object({ role: z.enum(ROLES) });

const USER_KINDS = ['session', 'oauth'] as const;

export function orgRoutes(store: IdentityStore, identity: IdentityService): Router {
  const router = new Router({ prefix: '/api/orgs' });

  /** The organization named in the path and the caller's role in it; 404 when not a member, exists or not. */
  async function orgOf(ctx: Context): Promise<{ org: Org; role: Role; userId: string }> {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    const org = store.org(String(ctx.params.org));
    const role = org && store.role(p.userId, org.id);
    if (!org || !role) throw new WharfError('not_found', 'Organization not found');
    return { org, role, userId: p.userId };
  }

  function requireManager(role: Role): void {
    if (role !== 'owner' && role !== 'admin') throw new WharfError('forbidden', 'Only owners and admins manage members');
  }

  router.get('/', async (ctx) => {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    ctx.body = { orgs: store.orgsOf(p.userId).map(({ id, slug, name, role }) => ({ id, slug, name, role })) };
  });

  router.post('/', async (ctx) => {
    const p = await requirePrincipal(ctx, USER_KINDS, 'signed-in user');
    const { name, slug } = validate(createBody, ctx.request.body);
    const org = identity.createOrg({ name, slug, ownerId: p.userId });
    ctx.status = 201;
    ctx.body = { id: org.id, slug: org.slug, name: org.name, role: 'owner' };
  });

  router.get('/:org/members', async (ctx) => {
    const { org } = await orgOf(ctx);
    ctx.body = { members: store.members(org.id) };
  });

  router.post('/:org/members', async (ctx) => {
    const { org, role } = await orgOf(ctx);
    requireManager(role);
    const body = validate(addMemberBody, ctx.request.body);
    if (body.role === 'owner' && role !== 'owner') throw new WharfError('forbidden', 'Only owners make owners');
    const user = identity.findUserByEmail(body.email);
    if (!user) throw new WharfError('not_found', 'No user with that email (a user exists after wharf admin create-user or a first sign-in)');
    if (store.role(user.id, org.id)) throw new WharfError('conflict', 'Already a member');
    store.setMember(org.id, user.id, body.role);
    ctx.status = 201;
    ctx.body = { member: { userId: user.id, email: user.email, name: user.name, role: body.role } };
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
