/** The tokens plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';

/** The table with its creation-order column, which only the engines spell differently. */
const appTokens = (seq: string) => `
  CREATE TABLE tokens_app_tokens (
    ${seq},
    id TEXT NOT NULL UNIQUE,
    app_id TEXT NOT NULL,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    token_prefix TEXT NOT NULL,
    last_used_at TEXT,
    created_at TEXT NOT NULL
  );
  CREATE INDEX tokens_app_tokens_by_app ON tokens_app_tokens (app_id, seq);
`;

export const migrations: Migration[] = [
  {
    // Only the SHA-256 of a token is kept. app_id names a storage app; the storage plugin's
    // deletion hook removes an app's tokens with the app (no foreign key across plugins).
    // seq orders tokens by creation when created_at ties.
    id: '001-app-tokens',
    sqlite: appTokens('seq INTEGER PRIMARY KEY'),
    postgres: appTokens('seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY'),
  },
];
