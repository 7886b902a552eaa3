/**
 * What the identity plugin gives the rest of Wharf: the user principals (`session` for the
 * dashboard cookie, `oauth` for the command-line token) and the service other plugins use to
 * reach users and organizations.
 */

export type Role = 'owner' | 'admin' | 'member';
export const ROLES: readonly Role[] = ['owner', 'admin', 'member'];

export interface User {
  id: string;
  email: string | null;
  name: string | null;
  createdAt: string;
}

export interface Org {
  id: string;
  slug: string;
  name: string;
  createdAt: string;
}

export interface OrgWithRole extends Org {
  role: Role;
}

/** A pending invitation to an organization, as its managers see it. */
export interface Invitation {
  id: string;
  email: string;
  role: Role;
  /** The user who last (re)sent it; null once that user is deleted. */
  invitedBy: string | null;
  invitedAt: string;
  expiresAt: string;
}

/** A pending invitation as its invitee sees it. */
export interface ReceivedInvitation {
  id: string;
  org: { id: string; slug: string; name: string };
  role: Role;
  invitedBy: { name: string | null; email: string | null } | null;
  invitedAt: string;
  expiresAt: string;
}

/** A signed-in user, through the dashboard cookie or a command-line OAuth token. */
export interface UserPrincipal {
  kind: 'session' | 'oauth';
  userId: string;
  email: string | null;
  name: string | null;
  /** The organization requests act in: the active one, the token's, or `X-Service-Org`'s. Null when none. */
  orgId: string | null;
  /** The user's role in `orgId`. */
  role: Role | null;
  /** The server-side login session behind a cookie (kind `session`). */
  sessionId?: string;
}

export interface DashboardPrincipal extends UserPrincipal {
  kind: 'session';
  /** Absent in external OIDC mode, where the provider keeps the session. */
  sessionId?: string;
}

export interface OAuthPrincipal extends UserPrincipal {
  kind: 'oauth';
}

declare module '../../core/auth.ts' {
  interface PrincipalKinds {
    session: DashboardPrincipal;
    oauth: OAuthPrincipal;
  }
}

export interface IdentityService {
  /** Creates a user (email unique, case-insensitive). Password optional (external users have none). */
  createUser(input: { email: string; password?: string; name?: string | null }): Promise<User>;
  /** Creates an organization owned by `ownerId`; the slug is derived from the name when omitted. */
  createOrg(input: { name: string; slug?: string; ownerId: string }): Promise<Org>;
  addMember(orgId: string, userId: string, role: Role): Promise<void>;
  findUserByEmail(email: string): Promise<User | undefined>;
  getUser(id: string): Promise<User | undefined>;
  /** An organization by id or slug. */
  getOrg(idOrSlug: string): Promise<Org | undefined>;
  roleOf(userId: string, orgId: string): Promise<Role | undefined>;
  orgsOf(userId: string): Promise<OrgWithRole[]>;
}

declare module '../../core/plugin.ts' {
  interface Services {
    identity: IdentityService;
  }
}
