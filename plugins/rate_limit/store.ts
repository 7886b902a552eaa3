/**
 * Where rate-limit counters live. The plugin talks to a {@link RateLimitStore} only, so a store
 * shared between instances (Redis, the database) can replace the in-memory one by implementing
 * these two methods; rate-limiter-flexible has limiters for most of them with the same options.
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

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

/** Counters in this process's memory (rate-limiter-flexible's RateLimiterMemory); each key expires with its window. */
export function memoryStore(): RateLimitStore {
  return {
    counter(spec) {
      const limiter = new RateLimiterMemory({ keyPrefix: spec.name, points: spec.limit, duration: spec.windowSeconds });
      return {
        async consume(key, cost = 1) {
          let res: RateLimiterRes;
          let allowed = true;
          try {
            res = await limiter.consume(key, cost);
          } catch (rejected) {
            // Over the limit, the library rejects with the same result object; anything else is a real failure.
            if (!(rejected instanceof RateLimiterRes)) throw rejected;
            res = rejected;
            allowed = false;
          }
          return { allowed, limit: spec.limit, remaining: res.remainingPoints, resetAt: Date.now() + Math.max(0, res.msBeforeNext) };
        },
      };
    },
  };
}
