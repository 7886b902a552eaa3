/** The tokens plugin's SQL. */
import type { Db } from '../../core/db.ts';

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

const COLUMNS = 'id, app_id, name, token_prefix, last_used_at, created_at';

/** The tokens of apps, on either engine (the data layer). */
export class TokensStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async insert(input: { id: string; appId: string; name: string; hash: string; prefix: string; now: string }): Promise<void> {
    await this.#db.run(
      `INSERT INTO tokens_app_tokens (id, app_id, name, token_hash, token_prefix, created_at)
       VALUES (@id, @appId, @name, @hash, @prefix, @now)`,
      input,
    );
  }

  /** The token with this SHA-256, as `{ id, appId }`. */
  async byHash(hash: string): Promise<{ id: string; appId: string } | undefined> {
    const row = await this.#db.one<{ id: string; app_id: string }>('SELECT id, app_id FROM tokens_app_tokens WHERE token_hash = ?', [hash]);
    return row && { id: row.id, appId: row.app_id };
  }

  async byId(id: string): Promise<(ApiToken & { appId: string }) | undefined> {
    const row = await this.#db.one<TokenRow>(`SELECT ${COLUMNS} FROM tokens_app_tokens WHERE id = ?`, [id]);
    return row && { ...toToken(row), appId: row.app_id };
  }

  /** Newest first. */
  async ofApp(appId: string): Promise<ApiToken[]> {
    return (await this.#db.all<TokenRow>(`SELECT ${COLUMNS} FROM tokens_app_tokens WHERE app_id = ? ORDER BY seq DESC`, [appId])).map(toToken);
  }

  async delete(id: string): Promise<void> {
    await this.#db.run('DELETE FROM tokens_app_tokens WHERE id = ?', [id]);
  }

  async deleteOfApp(appId: string): Promise<void> {
    await this.#db.run('DELETE FROM tokens_app_tokens WHERE app_id = ?', [appId]);
  }

  /** Writes last-use times, each only forward, in one transaction. */
  async touchMany(entries: Iterable<[id: string, at: string]>): Promise<void> {
    const batch = [...entries];
    await this.#db.transaction(async (tx) => {
      for (const [id, at] of batch) {
        await tx.run('UPDATE tokens_app_tokens SET last_used_at = @at WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @at)', { id, at });
      }
    });
  }
}
