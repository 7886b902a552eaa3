/**
 * Where rate-limit counters live. The plugin talks to a {@link RateLimitStore} only: counters in
 * this process's memory (here) or in Redis, shared between instances (`redis-store.ts`); both are
 * rate-limiter-flexible limiters with the same options and the same fixed windows.
 */
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

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

/** Counters in this process's memory (rate-limiter-flexible's RateLimiterMemory); each key expires with its window. */
export function memoryStore(): RateLimitStore {
  return {
    counter(spec) {
      const limiter = new RateLimiterMemory({ keyPrefix: spec.name, points: spec.limit, duration: spec.windowSeconds });
      return { consume: (key, cost = 1) => consumeFrom(limiter, spec, key, cost) };
    },
  };
}
