/**
 * Command-line access tokens in built-in mode: JWTs signed with the data dir's Ed25519 key,
 * audience `wharf-cli`, naming the user and the organization approved at sign-in, one hour.
 */
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import { VerifiedTokens } from '../../core/cache.ts';
import type { Keys } from '../../core/keys.ts';

const CLI_AUDIENCE = 'wharf-cli';
/** Looks like a JWT (three base64url parts, a JSON header): cheap to test before verifying. */
export const JWT_SHAPE = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface AccessClaims {
  userId: string;
  orgId: string | null;
}

export class AccessTokens {
  readonly #keys: Keys;
  readonly #issuer: string;
  readonly #ttl: number;
  readonly #verified = new VerifiedTokens<AccessClaims>();

  constructor(keys: Keys, issuer: string, ttlSeconds: number) {
    this.#keys = keys;
    this.#issuer = issuer;
    this.#ttl = ttlSeconds;
  }

  get ttlSeconds(): number {
    return this.#ttl;
  }

  async issue(claims: AccessClaims): Promise<string> {
    return new SignJWT(claims.orgId ? { org: claims.orgId } : {})
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt' })
      .setSubject(claims.userId)
      .setIssuer(this.#issuer)
      .setAudience(CLI_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(`${this.#ttl}s`)
      .setJti(crypto.randomUUID())
      .sign(this.#keys.signingKey);
  }

  /** The claims of a valid token, or null (bad signature, expired, wrong issuer or audience). */
  async verify(token: string): Promise<AccessClaims | null> {
    const cached = this.#verified.get(token);
    if (cached) return cached;
    try {
      const { payload } = await jwtVerify(token, this.#keys.verifyKey, {
        issuer: this.#issuer,
        audience: CLI_AUDIENCE,
        algorithms: ['EdDSA'],
        typ: 'at+jwt',
      });
      if (typeof payload.sub !== 'string' || typeof payload.exp !== 'number') return null;
      const claims = { userId: payload.sub, orgId: typeof payload.org === 'string' ? payload.org : null };
      this.#verified.set(token, claims, payload.exp);
      return claims;
    } catch (err) {
      if (err instanceof joseErrors.JOSEError) return null;
      throw err;
    }
  }
}
