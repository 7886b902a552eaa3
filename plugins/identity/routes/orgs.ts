/** `/api/orgs`: the caller's organizations, creating one, and its members (owners and admins manage). */
import { z } from 'zod';
import type { ApiRegistry } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { signedInUser } from '../credentials.ts';
import type { IdentityStore } from '../store.ts';
import { ROLES, type IdentityService, type Org, type Role, type UserPrincipal } from '../types.ts';
import { TAG as tag } from './auth.ts';

const createBody = z.object({ name: z.string().trim().min(1).max(100), slug: z.string().min(1).max(48).optional() });
const addMemberBody = z.object({ email: z.string().min(3).max(320), role: z.enum(ROLES).default('member') });
const roleBody = z.object({ role: z.enum(ROLES) });
const orgSchema = z.object({ id: z.string(), slug: z.string(), name: z.string(), role: z.enum(ROLES) });
const NOT_FOUND = { 404: 'Not a member of that organization, or it does not exist (never told apart): `{error}`' };

export function orgRoutes(api: ApiRegistry, store: IdentityStore, identity: IdentityService): RouteGroup {
  const group = api.group({ prefixes: ['/api/orgs'], envelope: 'plain' });
  const auth = signedInUser;

  /** The organization named in the path and the caller's role in it; 404 when not a member, exists or not. */
  function orgOf(p: UserPrincipal, ref: string): { org: Org; role: Role; userId: string } {
    const org = store.org(ref);
    const role = org && store.role(p.userId, org.id);
    if (!org || !role) throw new WharfError('not_found', 'Organization not found');
    return { org, role, userId: p.userId };
  }

  function requireManager(role: Role): void {
    if (role !== 'owner' && role !== 'admin') throw new WharfError('forbidden', 'Only owners and admins manage members');
  }

  group.route({
    method: 'GET',
    path: '/api/orgs',
    summary: "The caller's organizations with its role in each",
    tag,
    auth,
    success: { schema: z.object({ orgs: z.array(orgSchema) }) },
    handler(ctx, { auth: p }) {
      ctx.body = { orgs: store.orgsOf(p.userId).map(({ id, slug, name, role }) => ({ id, slug, name, role })) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/orgs',
    summary: 'Create an organization owned by the caller (slug derived from the name when omitted)',
    tag,
    auth,
    body: createBody,
    success: { status: 201, schema: orgSchema },
    errors: { 409: 'The slug is taken: `{error}`' },
    handler(ctx, { body, auth: p }) {
      const org = identity.createOrg({ name: body.name, slug: body.slug, ownerId: p.userId });
      ctx.status = 201;
      ctx.body = { id: org.id, slug: org.slug, name: org.name, role: 'owner' };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/orgs/:org/members',
    summary: "An organization's members (the organization by id or slug)",
    tag,
    auth,
    errors: NOT_FOUND,
    handler(ctx, { params, auth: p }) {
      const { org } = orgOf(p, params.org!);
      ctx.body = { members: store.members(org.id) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/orgs/:org/members',
    summary: 'Add a member by email (owners and admins; only owners add owners)',
    tag,
    auth,
    body: addMemberBody,
    success: { status: 201 },
    errors: { ...NOT_FOUND, 403: 'Not allowed to manage members, or to make owners: `{error}`', 409: 'Already a member: `{error}`' },
    handler(ctx, { params, body, auth: p }) {
      const { org, role } = orgOf(p, params.org!);
      requireManager(role);
      if (body.role === 'owner' && role !== 'owner') throw new WharfError('forbidden', 'Only owners make owners');
      const user = identity.findUserByEmail(body.email);
      if (!user) throw new WharfError('not_found', 'No user with that email (a user exists after wharf admin create-user or a first sign-in)');
      if (store.role(user.id, org.id)) throw new WharfError('conflict', 'Already a member');
      store.setMember(org.id, user.id, body.role);
      ctx.status = 201;
      ctx.body = { member: { userId: user.id, email: user.email, name: user.name, role: body.role } };
    },
  });

  group.route({
    method: 'PATCH',
    path: '/api/orgs/:org/members/:userId',
    summary: "Change a member's role (owners and admins; only owners change owners; one owner always remains)",
    tag,
    auth,
    body: roleBody,
    errors: { ...NOT_FOUND, 403: 'Not allowed: `{error}`', 409: 'The last owner cannot stop being one: `{error}`' },
    handler(ctx, { params, body, auth: p }) {
      const { org, role } = orgOf(p, params.org!);
      requireManager(role);
      const target = params.userId!;
      const current = store.role(target, org.id);
      if (!current) throw new WharfError('not_found', 'Member not found');
      if ((current === 'owner' || body.role === 'owner') && role !== 'owner') throw new WharfError('forbidden', 'Only owners change owners');
      store.transaction(() => {
        store.setMember(org.id, target, body.role);
        if (store.ownerCount(org.id) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
      });
      ctx.body = { member: { userId: target, role: body.role } };
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/orgs/:org/members/:userId',
    summary: 'Remove a member, or leave (anyone may remove themselves; one owner always remains)',
    tag,
    auth,
    errors: { ...NOT_FOUND, 403: 'Not allowed: `{error}`', 409: 'The last owner cannot leave: `{error}`' },
    handler(ctx, { params, auth: p }) {
      const { org, role, userId } = orgOf(p, params.org!);
      const target = params.userId!;
      if (target !== userId) requireManager(role);
      const current = store.role(target, org.id);
      if (!current) throw new WharfError('not_found', 'Member not found');
      if (current === 'owner' && role !== 'owner') throw new WharfError('forbidden', 'Only owners remove owners');
      store.transaction(() => {
        store.removeMember(org.id, target);
        if (store.ownerCount(org.id) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
      });
      ctx.body = { success: true };
    },
  });

  return group;
}
