/** The identity service: users, organizations and memberships, and password sign-in. */
import { randomBytes } from 'node:crypto';
import { WharfError } from '../../core/errors.ts';
import type { IdentityConfig } from './config.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import type { IdentityStore } from './store.ts';
import type { IdentityService, Org, User } from './types.ts';

/** What Wharf accepts as an email address: something@domain.tld, no spaces. */
export const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface BuiltinIdentity extends IdentityService {
  /** The user for an email and password, or null; takes the same time whether or not the email exists. */
  authenticate(email: string, password: string): Promise<User | null>;
  setPassword(userId: string, password: string): Promise<void>;
  checkPassword(password: string): void;
  /** Validates and hashes a new user's fields, so the insert can happen inside a transaction. */
  prepareUser(input: { email: string; password?: string; name?: string | null }): Promise<{ email: string; name: string | null; passwordHash: string | null }>;
}

/** Creates an organization owned by `ownerId` with the given store (one bound to a transaction: the caller's). */
export async function createOrgIn(store: IdentityStore, { name, slug, ownerId }: { name: string; slug?: string; ownerId: string }): Promise<Org> {
  const trimmed = name.trim();
  if (!trimmed) throw new WharfError('bad_request', 'name is required');
  if (trimmed.length > 100) throw new WharfError('bad_request', 'name must be at most 100 characters');
  const org = await store.insertOrg({ name: trimmed, slug });
  await store.setMember(org.id, ownerId, 'owner');
  return org;
}

export async function createIdentityService(store: IdentityStore, config: IdentityConfig): Promise<BuiltinIdentity> {
  // Unknown emails are checked against this decoy so they cost what a wrong password costs.
  // It needs the parameters of a real hash, not to be one: random bytes, nothing computed.
  const decoy = `scrypt$${config.scrypt_cost}$8$1$${randomBytes(16).toString('base64url')}$${randomBytes(32).toString('base64url')}`;

  const checkPassword = (password: string) => {
    if (password.length < config.password_min_length) {
      throw new WharfError('bad_request', `password must be at least ${config.password_min_length} characters`);
    }
  };

  const prepareUser: BuiltinIdentity['prepareUser'] = async ({ email, password, name }) => {
    if (!EMAIL.test(email.trim())) throw new WharfError('bad_request', 'email is not a valid address');
    if (password !== undefined) checkPassword(password);
    const passwordHash = password === undefined ? null : await hashPassword(password, config.scrypt_cost);
    return { email: email.trim(), name: name?.trim() || null, passwordHash };
  };

  return {
    async createUser(input) {
      return store.insertUser(await prepareUser(input));
    },
    prepareUser,
    createOrg: (input) => store.transaction((tx) => createOrgIn(tx, input)),
    addMember: (orgId, userId, role) => store.setMember(orgId, userId, role),
    findUserByEmail: async (email) => (await store.credentialsByEmail(email))?.user,
    getUser: (id) => store.userById(id),
    getOrg: (idOrSlug) => store.org(idOrSlug),
    roleOf: (userId, orgId) => store.role(userId, orgId),
    orgsOf: (userId) => store.orgsOf(userId),
    async authenticate(email, password) {
      const found = await store.credentialsByEmail(email);
      const ok = await verifyPassword(password, found?.passwordHash ?? decoy);
      return ok && found?.passwordHash ? found.user : null;
    },
    async setPassword(userId, password) {
      checkPassword(password);
      await store.setPassword(userId, await hashPassword(password, config.scrypt_cost));
      await store.revokeUserSessions(userId);
    },
    checkPassword,
  };
}
