/**
 * Where rate-limit counters live. The plugin talks to a {@link RateLimitStore} only: counters in
 * this process's memory (here) or in Redis, shared between instances (`redis-store.ts`, a
 * rate-limiter-flexible limiter); both count in the same fixed windows.
 */
import { type RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';

/** One limit: `limit` requests per `windowSeconds` for each key. */
export interface CounterSpec {
  /** Unique per store: keys of different counters never collide. */
  name: string;
  limit: number;
  windowSeconds: number;
}

/** The answer to one request. */
export interface Decision {
  /** False when this request went over the limit. */
  allowed: boolean;
  limit: number;
  /** Requests left in the current window after this one (never negative). */
  remaining: number;
  /** When the current window ends and the count starts again, Unix milliseconds. */
  resetAt: number;
}

export interface Counter {
  /** Counts `cost` requests against `key` (fixed window starting at the key's first request). */
  consume(key: string, cost?: number): Promise<Decision>;
}

export interface RateLimitStore {
  counter(spec: CounterSpec): Counter;
  close?(): Promise<void>;
}

/**
 * Counts `cost` against `key` on a rate-limiter-flexible limiter. Over the limit the library
 * rejects with its result object, which is a decision like any other; anything else it rejects
 * with is a real failure, thrown on.
 */
export async function consumeFrom(limiter: RateLimiterAbstract, spec: CounterSpec, key: string, cost: number): Promise<Decision> {
  let res: RateLimiterRes;
  let allowed = true;
  try {
    res = await limiter.consume(key, cost);
  } catch (rejected) {
    if (!(rejected instanceof RateLimiterRes)) throw rejected;
    res = rejected;
    allowed = false;
  }
  return { allowed, limit: spec.limit, remaining: res.remainingPoints, resetAt: Date.now() + Math.max(0, res.msBeforeNext) };
}

/**
 * Counters in this process's memory: the same fixed windows as the Redis store's (a key's window
 * starts at its first request and lasts `windowSeconds`; the request that takes the count past the
 * limit is refused), kept in a map. rate-limiter-flexible's memory limiter does the same with a
 * promise, a result object and a timer per key: 0.5 µs a request in a loop against 0.13 µs here
 * (BENCHMARKS.md, issue 16 part 6). Windows that ended are swept once per window length.
 */
export function memoryStore(): RateLimitStore {
  return {
    counter(spec) {
      const windowMs = spec.windowSeconds * 1000;
      const windows = new Map<string, { count: number; resetAt: number }>();
      let sweepAt = 0;
      return {
        consume(key, cost = 1) {
          const now = Date.now();
          if (now >= sweepAt) {
            for (const [old, w] of windows) if (w.resetAt <= now) windows.delete(old);
            sweepAt = now + windowMs;
          }
          let w = windows.get(key);
          if (!w || w.resetAt <= now) {
            w = { count: 0, resetAt: now + windowMs };
            windows.set(key, w);
          }
          w.count += cost;
          return Promise.resolve({ allowed: w.count <= spec.limit, limit: spec.limit, remaining: Math.max(0, spec.limit - w.count), resetAt: w.resetAt });
        },
      };
    },
  };
}
