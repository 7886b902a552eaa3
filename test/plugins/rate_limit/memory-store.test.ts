// The memory store's counters (plugins/rate_limit/store.ts) against rate-limiter-flexible's
// memory limiter, which the Redis store uses and the memory store used before: the same
// decisions, remaining counts and window ends for the same requests at the same times, across
// window ends, several keys and costs above one.
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryStore } from '../../../plugins/rate_limit/store.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('the memory store', () => {
  it('decides as rate-limiter-flexible does, window by window', async () => {
    vi.useFakeTimers({ now: new Date('2026-11-26T06:00:00.000Z') });
    const spec = { name: 'rule:anonymous', limit: 5, windowSeconds: 2 };
    const ours = memoryStore().counter(spec);
    const theirs = new RateLimiterMemory({ keyPrefix: spec.name, points: spec.limit, duration: spec.windowSeconds });
    const reference = async (key: string, cost: number) => {
      let res: RateLimiterRes;
      let allowed = true;
      try {
        res = await theirs.consume(key, cost);
      } catch (rejected) {
        if (!(rejected instanceof RateLimiterRes)) throw rejected;
        res = rejected;
        allowed = false;
      }
      return { allowed, limit: spec.limit, remaining: res.remainingPoints, resetAt: Date.now() + Math.max(0, res.msBeforeNext) };
    };
    let seed = 11;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const seen = { allowed: 0, refused: 0, windows: new Set<number>() };
    for (let i = 0; i < 400; i++) {
      const key = `ip:10.0.0.${random(3)}`;
      const cost = random(5) === 0 ? 2 : 1;
      const mine = await ours.consume(key, cost);
      expect([i, key, mine]).toEqual([i, key, await reference(key, cost)]);
      seen[mine.allowed ? 'allowed' : 'refused']++;
      seen.windows.add(mine.resetAt);
      // From nothing to past a window end between two requests.
      await vi.advanceTimersByTimeAsync([0, 0, 0, 1, 50, 150, 600, 1999, 2000, 2500][random(10)]!);
    }
    // The sequence did meet both answers and many windows.
    expect(seen.allowed).toBeGreaterThan(50);
    expect(seen.refused).toBeGreaterThan(20);
    expect(seen.windows.size).toBeGreaterThan(30);
  });

  it('forgets the windows that ended', async () => {
    vi.useFakeTimers({ now: new Date('2026-11-26T06:00:00.000Z') });
    const counter = memoryStore().counter({ name: 'r', limit: 1, windowSeconds: 1 });
    expect((await counter.consume('a')).allowed).toBe(true);
    expect((await counter.consume('a')).allowed).toBe(false);
    vi.advanceTimersByTime(1000);
    // A new window for the key: counted from zero, ending a window from now.
    const next = await counter.consume('a');
    expect(next).toEqual({ allowed: true, limit: 1, remaining: 0, resetAt: Date.now() + 1000 });
  });
});
