/**
 * A bounded in-memory cache in the shape Baileys takes for its caches (device lists, retry
 * counters, call offers, placeholder resends, group metadata): at most `size` entries, the least
 * recently used dropped first, each entry living `ttlMs` at most. Baileys' defaults are unbounded
 * in count; a session that meets many chats must not grow without limit.
 */
import type { PossiblyExtendedCacheStore } from 'baileys';

export class BoundedCache implements PossiblyExtendedCacheStore {
  readonly #entries = new Map<string, { value: unknown; expires: number }>();
  readonly #size: number;
  readonly #ttlMs: number;

  constructor(size: number, ttlMs: number) {
    this.#size = size;
    this.#ttlMs = ttlMs;
  }

  get size(): number {
    return this.#entries.size;
  }

  get<T>(key: string): T | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expires <= Date.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    // Most recently used goes last.
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value as T;
  }

  set<T>(key: string, value: T): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expires: Date.now() + this.#ttlMs });
    while (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value!);
  }

  del(key: string): void {
    this.#entries.delete(key);
  }

  flushAll(): void {
    this.#entries.clear();
  }

  async mget<T>(keys: string[]): Promise<Record<string, T | undefined>> {
    const out: Record<string, T | undefined> = Object.create(null);
    for (const key of keys) out[key] = this.get<T>(key);
    return out;
  }

  mset<T>(entries: { key: string; value: T }[]): void {
    for (const { key, value } of entries) this.set(key, value);
  }

  mdel(keys: string[]): void {
    for (const key of keys) this.del(key);
  }
}
