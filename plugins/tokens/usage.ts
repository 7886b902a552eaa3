/**
 * lastUsedAt in batches. A validation per request is the hot path of an SDK; writing a row each
 * time costs more than the lookup. Times are kept in memory and written at most `flushMs`
 * later, and at once before anything reads them, so no read ever sees a stale value.
 */
import type { Logger } from '../../core/logger.ts';
import type { TokensStore } from './store.ts';

export class LastUsed {
  readonly #store: TokensStore;
  readonly #flushMs: number;
  readonly #log: Logger;
  /** Token id -> when it was last used, Unix milliseconds (made ISO text once per flush, not per use). */
  #pending = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(store: TokensStore, flushMs: number, log: Logger) {
    this.#store = store;
    this.#flushMs = flushMs;
    this.#log = log;
  }

  /** Records that a token was used now (written at once when flushMs is 0, before the answer). */
  async touch(tokenId: string): Promise<void> {
    this.#pending.set(tokenId, Date.now());
    if (this.#flushMs === 0) return this.flush();
    if (!this.#timer) {
      this.#timer = setTimeout(() => void this.flush(), this.#flushMs);
      this.#timer.unref();
    }
  }

  /** Writes what is pending. Called before every read of the tokens and on close; never rejects. */
  async flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#pending.size) return;
    const batch = this.#pending;
    this.#pending = new Map();
    try {
      await this.#store.touchMany([...batch].map(([id, at]) => [id, new Date(at).toISOString()]));
    } catch (err) {
      // Keep the times for the next flush rather than lose them (a locked database, say).
      for (const [id, at] of batch) if (!this.#pending.has(id)) this.#pending.set(id, at);
      this.#log.warn({ err }, 'could not record token last-use times; will retry');
      if (!this.#timer) {
        this.#timer = setTimeout(() => void this.flush(), Math.max(this.#flushMs, 100));
        this.#timer.unref();
      }
    }
  }
}
