/**
 * Dashboard sessions: the `__session` cookie is a short-lived JWT (EdDSA, the data dir's key)
 * that names a server-side login session. Every request checks the session row, so logout and
 * revocation take effect on the next request; the JWT is renewed once half its life is gone.
 */
import type { Context } from 'koa';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { CoreConfig } from '../../core/config.ts';
import { VerifiedTokens } from '../../core/cache.ts';
import { WharfError } from '../../core/errors.ts';
import type { Keys } from '../../core/keys.ts';
import { randomToken, sha256Hex } from '../../core/tokens.ts';
import type { IdentityConfig } from './config.ts';
import type { IdentityStore } from './store.ts';
import type { DashboardPrincipal } from './types.ts';

export const SESSION_COOKIE = '__session';
const AUDIENCE = 'wharf:session';
const TOUCH_EVERY_MS = 60_000;

interface Claims {
  sid: string;
  sub: string;
  iat: number;
  exp: number;
}

export class LoginSessions {
  readonly #store: IdentityStore;
  readonly #keys: Keys;
  readonly #config: IdentityConfig;
  readonly #issuer: string;
  readonly #secure: boolean;
  readonly #verified = new VerifiedTokens<Claims>();

  constructor(store: IdentityStore, keys: Keys, config: IdentityConfig, core: CoreConfig) {
    this.#store = store;
    this.#keys = keys;
    this.#config = config;
    this.#issuer = core.server.public_url;
    this.#secure = core.server.public_url.startsWith('https:');
  }

  /** Starts a login session for `userId` and sets its cookie. */
  async start(ctx: Context, userId: string, activeOrgId: string | null): Promise<void> {
    const sid = randomToken(32);
    const maxAgeMs = this.#config.session_max_age_days * 86_400_000;
    await this.#store.insertSession({
      idHash: sha256Hex(sid),
      userId,
      activeOrgId,
      expiresAt: new Date(Date.now() + maxAgeMs).toISOString(),
      userAgent: ctx.get('user-agent').slice(0, 256) || null,
      address: ctx.ip || null,
    });
    await this.#setCookie(ctx, sid, userId);
  }

  async #setCookie(ctx: Context, sid: string, userId: string): Promise<void> {
    const ttl = this.#config.session_token_ttl_seconds;
    const token = await new SignJWT({ sid })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
      .setSubject(userId)
      .setIssuer(this.#issuer)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(`${ttl}s`)
      .sign(this.#keys.signingKey);
    // Koa refuses Secure cookies on a plain connection; behind a TLS proxy the public URL decides.
    ctx.cookies.secure = ctx.cookies.secure || this.#secure;
    ctx.cookies.set(SESSION_COOKIE, token, { httpOnly: true, sameSite: 'lax', secure: this.#secure, path: '/', maxAge: ttl * 1000, overwrite: true });
  }

  clearCookie(ctx: Context): void {
    ctx.cookies.secure = ctx.cookies.secure || this.#secure;
    ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'lax', secure: this.#secure, path: '/', maxAge: 0, overwrite: true });
  }

  async #verify(token: string): Promise<Claims | null> {
    const cached = this.#verified.get(token);
    if (cached) return cached;
    try {
      const { payload } = await jwtVerify(token, this.#keys.verifyKey, { issuer: this.#issuer, audience: AUDIENCE, algorithms: ['EdDSA'] });
      if (typeof payload.sid !== 'string' || typeof payload.sub !== 'string' || typeof payload.exp !== 'number') return null;
      const claims = { sid: payload.sid, sub: payload.sub, iat: payload.iat ?? 0, exp: payload.exp };
      this.#verified.set(token, claims, claims.exp);
      return claims;
    } catch (err) {
      if (err instanceof joseErrors.JOSEError) return null;
      throw err;
    }
  }

  /** The principal of a cookie, or null when it is malformed, expired, revoked or its user is gone. */
  async resolve(token: string, ctx: Context): Promise<DashboardPrincipal | null> {
    const claims = await this.#verify(token);
    if (!claims) return null;
    const idHash = sha256Hex(claims.sid);
    const row = await this.#store.session(idHash);
    const nowIso = new Date().toISOString();
    if (!row || row.revoked_at || row.expires_at <= nowIso || row.user_id !== claims.sub) return null;
    if (Date.parse(nowIso) - Date.parse(row.last_seen_at) > TOUCH_EVERY_MS) await this.#store.touchSession(idHash, nowIso);
    const now = Math.floor(Date.now() / 1000);
    if (now - claims.iat > this.#config.session_token_ttl_seconds / 2) await this.#setCookie(ctx, claims.sid, claims.sub);
    return {
      kind: 'session',
      userId: row.user_id,
      email: row.email,
      name: row.name,
      orgId: row.role ? row.active_org_id : null,
      role: row.role,
      sessionId: idHash,
    };
  }

  async end(ctx: Context, principal: DashboardPrincipal | undefined): Promise<void> {
    if (principal?.sessionId) await this.#store.revokeSession(principal.sessionId);
    this.clearCookie(ctx);
  }

  async setActiveOrg(principal: DashboardPrincipal, orgId: string): Promise<void> {
    if (!principal.sessionId) throw new WharfError('bad_request', 'No login session');
    await this.#store.setActiveOrg(principal.sessionId, orgId);
  }
}
