/**
 * Request guards of the identity plugin: cross-site request forgery protection for cookie
 * requests and sign-in forms, and the sign-in throttle.
 */
import type { Context, Next } from 'koa';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { WharfError } from '../../core/errors.ts';
import type { IdentityConfig } from './config.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses a state-changing browser request that comes from another site. The rule is Go's
 * `net/http.CrossOriginProtection`: `Sec-Fetch-Site` when the browser sends it (same-origin or
 * none pass), else `Origin` compared with the host, and the instance's public origin is always
 * trusted. Requests with neither header are not from a browser and pass. It applies to
 * requests that carry a cookie (the ambient credential CSRF abuses) and to the sign-in forms,
 * which have no cookie yet (login CSRF).
 */
export function crossSiteGuard(options: { publicOrigin: string; cookieNames: readonly string[]; formPaths: readonly string[] }) {
  // Not async: it judges from the headers alone and hands on `next()`'s promise.
  return function refuseCrossSite(ctx: Context, next: Next) {
    if (SAFE_METHODS.has(ctx.method)) return next();
    const cookie = ctx.get('cookie');
    const guarded = options.formPaths.includes(ctx.path) || (cookie !== '' && options.cookieNames.some((name) => cookie.includes(`${name}=`)));
    if (guarded && !sameOrigin(ctx, options.publicOrigin)) {
      throw new WharfError('forbidden', 'Cross-site request refused');
    }
    return next();
  };
}

function sameOrigin(ctx: Context, publicOrigin: string): boolean {
  const origin = ctx.get('origin');
  if (origin && origin === publicOrigin) return true;
  const site = ctx.get('sec-fetch-site');
  if (site) return site === 'same-origin' || site === 'none';
  if (!origin) return true;
  try {
    return new URL(origin).host === ctx.get('host');
  } catch {
    return false;
  }
}

/** Failed sign-ins per account and per client address; over either limit, 429 until the window passes. */
export class LoginThrottle {
  readonly #byAccount: RateLimiterMemory;
  readonly #byAddress: RateLimiterMemory;

  constructor(config: IdentityConfig) {
    this.#byAccount = new RateLimiterMemory({
      keyPrefix: 'login-account',
      points: config.login_max_failures_per_account,
      duration: config.login_window_seconds,
    });
    this.#byAddress = new RateLimiterMemory({
      keyPrefix: 'login-address',
      points: config.login_max_failures_per_address,
      duration: config.login_window_seconds,
    });
  }

  /** Throws 429 when the account or the address has no attempts left. */
  async check(account: string, address: string): Promise<void> {
    const [a, b] = await Promise.all([this.#byAccount.get(account), this.#byAddress.get(address)]);
    const blocked = [
      [a, this.#byAccount.points],
      [b, this.#byAddress.points],
    ].filter(([res, points]) => res && (res as { consumedPoints: number }).consumedPoints >= (points as number));
    if (blocked.length) {
      const ms = Math.max(...blocked.map(([res]) => (res as { msBeforeNext: number }).msBeforeNext));
      const retryAfter = Math.max(1, Math.ceil(ms / 1000));
      throw new WharfError('rate_limited', 'Too many failed sign-in attempts; try again later', { retryAfter });
    }
  }

  async failed(account: string, address: string): Promise<void> {
    await Promise.all([this.#byAccount.penalty(account, 1), this.#byAddress.penalty(address, 1)]);
  }

  async succeeded(account: string): Promise<void> {
    await this.#byAccount.delete(account);
  }
}
