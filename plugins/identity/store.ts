/** The identity plugin's SQL: users, organizations, memberships, invitations, login sessions, setup tokens. */
import { randomUUID } from 'node:crypto';
import type { Database } from '../../core/db.ts';
import { WharfError } from '../../core/errors.ts';
import type { Invitation, Org, OrgWithRole, ReceivedInvitation, Role, User } from './types.ts';

interface UserRow {
  id: string;
  email: string | null;
  name: string | null;
  password_hash: string | null;
  created_at: string;
}

interface InvitationRow {
  id: string;
  email: string;
  role: Role;
  invited_by: string | null;
  invited_at: string;
  expires_at: string;
}

interface OrgRow {
  id: string;
  slug: string;
  name: string;
  created_at: string;
}

export interface SessionRow {
  user_id: string;
  active_org_id: string | null;
  last_seen_at: string;
  expires_at: string;
  revoked_at: string | null;
  email: string | null;
  name: string | null;
  role: Role | null;
}

const toUser = (r: UserRow): User => ({ id: r.id, email: r.email, name: r.name, createdAt: r.created_at });
const toInvitation = (r: InvitationRow): Invitation => ({
  id: r.id,
  email: r.email,
  role: r.role,
  invitedBy: r.invited_by,
  invitedAt: r.invited_at,
  expiresAt: r.expires_at,
});
const toOrg = (r: OrgRow): Org => ({ id: r.id, slug: r.slug, name: r.name, createdAt: r.created_at });

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/g, '');
  return slug || 'org';
}

export class IdentityStore {
  readonly #db: Database;
  readonly #s;

  constructor(db: Database) {
    this.#db = db;
    this.#s = {
      userById: db.prepare('SELECT id, email, name, password_hash, created_at FROM identity_users WHERE id = ?'),
      userByEmail: db.prepare('SELECT id, email, name, password_hash, created_at FROM identity_users WHERE email_norm = ?'),
      userByExternal: db.prepare('SELECT id, email, name, password_hash, created_at FROM identity_users WHERE external_id = ?'),
      insertUser: db.prepare(
        'INSERT INTO identity_users (id, email, email_norm, name, password_hash, external_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      setPassword: db.prepare('UPDATE identity_users SET password_hash = ?, updated_at = ? WHERE id = ?'),
      updateProfile: db.prepare('UPDATE identity_users SET email = ?, email_norm = ?, name = ?, updated_at = ? WHERE id = ?'),
      countUsers: db.prepare('SELECT COUNT(*) AS n FROM identity_users'),
      orgById: db.prepare('SELECT id, slug, name, created_at FROM identity_orgs WHERE id = ?'),
      orgBySlug: db.prepare('SELECT id, slug, name, created_at FROM identity_orgs WHERE slug = ?'),
      orgByExternal: db.prepare('SELECT id, slug, name, created_at FROM identity_orgs WHERE external_id = ?'),
      insertOrg: db.prepare('INSERT INTO identity_orgs (id, slug, name, external_id, created_at) VALUES (?, ?, ?, ?, ?)'),
      renameOrg: db.prepare('UPDATE identity_orgs SET name = ? WHERE id = ?'),
      role: db.prepare('SELECT role FROM identity_memberships WHERE user_id = ? AND org_id = ?').pluck(),
      upsertMember: db.prepare(
        'INSERT INTO identity_memberships (org_id, user_id, role, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role',
      ),
      deleteMember: db.prepare('DELETE FROM identity_memberships WHERE org_id = ? AND user_id = ?'),
      owners: db.prepare("SELECT COUNT(*) FROM identity_memberships WHERE org_id = ? AND role = 'owner'").pluck(),
      orgsOf: db.prepare(
        'SELECT o.id, o.slug, o.name, o.created_at, m.role FROM identity_memberships m JOIN identity_orgs o ON o.id = m.org_id WHERE m.user_id = ? ORDER BY m.created_at, o.slug',
      ),
      members: db.prepare(
        'SELECT u.id, u.email, u.name, m.role, m.created_at FROM identity_memberships m JOIN identity_users u ON u.id = m.user_id WHERE m.org_id = ? ORDER BY m.created_at, u.email',
      ),
      memberByEmail: db
        .prepare('SELECT 1 FROM identity_memberships m JOIN identity_users u ON u.id = m.user_id WHERE m.org_id = ? AND u.email_norm = ?')
        .pluck(),
      upsertInvitation: db.prepare(`
        INSERT INTO identity_invitations (id, org_id, email, email_norm, role, invited_by, invited_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (org_id, email_norm) DO UPDATE SET
          email = excluded.email, role = excluded.role, invited_by = excluded.invited_by,
          invited_at = excluded.invited_at, expires_at = excluded.expires_at
        RETURNING id, email, role, invited_by, invited_at, expires_at`),
      invitationByEmail: db.prepare(
        'SELECT id, email, role, invited_by, invited_at, expires_at FROM identity_invitations WHERE org_id = ? AND email_norm = ? AND expires_at > ?',
      ),
      orgInvitation: db.prepare(
        'SELECT id, email, role, invited_by, invited_at, expires_at FROM identity_invitations WHERE id = ? AND org_id = ? AND expires_at > ?',
      ),
      orgInvitations: db.prepare(
        'SELECT id, email, role, invited_by, invited_at, expires_at FROM identity_invitations WHERE org_id = ? AND expires_at > ? ORDER BY invited_at, email_norm',
      ),
      receivedInvitation: db.prepare('SELECT org_id, role FROM identity_invitations WHERE id = ? AND email_norm = ? AND expires_at > ?'),
      receivedInvitations: db.prepare(`
        SELECT i.id, i.role, i.invited_at, i.expires_at, o.id AS org_id, o.slug, o.name AS org_name,
          i.invited_by, u.name AS inviter_name, u.email AS inviter_email
        FROM identity_invitations i
        JOIN identity_orgs o ON o.id = i.org_id
        LEFT JOIN identity_users u ON u.id = i.invited_by
        WHERE i.email_norm = ? AND i.expires_at > ?
        ORDER BY i.invited_at, o.slug`),
      deleteInvitation: db.prepare('DELETE FROM identity_invitations WHERE id = ?'),
      pruneInvitations: db.prepare('DELETE FROM identity_invitations WHERE expires_at <= ?'),
      insertSession: db.prepare(
        'INSERT INTO identity_login_sessions (id_hash, user_id, active_org_id, created_at, last_seen_at, expires_at, user_agent, address) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      // Scalar subqueries rather than joins: on every authenticated request, and measured at
      // 3.7 us against 22 us for the same lookups written as two joins (SQLite 3.54).
      session: db.prepare(`
        SELECT s.user_id, s.active_org_id, s.last_seen_at, s.expires_at, s.revoked_at,
          (SELECT email FROM identity_users WHERE id = s.user_id) AS email,
          (SELECT name FROM identity_users WHERE id = s.user_id) AS name,
          (SELECT role FROM identity_memberships WHERE user_id = s.user_id AND org_id = s.active_org_id) AS role
        FROM identity_login_sessions s
        WHERE s.id_hash = ?`),
      touchSession: db.prepare('UPDATE identity_login_sessions SET last_seen_at = ? WHERE id_hash = ?'),
      revokeSession: db.prepare('UPDATE identity_login_sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL'),
      revokeUserSessions: db.prepare('UPDATE identity_login_sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL'),
      revokeUserRefreshTokens: db.prepare('UPDATE identity_refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL'),
      setActiveOrg: db.prepare('UPDATE identity_login_sessions SET active_org_id = ? WHERE id_hash = ?'),
      pruneSessions: db.prepare('DELETE FROM identity_login_sessions WHERE expires_at < ? OR revoked_at < ?'),
      insertSetup: db.prepare('INSERT INTO identity_setup_tokens (token_hash, created_at, expires_at) VALUES (?, ?, ?)'),
      expireSetups: db.prepare('UPDATE identity_setup_tokens SET used_at = ? WHERE used_at IS NULL'),
      setup: db.prepare('SELECT expires_at, used_at FROM identity_setup_tokens WHERE token_hash = ?'),
      useSetup: db.prepare('UPDATE identity_setup_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL'),
    };
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn).immediate();
  }

  countUsers(): number {
    return (this.#s.countUsers.get() as { n: number }).n;
  }

  userById(id: string): User | undefined {
    const row = this.#s.userById.get(id) as UserRow | undefined;
    return row && toUser(row);
  }

  /** The user with the given email and its password hash (for sign-in). */
  credentialsByEmail(email: string): { user: User; passwordHash: string | null } | undefined {
    const row = this.#s.userByEmail.get(normalizeEmail(email)) as UserRow | undefined;
    return row && { user: toUser(row), passwordHash: row.password_hash };
  }

  userByExternalId(externalId: string): User | undefined {
    const row = this.#s.userByExternal.get(externalId) as UserRow | undefined;
    return row && toUser(row);
  }

  insertUser(input: { email: string | null; name: string | null; passwordHash: string | null; externalId?: string | null }): User {
    const id = randomUUID();
    const now = new Date().toISOString();
    const email = input.email?.trim() || null;
    try {
      this.#s.insertUser.run(id, email, email ? normalizeEmail(email) : null, input.name, input.passwordHash, input.externalId ?? null, now, now);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new WharfError('conflict', 'A user with this email already exists');
      throw err;
    }
    return { id, email, name: input.name, createdAt: now };
  }

  updateProfile(id: string, email: string | null, name: string | null): void {
    this.#s.updateProfile.run(email, email ? normalizeEmail(email) : null, name, new Date().toISOString(), id);
  }

  setPassword(userId: string, passwordHash: string): void {
    this.#s.setPassword.run(passwordHash, new Date().toISOString(), userId);
  }

  /** An organization by uuid or slug. */
  org(idOrSlug: string): Org | undefined {
    const row = (UUID.test(idOrSlug) ? this.#s.orgById.get(idOrSlug.toLowerCase()) : this.#s.orgBySlug.get(idOrSlug)) as OrgRow | undefined;
    return row && toOrg(row);
  }

  orgByExternalId(externalId: string): Org | undefined {
    const row = this.#s.orgByExternal.get(externalId) as OrgRow | undefined;
    return row && toOrg(row);
  }

  /** Inserts an organization; a taken slug is a conflict when asked for, and gets a suffix when derived. */
  insertOrg(input: { name: string; slug?: string; externalId?: string | null }): Org {
    const now = new Date().toISOString();
    const id = randomUUID();
    if (input.slug !== undefined) {
      if (!SLUG.test(input.slug)) throw new WharfError('bad_request', 'slug must be 1-48 lowercase letters, digits or dashes');
      if (this.#s.orgBySlug.get(input.slug)) throw new WharfError('conflict', `slug "${input.slug}" is taken`);
      this.#s.insertOrg.run(id, input.slug, input.name, input.externalId ?? null, now);
      return { id, slug: input.slug, name: input.name, createdAt: now };
    }
    const base = slugify(input.name);
    let slug = base;
    for (let n = 2; this.#s.orgBySlug.get(slug); n++) slug = `${base}-${n}`;
    this.#s.insertOrg.run(id, slug, input.name, input.externalId ?? null, now);
    return { id, slug, name: input.name, createdAt: now };
  }

  renameOrg(id: string, name: string): void {
    this.#s.renameOrg.run(name, id);
  }

  role(userId: string, orgId: string): Role | undefined {
    return this.#s.role.get(userId, orgId) as Role | undefined;
  }

  setMember(orgId: string, userId: string, role: Role): void {
    this.#s.upsertMember.run(orgId, userId, role, new Date().toISOString());
  }

  removeMember(orgId: string, userId: string): boolean {
    return this.#s.deleteMember.run(orgId, userId).changes > 0;
  }

  ownerCount(orgId: string): number {
    return this.#s.owners.get(orgId) as number;
  }

  orgsOf(userId: string): OrgWithRole[] {
    return (this.#s.orgsOf.all(userId) as (OrgRow & { role: Role })[]).map((r) => ({ ...toOrg(r), role: r.role }));
  }

  members(orgId: string): { userId: string; email: string | null; name: string | null; role: Role; since: string }[] {
    return (this.#s.members.all(orgId) as { id: string; email: string | null; name: string | null; role: Role; created_at: string }[]).map((r) => ({
      userId: r.id,
      email: r.email,
      name: r.name,
      role: r.role,
      since: r.created_at,
    }));
  }

  /** Whether the user with this email is a member of the organization. */
  isMemberByEmail(orgId: string, email: string): boolean {
    return this.#s.memberByEmail.get(orgId, normalizeEmail(email)) !== undefined;
  }

  /** Creates the invitation of `email` to the organization, or updates and renews the one there is. */
  upsertInvitation(input: { orgId: string; email: string; role: Role; invitedBy: string; expiresAt: string }): Invitation {
    const email = input.email.trim();
    const row = this.#s.upsertInvitation.get(
      randomUUID(),
      input.orgId,
      email,
      normalizeEmail(email),
      input.role,
      input.invitedBy,
      new Date().toISOString(),
      input.expiresAt,
    ) as InvitationRow;
    return toInvitation(row);
  }

  /** The organization's unexpired invitation of `email`. */
  pendingInvitationByEmail(orgId: string, email: string, now: string): Invitation | undefined {
    const row = this.#s.invitationByEmail.get(orgId, normalizeEmail(email), now) as InvitationRow | undefined;
    return row && toInvitation(row);
  }

  /** The organization's unexpired invitation with this id; another organization's is undefined. */
  pendingInvitation(orgId: string, id: string, now: string): Invitation | undefined {
    const row = this.#s.orgInvitation.get(id, orgId, now) as InvitationRow | undefined;
    return row && toInvitation(row);
  }

  pendingInvitations(orgId: string, now: string): Invitation[] {
    return (this.#s.orgInvitations.all(orgId, now) as InvitationRow[]).map(toInvitation);
  }

  /** The unexpired invitation with this id addressed to `email`; one to another email is undefined. */
  receivedInvitation(id: string, email: string, now: string): { orgId: string; role: Role } | undefined {
    const row = this.#s.receivedInvitation.get(id, normalizeEmail(email), now) as { org_id: string; role: Role } | undefined;
    return row && { orgId: row.org_id, role: row.role };
  }

  /** The unexpired invitations addressed to `email`, whatever its case. */
  receivedInvitations(email: string, now: string): ReceivedInvitation[] {
    type Row = {
      id: string;
      role: Role;
      invited_at: string;
      expires_at: string;
      org_id: string;
      slug: string;
      org_name: string;
      invited_by: string | null;
      inviter_name: string | null;
      inviter_email: string | null;
    };
    return (this.#s.receivedInvitations.all(normalizeEmail(email), now) as Row[]).map((r) => ({
      id: r.id,
      org: { id: r.org_id, slug: r.slug, name: r.org_name },
      role: r.role,
      invitedBy: r.invited_by ? { name: r.inviter_name, email: r.inviter_email } : null,
      invitedAt: r.invited_at,
      expiresAt: r.expires_at,
    }));
  }

  deleteInvitation(id: string): boolean {
    return this.#s.deleteInvitation.run(id).changes > 0;
  }

  /** Deletes invitations expired at `now`. */
  pruneInvitations(now: string): number {
    return this.#s.pruneInvitations.run(now).changes;
  }

  insertSession(input: {
    idHash: string;
    userId: string;
    activeOrgId: string | null;
    expiresAt: string;
    userAgent: string | null;
    address: string | null;
  }): void {
    const now = new Date().toISOString();
    this.#s.insertSession.run(input.idHash, input.userId, input.activeOrgId, now, now, input.expiresAt, input.userAgent, input.address);
  }

  session(idHash: string): SessionRow | undefined {
    return this.#s.session.get(idHash) as SessionRow | undefined;
  }

  touchSession(idHash: string, lastSeenAt: string): void {
    this.#s.touchSession.run(lastSeenAt, idHash);
  }

  revokeSession(idHash: string): void {
    this.#s.revokeSession.run(new Date().toISOString(), idHash);
  }

  /** Ends every dashboard session and command-line sign-in (refresh tokens) of a user. */
  revokeUserSessions(userId: string): void {
    const now = new Date().toISOString();
    this.transaction(() => {
      this.#s.revokeUserSessions.run(now, userId);
      this.#s.revokeUserRefreshTokens.run(now, userId);
    });
  }

  setActiveOrg(idHash: string, orgId: string): void {
    this.#s.setActiveOrg.run(orgId, idHash);
  }

  /** Deletes sessions that expired, and revoked ones older than `before`. */
  pruneSessions(now: string, before: string): number {
    return this.#s.pruneSessions.run(now, before).changes;
  }

  /** Replaces any unused setup token with a new one. */
  newSetupToken(tokenHash: string, expiresAt: string): void {
    const now = new Date().toISOString();
    this.transaction(() => {
      this.#s.expireSetups.run(now);
      this.#s.insertSetup.run(tokenHash, now, expiresAt);
    });
  }

  setupTokenValid(tokenHash: string): boolean {
    const row = this.#s.setup.get(tokenHash) as { expires_at: string; used_at: string | null } | undefined;
    return !!row && !row.used_at && row.expires_at > new Date().toISOString();
  }

  /** Marks the token used; false when it was already used (a concurrent setup won). */
  useSetupToken(tokenHash: string): boolean {
    return this.#s.useSetup.run(new Date().toISOString(), tokenHash).changes === 1;
  }
}
