/**
 * The two messaging credentials. Both are opaque random strings with a distinct prefix, so the
 * core's resolver registry picks the right resolver without touching the database:
 * `wsk_<43 base64url chars>` is a session API key, `wpat_<43 base64url chars>` a personal access
 * token. Only their SHA-256 is used to look them up; every request looks them up again (no
 * cache), so a regenerated key or a revoked token fails on the very next request.
 *
 * Besides the resolvers, the credentials routes declare: `account` (a personal access token or a
 * signed-in user, loaded as the organization it acts in) and `sessionKey` (loaded as its session,
 * the session's network and the key as an audit actor).
 */
import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import type { Credential } from '../../core/api.ts';
import type { AuthRegistry } from '../../core/auth.ts';
import { WharfError } from '../../core/errors.ts';
import { randomToken, sha256Hex } from '../../core/tokens.ts';
import type { IdentityService, UserPrincipal } from '../identity/types.ts';
import type { NetworkAdapter } from './networks/types.ts';
import type { SessionsStore } from './store.ts';
import type { Account, ActingSession, PatPrincipal, SessionKeyPrincipal, SessionRecord } from './types.ts';

const SESSION_KEY_PREFIX = 'wsk_';
const PAT_PREFIX = 'wpat_';
const SESSION_KEY_SHAPE = /^wsk_[A-Za-z0-9_-]{43}$/;
const PAT_SHAPE = /^wpat_[A-Za-z0-9_-]{43}$/;

/** Credential kinds of account-level operations: a PAT, or a signed-in user (dashboard, CLI). */
const ACCOUNT_KINDS = ['pat', 'session', 'oauth'] as const;

export function newSessionKey(): { key: string; hash: string } {
  const key = `${SESSION_KEY_PREFIX}${randomToken(32)}`;
  return { key, hash: sha256Hex(key) };
}

export function newPat(): { token: string; hash: string; hint: string } {
  const token = `${PAT_PREFIX}${randomToken(32)}`;
  return { token, hash: sha256Hex(token), hint: token.slice(-4) };
}

/** A webhook secret: 32 random bytes, hex (what the default signing mode sends as is). */
export function newWebhookSecret(): string {
  return randomBytes(32).toString('hex');
}

export interface MessagingCredentials {
  account: Credential<Account>;
  sessionKey: Credential<ActingSession>;
}

/** Registers the two resolvers and returns the credentials routes declare. */
export function messagingCredentials(options: {
  auth: AuthRegistry;
  store: SessionsStore;
  identity: IdentityService;
  lastUsedResolutionMs: number;
  network(session: SessionRecord): NetworkAdapter | undefined;
}): MessagingCredentials {
  const { auth, store, identity, lastUsedResolutionMs } = options;
  // The session row the key resolved to, handed to the credential's loader of the same request
  // (principals are per request), so a session-key request reads its session once.
  const resolved = new WeakMap<SessionKeyPrincipal, SessionRecord>();

  auth.register({
    name: 'sessions:session-key',
    source: { bearer: (token) => token.startsWith(SESSION_KEY_PREFIX) },
    async resolve(token): Promise<SessionKeyPrincipal | null> {
      if (!SESSION_KEY_SHAPE.test(token)) return null;
      const session = await store.sessionByKeyHash(sha256Hex(token));
      if (!session) return null;
      const principal: SessionKeyPrincipal = { kind: 'sessionKey', sessionId: session.id, orgId: session.orgId };
      resolved.set(principal, session);
      return principal;
    },
    describe(principal) {
      const p = principal as SessionKeyPrincipal;
      return { kind: 'sessionKey', sessionId: p.sessionId, orgId: p.orgId };
    },
  });

  auth.register({
    name: 'sessions:personal-access-token',
    source: { bearer: (token) => token.startsWith(PAT_PREFIX) },
    async resolve(token): Promise<PatPrincipal | null> {
      if (!PAT_SHAPE.test(token)) return null;
      const row = await store.patByHash(sha256Hex(token));
      if (!row || row.revoked_at) return null;
      const now = new Date();
      if (row.expires_at && Date.parse(row.expires_at) <= now.getTime()) return null;
      // A token acts for its user in its organization: it stops when the user leaves it.
      if (!(await identity.roleOf(row.user_id, row.org_id))) return null;
      if (!row.last_used_at || now.getTime() - Date.parse(row.last_used_at) >= lastUsedResolutionMs) await store.touchPat(row.id, now.toISOString());
      return { kind: 'pat', patId: row.id, orgId: row.org_id, userId: row.user_id };
    },
    async describe(principal) {
      const p = principal as PatPrincipal;
      const org = await identity.getOrg(p.orgId);
      return { kind: 'pat', patId: p.patId, userId: p.userId, orgId: p.orgId, orgs: org ? [{ id: org.id, slug: org.slug, name: org.name }] : [] };
    },
  });

  return {
    account: {
      kinds: ACCOUNT_KINDS,
      needs: 'personal access token',
      schemes: ['personalAccessToken'],
      load: (ctx, principal) => accountOf(ctx, principal as PatPrincipal | UserPrincipal),
    },
    sessionKey: {
      kinds: ['sessionKey'],
      needs: 'session API key',
      schemes: ['sessionApiKey'],
      load: async (ctx, principal) => {
        const key = principal as SessionKeyPrincipal;
        const session = resolved.get(key) ?? (await store.session(key.sessionId));
        if (!session) throw new WharfError('unauthorized', 'Invalid or expired credential');
        return { session, network: options.network(session), actor: { kind: 'sessionKey', id: String(session.id), userId: null, address: ctx.ip || null } };
      },
    },
  };
}

function accountOf(ctx: Context, principal: PatPrincipal | UserPrincipal): Account {
  const address = ctx.ip || null;
  if (principal.kind === 'pat') {
    return { orgId: principal.orgId, userId: principal.userId, actor: { kind: 'pat', id: String(principal.patId), userId: principal.userId, address } };
  }
  if (!principal.orgId) {
    throw new WharfError('forbidden', 'No organization selected: choose one (PUT /auth/active-org) or send X-Service-Org');
  }
  return { orgId: principal.orgId, userId: principal.userId, actor: { kind: principal.kind, id: principal.userId, userId: principal.userId, address } };
}
