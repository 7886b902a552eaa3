/**
 * The limiter: picks the rule of a request's path, the caller's counter (its credential, or its
 * client address when it has no valid one), counts the request, sets the X-RateLimit-* headers
 * before anything below can answer, and refuses with 429 when the window is used up.
 */
import { isIPv6 } from 'node:net';
import type { Context, Next } from 'koa';
import { authenticate, type AuthResult } from '../../core/auth.ts';
import { WharfError } from '../../core/errors.ts';
import { longestPrefix, normalizePrefix } from '../../core/paths.ts';
import { EXEMPT_PATHS, KIND_NAMES, type KindName, type RateLimitConfig } from './config.ts';
import type { Counter, RateLimitStore } from './store.ts';

/** A rule ready for requests: its counters built once. */
export interface CompiledRule {
  name: string;
  prefixes: readonly string[];
  /** Calls without a valid credential, per client address. */
  anonymous: Counter;
  /** Credentials of a kind without its own limit. */
  credential: Counter;
  byKind: ReadonlyMap<KindName, Counter>;
}

/**
 * The field that identifies each kind of principal. Several credentials of one PAT, session
 * key or app share its counter; a user's cookie sessions share one, as do its CLI tokens.
 */
const ID_FIELD: Readonly<Record<string, string>> = {
  session: 'userId',
  oauth: 'userId',
  pat: 'patId',
  sessionKey: 'sessionId',
  appToken: 'appId',
};
/** For a kind not named above, the first of these the principal has. */
const FALLBACK_ID_FIELDS = ['id', 'patId', 'tokenId', 'appId', 'sessionId', 'userId'];

export function compileRules(config: RateLimitConfig, store: RateLimitStore): CompiledRule[] {
  return Object.entries(config.rules).map(([name, rule]) => {
    const windowSeconds = rule.window_seconds ?? config.window_seconds;
    // Prefixes and limits of custom rules are checked present by the config schema.
    const limit = rule.limit!;
    const counter = (suffix: string, n: number) => store.counter({ name: `${name}:${suffix}`, limit: n, windowSeconds });
    const byKind = new Map<KindName, Counter>();
    for (const kind of KIND_NAMES) {
      const n = rule.kinds?.[kind];
      if (n !== undefined) byKind.set(kind, counter(kind, n));
    }
    return {
      name,
      prefixes: rule.prefixes!,
      anonymous: counter('anonymous', rule.anonymous ?? limit),
      credential: counter('credential', limit),
      byKind,
    };
  });
}

/** The rule of a path: the longest prefix it is under (core/paths.ts), health, readiness and metrics excepted. */
function ruleFinder(rules: readonly CompiledRule[]) {
  const ruleOf = longestPrefix(rules.flatMap((rule) => rule.prefixes.map((prefix) => [prefix, rule] as const)));
  const exempt = new Set(EXEMPT_PATHS);
  return function ruleFor(path: string): CompiledRule | undefined {
    const lower = path.toLowerCase();
    return exempt.has(lower.endsWith('/') ? normalizePrefix(lower) : lower) ? undefined : ruleOf(lower);
  };
}

/** `sessionKey` -> `session_key`. */
function kindName(kind: string): string {
  return kind.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The stable identity of a principal (`pat:<patId>`), or undefined when it has no id field. */
export function principalKey(principal: { kind: string }): string | undefined {
  const fields = principal as unknown as Record<string, unknown>;
  const named = ID_FIELD[principal.kind];
  for (const field of named ? [named] : FALLBACK_ID_FIELDS) {
    const value = fields[field];
    if ((typeof value === 'string' && value !== '') || typeof value === 'number') return `${principal.kind}:${value}`;
  }
  return undefined;
}

/**
 * The counter key of a client address: IPv4 as is (also when written IPv4-mapped), IPv6 cut to
 * its first `v6Bits` bits, since a single host can usually pick any address of its /64.
 */
export function addressKey(ip: string, v6Bits: number): string {
  // IPv4, the usual case: as is. Only a colon can make an IPv6 address or a mapped one, and only a
  // percent sign a zone to strip: no regular expressions (node's IPv6 test is a long one).
  if (!ip.includes(':') && !ip.includes('%')) return `ip:${ip || 'unknown'}`;
  const address = ip.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return `ip:${mapped[1]}`;
  if (!isIPv6(address)) return `ip:${address || 'unknown'}`;
  let text = address.toLowerCase();
  const v4 = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const groups = [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups].map((g) => parseInt(g, 16));
  const out: string[] = [];
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, v6Bits - i * 16));
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
    out.push(((groups[i] ?? 0) & mask).toString(16));
  }
  return `ip:${out.join(':')}/${v6Bits}`;
}

export interface LimiterOptions {
  rules: readonly CompiledRule[];
  ipv6Subnet: number;
  /** Called once per refused request, with the rule's name. */
  onLimited?(rule: string): void;
}

export function rateLimiter(options: LimiterOptions) {
  const ruleFor = ruleFinder(options.rules);
  // Not async itself: a path no rule covers (health, readiness, metrics) passes straight on,
  // without a promise and an async frame of its own.
  return function rateLimit(ctx: Context, next: Next) {
    const rule = ruleFor(ctx.path);
    return rule ? limit(ctx, next, rule) : next();
  };

  async function limit(ctx: Context, next: Next, rule: CompiledRule) {
    let auth: AuthResult | undefined;
    try {
      auth = await authenticate(ctx);
    } catch {
      // A resolver that refuses by throwing (a foreign X-Service-Org, say) is answered by the
      // route that asks again; here the caller counts by address like any invalid credential.
      auth = undefined;
    }
    const principal = auth?.principal as { kind: string } | undefined;
    const identity = principal && principalKey(principal);
    const counter = identity ? (rule.byKind.get(kindName(principal.kind) as KindName) ?? rule.credential) : rule.anonymous;
    const key = identity ?? addressKey(ctx.ip, options.ipv6Subnet);

    let decision: Awaited<ReturnType<typeof counter.consume>>;
    try {
      decision = await counter.consume(key);
    } catch (err) {
      // A store that cannot answer must not take the server down with it: let the request through.
      ctx.log.warn({ err, rule: rule.name }, 'rate limit store failed; request not counted');
      return next();
    }
    const reset = Math.ceil(decision.resetAt / 1000);
    ctx.set('X-RateLimit-Limit', String(decision.limit));
    ctx.set('X-RateLimit-Remaining', String(decision.remaining));
    ctx.set('X-RateLimit-Reset', String(reset));
    if (!decision.allowed) {
      options.onLimited?.(rule.name);
      const retryAfter = Math.max(1, Math.ceil((decision.resetAt - Date.now()) / 1000));
      throw new WharfError('rate_limited', `Too many requests; try again in ${retryAfter} second${retryAfter === 1 ? '' : 's'}`, { retryAfter });
    }
    return next();
  }
}
