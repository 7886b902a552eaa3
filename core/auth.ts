/**
 * Principal resolution: the core's registry of credential resolvers. Plugins register a
 * resolver per credential format (a bearer token prefix, a cookie); a request's credential is
 * resolved at most once, lazily, when a route or middleware asks, so public routes pay nothing.
 */
import type { Context } from 'koa';
import { WharfError } from './errors.ts';

/**
 * Kinds of principal, keyed by `kind`. Plugins add theirs by augmentation:
 * `declare module '../../core/auth.ts' { interface PrincipalKinds { session: DashboardPrincipal } }`.
 */
// biome-ignore lint/suspicious/noEmptyInterface: augmented by plugins.
export interface PrincipalKinds {}

export type PrincipalKind = keyof PrincipalKinds & string;
export type Principal = PrincipalKinds[PrincipalKind] extends never ? { kind: string } : PrincipalKinds[PrincipalKind];

export interface Resolver {
  /** For logs and errors. */
  name: string;
  /** `bearer` with a test on the token (usually its prefix), or a cookie name. */
  source: { bearer: (token: string) => boolean } | { cookie: string };
  /** The principal for this credential, or null when it is invalid, expired or revoked. */
  resolve(value: string, ctx: Context): Promise<Principal | null> | Principal | null;
  /** How `GET /api/cli/me` shows this resolver's principals (for kinds the identity plugin does not own). */
  describe?(principal: Principal): Record<string, unknown> | Promise<Record<string, unknown>>;
}

export interface AuthResult {
  principal?: Principal;
  /** `none`: no credential was sent; `invalid`: one was sent and did not resolve. */
  failure?: 'none' | 'invalid';
  /** The resolver that handled the credential, when one did. */
  resolver?: string;
}

declare module 'koa' {
  interface DefaultState {
    /** Resolves the request's credential once; later calls return the same promise. */
    authenticate?: () => Promise<AuthResult>;
  }
}

export class AuthRegistry {
  readonly #resolvers: Resolver[] = [];

  register(resolver: Resolver): void {
    if (this.#resolvers.some((r) => r.name === resolver.name)) throw new Error(`resolver ${resolver.name} registered twice`);
    this.#resolvers.push(resolver);
  }

  /** The description of a principal by the resolver that produced it, if it gives one. */
  async describe(principal: Principal, resolverName: string | undefined): Promise<Record<string, unknown> | undefined> {
    return this.#resolvers.find((r) => r.name === resolverName)?.describe?.(principal);
  }

  /**
   * Resolves a token the way a bearer header would be, for operations that carry the token
   * elsewhere (in the body, as `POST /api/files` does).
   */
  async resolveToken(token: string, ctx: Context): Promise<AuthResult> {
    const resolver = this.#resolvers.find((r) => 'bearer' in r.source && r.source.bearer(token));
    if (!resolver) return { failure: 'invalid' };
    const principal = await resolver.resolve(token, ctx);
    return principal ? { principal, resolver: resolver.name } : { failure: 'invalid', resolver: resolver.name };
  }

  /** Bearer first (it is explicit), then cookies in registration order. */
  async resolve(ctx: Context): Promise<AuthResult> {
    const header = ctx.get('authorization');
    if (header) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match?.[1]) return { failure: 'invalid' };
      return this.resolveToken(match[1], ctx);
    }
    for (const resolver of this.#resolvers) {
      if (!('cookie' in resolver.source)) continue;
      const value = ctx.cookies.get(resolver.source.cookie);
      if (!value) continue;
      const principal = await resolver.resolve(value, ctx);
      return principal ? { principal, resolver: resolver.name } : { failure: 'invalid', resolver: resolver.name };
    }
    return { failure: 'none' };
  }

  /**
   * Attaches the memoised `authenticate` to a request (the core does, before any middleware): the
   * credential is resolved once, when something first asks.
   */
  attach(ctx: Context): void {
    let pending: Promise<AuthResult> | undefined;
    ctx.state.authenticate = () => (pending ??= this.resolve(ctx));
  }
}

/** The request's principal, or undefined; never throws for a missing or invalid credential. */
export async function authenticate(ctx: Context): Promise<AuthResult> {
  return ctx.state.authenticate ? ctx.state.authenticate() : { failure: 'none' };
}

/**
 * The request's principal if it is one of `kinds` (any kind when omitted): 401 when the
 * credential is missing or invalid, 403 (naming what is needed) when it is valid but of another kind.
 */
export async function requirePrincipal<K extends PrincipalKind>(
  ctx: Context,
  kinds: readonly K[] | undefined,
  needs: string = kinds?.join(' or ') ?? 'credential',
  invalid = 'Invalid or expired credential',
): Promise<PrincipalKinds[K]> {
  const result = await authenticate(ctx);
  if (!result.principal) throw new WharfError('unauthorized', result.failure === 'invalid' ? invalid : 'Authentication required');
  if (kinds && !(kinds as readonly string[]).includes((result.principal as { kind: string }).kind)) {
    throw new WharfError('forbidden', `This operation requires a ${needs}`);
  }
  return result.principal as PrincipalKinds[K];
}
