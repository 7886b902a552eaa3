/** The tokens plugin's SQL. */
import type { Database } from '../../core/db.ts';

/** An app API token as listed (the hash is never returned). */
export interface ApiToken {
  id: string;
  name: string;
  tokenPrefix: string;
  lastUsedAt: string | null;
  createdAt: string;
}

interface TokenRow {
  id: string;
  app_id: string;
  name: string;
  token_prefix: string;
  last_used_at: string | null;
  created_at: string;
}

const toToken = (r: TokenRow): ApiToken => ({
  id: r.id,
  name: r.name,
  tokenPrefix: r.token_prefix,
  lastUsedAt: r.last_used_at,
  createdAt: r.created_at,
});

export class TokensStore {
  readonly #db: Database;
  readonly #s;

  constructor(db: Database) {
    this.#db = db;
    this.#s = {
      insert: db.prepare(
        `INSERT INTO tokens_app_tokens (id, app_id, name, token_hash, token_prefix, created_at)
         VALUES (@id, @appId, @name, @hash, @prefix, @now)`,
      ),
      byHash: db.prepare('SELECT id, app_id FROM tokens_app_tokens WHERE token_hash = ?'),
      byId: db.prepare('SELECT * FROM tokens_app_tokens WHERE id = ?'),
      ofApp: db.prepare('SELECT * FROM tokens_app_tokens WHERE app_id = ? ORDER BY seq DESC'),
      delete: db.prepare('DELETE FROM tokens_app_tokens WHERE id = ?'),
      deleteOfApp: db.prepare('DELETE FROM tokens_app_tokens WHERE app_id = ?'),
      touch: db.prepare('UPDATE tokens_app_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)'),
    };
  }

  insert(input: { id: string; appId: string; name: string; hash: string; prefix: string; now: string }): void {
    this.#s.insert.run(input);
  }

  /** The token with this SHA-256, as `{ id, appId }`. */
  byHash(hash: string): { id: string; appId: string } | undefined {
    const row = this.#s.byHash.get(hash) as { id: string; app_id: string } | undefined;
    return row && { id: row.id, appId: row.app_id };
  }

  byId(id: string): (ApiToken & { appId: string }) | undefined {
    const row = this.#s.byId.get(id) as TokenRow | undefined;
    return row && { ...toToken(row), appId: row.app_id };
  }

  /** Newest first. */
  ofApp(appId: string): ApiToken[] {
    return (this.#s.ofApp.all(appId) as TokenRow[]).map(toToken);
  }

  delete(id: string): void {
    this.#s.delete.run(id);
  }

  deleteOfApp(appId: string): void {
    this.#s.deleteOfApp.run(appId);
  }

  /** Writes last-use times, each only forward, in one transaction. */
  touchMany(entries: Iterable<[id: string, at: string]>): void {
    this.#db.transaction(() => {
      for (const [id, at] of entries) this.#s.touch.run(at, id, at);
    })();
  }
}
