/**
 * Personal access tokens: minted by a signed-in user (dashboard or CLI) or by another PAT, acting
 * for that user in one organization, shown once (only the SHA-256 is stored). Owners and admins
 * see and revoke every token of the organization; members their own.
 */
import { WharfError } from '../../core/errors.ts';
import type { IdentityService } from '../identity/types.ts';
import { newPat } from './credentials.ts';
import type { PatRow, SessionsStore } from './store.ts';
import type { Account } from './types.ts';

export class PersonalAccessTokens {
  readonly #store: SessionsStore;
  readonly #identity: IdentityService;

  constructor(store: SessionsStore, identity: IdentityService) {
    this.#store = store;
    this.#identity = identity;
  }

  /** The tokens the caller may see: all of the organization's for owners and admins, else the caller's own. */
  async list(account: Account): Promise<PatRow[]> {
    const all = await this.#manages(account);
    return (await this.#store.patsOfOrg(account.orgId)).filter((t) => all || t.user_id === account.userId);
  }

  /** Mints a token for the caller in its organization; the token itself is in the answer only. */
  async mint(account: Account, input: { name: string; expiresAt?: string | null }): Promise<{ row: PatRow; token: string }> {
    const now = new Date();
    let expiresAt: string | null = null;
    if (input.expiresAt) {
      const at = new Date(input.expiresAt);
      if (at.getTime() <= now.getTime()) {
        throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { expires_at: ['expires_at must be in the future'] } });
      }
      expiresAt = at.toISOString();
    }
    const pat = newPat();
    const createdBy = account.actor.kind === 'pat' ? `pat:${account.actor.id}` : account.actor.kind;
    const row = await this.#store.insertPat(
      { orgId: account.orgId, userId: account.userId, name: input.name, hash: pat.hash, hint: pat.hint, createdBy, expiresAt },
      now.toISOString(),
    );
    return { row, token: pat.token };
  }

  /** Revokes a token by path id; 404 alike for a missing, revoked, foreign or not-yours one. */
  async revoke(account: Account, idParam: string | undefined): Promise<PatRow> {
    const id = /^[1-9]\d{0,15}$/.test(String(idParam)) ? Number(idParam) : 0;
    const row = id ? await this.#store.pat(id, account.orgId) : undefined;
    if (!row || row.revoked_at || (row.user_id !== account.userId && !(await this.#manages(account)))) throw new WharfError('not_found', 'Token not found');
    await this.#store.revokePat(row.id, new Date().toISOString());
    return row;
  }

  async #manages(account: Account): Promise<boolean> {
    const role = await this.#identity.roleOf(account.userId, account.orgId);
    return role === 'owner' || role === 'admin';
  }
}
