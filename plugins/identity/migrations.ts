/** The identity plugin's tables. Shipped migrations are never edited; add new ones. */
import type { Migration } from '../../core/plugin.ts';

export const migrations: Migration[] = [
  {
    id: '001-users-orgs-sessions',
    // The same SQL on both engines (TEXT times, CHECK, REFERENCES).
    sql: `
        CREATE TABLE identity_users (
          id TEXT PRIMARY KEY,
          email TEXT,
          email_norm TEXT UNIQUE,
          name TEXT,
          password_hash TEXT,
          external_id TEXT UNIQUE,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL
        );
        CREATE TABLE identity_orgs (
          id TEXT PRIMARY KEY,
          slug TEXT NOT NULL UNIQUE,
          name TEXT NOT NULL,
          external_id TEXT UNIQUE,
          created_at TEXT NOT NULL
        );
        CREATE TABLE identity_memberships (
          org_id TEXT NOT NULL REFERENCES identity_orgs(id) ON DELETE CASCADE,
          user_id TEXT NOT NULL REFERENCES identity_users(id) ON DELETE CASCADE,
          role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
          created_at TEXT NOT NULL,
          PRIMARY KEY (org_id, user_id)
        );
        CREATE INDEX identity_memberships_by_user ON identity_memberships (user_id, created_at);
        -- id_hash: SHA-256 of the session id carried inside the signed cookie.
        CREATE TABLE identity_login_sessions (
          id_hash TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES identity_users(id) ON DELETE CASCADE,
          active_org_id TEXT REFERENCES identity_orgs(id) ON DELETE SET NULL,
          created_at TEXT NOT NULL,
          last_seen_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          revoked_at TEXT,
          user_agent TEXT,
          address TEXT
        );
        CREATE INDEX identity_login_sessions_by_user ON identity_login_sessions (user_id);
        CREATE TABLE identity_setup_tokens (
          token_hash TEXT PRIMARY KEY,
          created_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          used_at TEXT
        );
      `,
  },
  {
    id: '002-device-flow',
    // The same SQL on both engines (TEXT times, CHECK, REFERENCES).
    sql: `
        -- RFC 8628 device authorization requests. code_hash: SHA-256 of the device code;
        -- user_code_hash: SHA-256 of the user code normalized to its 8 letters (no dash).
        CREATE TABLE identity_device_codes (
          code_hash TEXT PRIMARY KEY,
          user_code_hash TEXT NOT NULL UNIQUE,
          client_id TEXT NOT NULL,
          scope TEXT,
          status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'redeemed')),
          user_id TEXT REFERENCES identity_users(id) ON DELETE CASCADE,
          org_id TEXT REFERENCES identity_orgs(id) ON DELETE SET NULL,
          interval_seconds INTEGER NOT NULL,
          last_polled_at TEXT,
          created_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          decided_at TEXT,
          redeemed_at TEXT
        );
        CREATE INDEX identity_device_codes_by_expiry ON identity_device_codes (expires_at);
        -- Command-line refresh tokens. token_hash: SHA-256 of the opaque token. A family is one
        -- sign-in and every token rotated from it; used_at marks a spent token, whose reuse
        -- revokes the family.
        CREATE TABLE identity_refresh_tokens (
          token_hash TEXT PRIMARY KEY,
          family_id TEXT NOT NULL,
          user_id TEXT NOT NULL REFERENCES identity_users(id) ON DELETE CASCADE,
          org_id TEXT REFERENCES identity_orgs(id) ON DELETE SET NULL,
          client_id TEXT NOT NULL,
          created_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          used_at TEXT,
          revoked_at TEXT
        );
        CREATE INDEX identity_refresh_tokens_by_family ON identity_refresh_tokens (family_id);
        CREATE INDEX identity_refresh_tokens_by_expiry ON identity_refresh_tokens (expires_at);
      `,
  },
  {
    id: '003-invitations',
    // The same SQL on both engines (TEXT times, CHECK, REFERENCES).
    sql: `
        -- Pending invitations to an organization, by email. Whether an account has that email is
        -- not recorded: it is looked up when the invitee signs in. One per organization and
        -- email: inviting again updates role, inviter, invited_at and expires_at. Accepted,
        -- declined and revoked ones are deleted; expired ones are pruned.
        CREATE TABLE identity_invitations (
          id TEXT PRIMARY KEY,
          org_id TEXT NOT NULL REFERENCES identity_orgs(id) ON DELETE CASCADE,
          email TEXT NOT NULL,
          email_norm TEXT NOT NULL,
          role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
          invited_by TEXT REFERENCES identity_users(id) ON DELETE SET NULL,
          invited_at TEXT NOT NULL,
          expires_at TEXT NOT NULL,
          UNIQUE (org_id, email_norm)
        );
        CREATE INDEX identity_invitations_by_email ON identity_invitations (email_norm, expires_at);
        CREATE INDEX identity_invitations_by_expiry ON identity_invitations (expires_at);
      `,
  },
];
