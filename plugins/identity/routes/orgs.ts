/**
 * `/api/orgs`: the caller's organizations, creating one, its members (owners and admins manage)
 * and invitations to it, and the invitations the caller received.
 */
import { z } from 'zod';
import { type ApiRegistry, type Credential, PUBLIC } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import { ORG_SLUG_MAX } from '../../../core/limits.ts';
import { displayName } from '../../../core/validate.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { signedInUser } from '../credentials.ts';
import { requireManager, type Invitations } from '../invitations.ts';
import type { IdentityStore } from '../store.ts';
import { ROLES, type IdentityService, type Invitation, type Org, type Role, type UserPrincipal } from '../types.ts';
import { TAG as tag } from './auth.ts';

/** `POST /api/orgs`. */
const createOrgBody = z.lazy(() => z.object({ name: displayName(), slug: z.string().min(1).max(ORG_SLUG_MAX).optional() }));
/** `POST /api/orgs/{org}/invitations`, and `POST /api/orgs/{org}/members`, its alias. */
const inviteBody = z.lazy(() => z.object({ email: z.string().min(3).max(320), role: z.enum(ROLES).default('member') }));
/** `PATCH /api/orgs/{org}/members/{userId}`. */
const roleBody = z.lazy(() => z.object({ role: z.enum(ROLES) }));

const orgSchema = z.lazy(() => z.object({ id: z.string(), slug: z.string(), name: z.string(), role: z.enum(ROLES) }));
const invitationSchema = z.lazy(() =>
  z.object({
    id: z.string(),
    email: z.string(),
    role: z.enum(ROLES),
    invitedBy: z.string().optional(),
    invitedAt: z.string(),
    expiresAt: z.string(),
  }),
);
const NOT_FOUND = { 404: 'Not a member of that organization, or it does not exist (never told apart): `{error}`' };

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
  /** Makes an organization just joined the active one of a dashboard session that has none. */
  activate?(principal: UserPrincipal, orgId: string): Promise<void>;
  unavailable?: string;
}

export function orgRoutes(api: ApiRegistry, store: IdentityStore, identity: IdentityService, options: OrgRouteOptions = {}): RouteGroup {
  const group = api.group({ prefixes: ['/api/orgs'], envelope: 'plain' });
  const auth = signedInUser;

  /** The organization named in the path and the caller's role in it; 404 when not a member, exists or not. */
  async function orgOf(p: UserPrincipal, ref: string): Promise<{ org: Org; role: Role; userId: string }> {
    const org = await store.org(ref);
    const role = org && (await store.role(p.userId, org.id));
    if (!org || !role) throw new WharfError('not_found', 'Organization not found');
    return { org, role, userId: p.userId };
  }

  group.route({
    method: 'GET',
    path: '/api/orgs',
    summary: "The caller's organizations with its role in each",
    tag,
    auth,
    success: { schema: z.lazy(() => z.object({ orgs: z.array(orgSchema) })) },
    async handler(ctx, { auth: p }) {
      ctx.body = { orgs: (await store.orgsOf(p.userId)).map(({ id, slug, name, role }) => ({ id, slug, name, role })) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/orgs',
    summary: 'Create an organization owned by the caller (slug derived from the name when omitted)',
    tag,
    auth,
    body: createOrgBody,
    success: { status: 201, schema: orgSchema },
    errors: { 409: 'The slug is taken: `{error}`' },
    async handler(ctx, { body, auth: p }) {
      const org = await identity.createOrg({ name: body.name, slug: body.slug, ownerId: p.userId });
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
    async handler(ctx, { params, auth: p }) {
      const { org } = await orgOf(p, params.org!);
      ctx.body = { members: await store.members(org.id) };
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
    async handler(ctx, { params, body, auth: p }) {
      const { org, role } = await orgOf(p, params.org!);
      requireManager(role);
      const target = params.userId!;
      const current = await store.role(target, org.id);
      if (!current) throw new WharfError('not_found', 'Member not found');
      if ((current === 'owner' || body.role === 'owner') && role !== 'owner') throw new WharfError('forbidden', 'Only owners change owners');
      await store.transaction(async (tx) => {
        await tx.setMember(org.id, target, body.role);
        if ((await tx.ownerCount(org.id)) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
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
    async handler(ctx, { params, auth: p }) {
      const { org, role, userId } = await orgOf(p, params.org!);
      const target = params.userId!;
      if (target !== userId) requireManager(role);
      const current = await store.role(target, org.id);
      if (!current) throw new WharfError('not_found', 'Member not found');
      if (current === 'owner' && role !== 'owner') throw new WharfError('forbidden', 'Only owners remove owners');
      await store.transaction(async (tx) => {
        await tx.removeMember(org.id, target);
        if ((await tx.ownerCount(org.id)) === 0) throw new WharfError('conflict', 'An organization keeps at least one owner');
      });
      ctx.body = { success: true };
    },
  });

  invitationRoutes(group, options, orgOf);
  return group;
}

/**
 * Invitations. Inviting answers the same, 202, whether or not an account has the email; the
 * invitee (matched by its account's email) accepts or declines. Without an Invitations service
 * (OIDC mode, where the provider says who belongs) every invitation path answers 404 saying why,
 * before anything else is judged.
 */
function invitationRoutes(
  group: RouteGroup,
  options: OrgRouteOptions,
  orgOf: (p: UserPrincipal, ref: string) => Promise<{ org: Org; role: Role; userId: string }>,
): void {
  const service = options.invitations;
  const auth: Credential<UserPrincipal> | typeof PUBLIC = service ? signedInUser : PUBLIC;
  const available = (): Invitations => {
    if (!service) throw new WharfError('not_found', options.unavailable ?? 'Not available');
    return service;
  };
  const summary = (text: string) => (service ? text : `${text} (not available: memberships come from the OpenID Connect provider)`);
  const invited = { status: 202, schema: z.lazy(() => z.object({ invitation: invitationSchema })) };
  const inviteErrors = { ...NOT_FOUND, 403: 'Not allowed to invite, or to invite owners: `{error}`', 409: 'A member already has that email: `{error}`' };

  for (const path of ['/api/orgs/:org/invitations', '/api/orgs/:org/members']) {
    group.route({
      method: 'POST',
      path,
      summary: summary(
        path.endsWith('/members')
          ? 'Invite by email: the old name of POST /api/orgs/{org}/invitations, which it now is (it added the user at once)'
          : 'Invite by email (owners and admins; only owners invite owners): 202 the same whether or not the email has an account',
      ),
      tag,
      auth,
      body: service ? inviteBody : undefined,
      success: invited,
      errors: inviteErrors,
      async handler(ctx, { params, body, auth: p }) {
        const invitations = available();
        const { org, role, userId } = await orgOf(p as UserPrincipal, params.org!);
        const invitation = await invitations.invite({ orgId: org.id, inviterId: userId, inviterRole: role, email: body!.email, role: body!.role });
        ctx.status = 202;
        ctx.body = { invitation: invitationView(invitation, false) };
      },
    });
  }

  group.route({
    method: 'GET',
    path: '/api/orgs/:org/invitations',
    summary: summary("The organization's pending invitations (owners and admins)"),
    tag,
    auth,
    success: { schema: z.lazy(() => z.object({ invitations: z.array(invitationSchema) })) },
    errors: { ...NOT_FOUND, 403: 'Not an owner or admin: `{error}`' },
    async handler(ctx, { params, auth: p }) {
      const invitations = available();
      const { org, role } = await orgOf(p as UserPrincipal, params.org!);
      ctx.body = { invitations: (await invitations.pending(org.id, role)).map((i) => invitationView(i, true)) };
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/orgs/:org/invitations/:id',
    summary: summary('Revoke a pending invitation'),
    tag,
    auth,
    errors: { ...NOT_FOUND, 403: 'Not allowed: `{error}`' },
    async handler(ctx, { params, auth: p }) {
      const invitations = available();
      const { org, role } = await orgOf(p as UserPrincipal, params.org!);
      await invitations.revoke(org.id, params.id!, role);
      ctx.body = { success: true };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/orgs/invitations',
    summary: summary("The invitations the caller received (matched by its account's email)"),
    tag,
    auth,
    async handler(ctx, { auth: p }) {
      ctx.body = { invitations: await available().received((p as UserPrincipal).userId) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/orgs/invitations/:id/accept',
    summary: summary('Accept an invitation: become a member with the invited role'),
    tag,
    auth,
    success: { schema: z.lazy(() => z.object({ org: orgSchema })) },
    errors: { 404: 'No such pending invitation for this account (unknown, expired, revoked, declined or another email): `{error}`' },
    async handler(ctx, { params, auth: p }) {
      const user = p as UserPrincipal;
      const { id, slug, name, role } = await available().accept(user.userId, params.id!);
      // Someone who had no organization now acts in this one, without a separate switch.
      if (!user.orgId) await options.activate?.(user, id);
      ctx.body = { org: { id, slug, name, role } };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/orgs/invitations/:id/decline',
    summary: summary('Decline an invitation'),
    tag,
    auth,
    errors: { 404: 'No such pending invitation for this account: `{error}`' },
    async handler(ctx, { params, auth: p }) {
      await available().decline((p as UserPrincipal).userId, params.id!);
      ctx.body = { success: true };
    },
  });
}
