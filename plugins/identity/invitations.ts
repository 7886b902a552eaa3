/**
 * Invitations to an organization: members are invited, never added. An invitation names an
 * email, not a user, so inviting does the same work and answers the same whether or not an
 * account has that email; the invitee, signed in with an account of that email, accepts or
 * declines; an invitation expires after `invitation_ttl_days`.
 */
import { WharfError } from '../../core/errors.ts';
import { EMAIL } from './service.ts';
import type { IdentityStore } from './store.ts';
import type { Invitation, OrgWithRole, ReceivedInvitation, Role } from './types.ts';

const NO_INVITATION = 'No pending invitation with that id (it may have expired, been revoked, declined or already accepted)';

/** The domain rules of invitations; the SQL is the store's. */
export class Invitations {
  readonly #store: IdentityStore;
  readonly #ttlMs: number;

  constructor(store: IdentityStore, options: { ttlDays: number }) {
    this.#store = store;
    this.#ttlMs = options.ttlDays * 86_400_000;
  }

  /**
   * Invites `email` to the organization with `role`, or updates and renews the pending invitation
   * of that email. Owners and admins invite; only owners invite owners or change an owner's
   * invitation. 409 when a member already has that email (the inviter sees the members anyway).
   * Nothing here depends on whether an account has the email, so neither the answer nor its
   * timing tells.
   */
  async invite(input: { orgId: string; inviterId: string; inviterRole: Role; email: string; role: Role }): Promise<Invitation> {
    requireManager(input.inviterRole);
    const email = input.email.trim();
    if (!EMAIL.test(email)) throw new WharfError('bad_request', 'email is not a valid address');
    if (input.role === 'owner' && input.inviterRole !== 'owner') throw new WharfError('forbidden', 'Only owners invite owners');
    return this.#store.transaction(async (store) => {
      const now = new Date();
      if (await store.isMemberByEmail(input.orgId, email)) throw new WharfError('conflict', 'Already a member');
      const current = await store.pendingInvitationByEmail(input.orgId, email, now.toISOString());
      if (current?.role === 'owner' && input.inviterRole !== 'owner') throw new WharfError('forbidden', 'Only owners change an invitation to be an owner');
      return store.upsertInvitation({
        orgId: input.orgId,
        email,
        role: input.role,
        invitedBy: input.inviterId,
        expiresAt: new Date(now.getTime() + this.#ttlMs).toISOString(),
      });
    });
  }

  /** The organization's pending invitations, for its owners and admins. */
  async pending(orgId: string, viewerRole: Role): Promise<Invitation[]> {
    requireManager(viewerRole);
    return this.#store.pendingInvitations(orgId, new Date().toISOString());
  }

  /** Withdraws a pending invitation of the organization; only owners withdraw an owner's. 404 for another organization's. */
  async revoke(orgId: string, id: string, revokerRole: Role): Promise<void> {
    requireManager(revokerRole);
    await this.#store.transaction(async (store) => {
      const invitation = await store.pendingInvitation(orgId, id, new Date().toISOString());
      if (!invitation) throw new WharfError('not_found', NO_INVITATION);
      if (invitation.role === 'owner' && revokerRole !== 'owner') throw new WharfError('forbidden', 'Only owners revoke an invitation to be an owner');
      await store.deleteInvitation(id);
    });
  }

  /** The pending invitations addressed to the user's email (the account's, whatever its case). */
  async received(userId: string): Promise<ReceivedInvitation[]> {
    const email = (await this.#store.userById(userId))?.email;
    return email ? this.#store.receivedInvitations(email, new Date().toISOString()) : [];
  }

  /**
   * Accepts an invitation addressed to the user's email: the membership is made with the invited
   * role and the invitation is spent. A user who is already a member keeps the role it has. 404
   * alike for an unknown, expired, spent or someone else's invitation.
   */
  async accept(userId: string, id: string): Promise<OrgWithRole> {
    return this.#store.transaction(async (store) => {
      const { orgId, role } = await addressedTo(store, userId, id);
      const current = await store.role(userId, orgId);
      if (!current) await store.setMember(orgId, userId, role);
      await store.deleteInvitation(id);
      const org = (await store.org(orgId))!;
      return { ...org, role: current ?? role };
    });
  }

  /** Declines an invitation addressed to the user's email; it is deleted. 404 as for accept. */
  async decline(userId: string, id: string): Promise<void> {
    await this.#store.transaction(async (store) => {
      await addressedTo(store, userId, id);
      await store.deleteInvitation(id);
    });
  }

  /** Deletes expired invitations. */
  prune(now = new Date()): Promise<number> {
    return this.#store.pruneInvitations(now.toISOString());
  }
}

/** The invitation `id` if it is addressed to the user's email (as stored, never one the request names); 404 otherwise. */
async function addressedTo(store: IdentityStore, userId: string, id: string): Promise<{ orgId: string; role: Role }> {
  const email = (await store.userById(userId))?.email;
  const found = email ? await store.receivedInvitation(id, email, new Date().toISOString()) : undefined;
  if (!found) throw new WharfError('not_found', NO_INVITATION);
  return found;
}

/** Owners and admins manage members and invitations. */
export function requireManager(role: Role): void {
  if (role !== 'owner' && role !== 'admin') throw new WharfError('forbidden', 'Only owners and admins manage members');
}
