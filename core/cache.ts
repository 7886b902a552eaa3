/**
 * A bounded map of verified tokens to what they said, kept until the token's own expiry, so a
 * busy client does not pay a signature check per request. Oldest entries go first when full.
 */
export class VerifiedTokens<V> {
  readonly #entries = new Map<string, { value: V; exp: number }>();
  readonly #limit: number;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  /** The value of a token verified before and not expired (`exp` in Unix seconds). */
  get(token: string): V | undefined {
    const entry = this.#entries.get(token);
    if (!entry) return undefined;
    if (entry.exp <= Date.now() / 1000) {
      this.#entries.delete(token);
      return undefined;
    }
    return entry.value;
  }

  set(token: string, value: V, exp: number): void {
    if (this.#entries.size >= this.#limit) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(token, { value, exp });
  }
}
