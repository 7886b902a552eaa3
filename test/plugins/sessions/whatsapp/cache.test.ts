/** The bounded cache every per-session cache of the WhatsApp adapter uses: a size limit (least recently used out) and a lifetime. */
import { describe, expect, it, vi } from 'vitest';
import { BoundedCache } from '../../../../plugins/sessions/networks/whatsapp/cache.ts';

describe('BoundedCache', () => {
  it('holds at most `size` entries, dropping the least recently used', async () => {
    const cache = new BoundedCache(3, 60_000);
    for (const k of ['a', 'b', 'c']) cache.set(k, k.toUpperCase());
    expect(cache.get('a')).toBe('A'); // a is now the most recently used
    cache.set('d', 'D');
    expect(cache.size).toBe(3);
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c'), cache.get('d')]).toEqual(['A', 'C', 'D']);
    for (let i = 0; i < 1000; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(3);
    expect(await cache.mget(['k999', 'k0'])).toEqual({ k999: 999, k0: undefined });
    cache.mdel(['k999']);
    cache.flushAll();
    expect(cache.size).toBe(0);
  });

  it('forgets an entry after its lifetime', () => {
    vi.useFakeTimers();
    try {
      const cache = new BoundedCache(10, 1000);
      cache.set('x', 1);
      vi.advanceTimersByTime(999);
      expect(cache.get('x')).toBe(1);
      vi.advanceTimersByTime(2);
      expect(cache.get('x')).toBeUndefined();
      expect(cache.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
