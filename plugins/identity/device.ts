/**
 * The OAuth 2.0 device authorization grant (RFC 8628) of the command-line client in built-in
 * mode, and its refresh tokens.
 *
 * - A device code is random (core `randomToken`), stored only as its SHA-256, valid for
 *   `device_code_ttl_seconds`, and redeemed once.
 * - A user code is 8 letters of RFC 8628's consonant alphabet shown as `WDJB-MJHT`; it is matched
 *   case-insensitively ignoring punctuation, and stored only as the SHA-256 of its 8 letters.
 * - A refresh token is opaque, stored hashed, and belongs to a family (one sign-in). Using it
 *   spends it and returns a successor; presenting a spent one again revokes the whole family.
 *
 * Everything that reads and writes a row happens in one synchronous SQLite transaction, so two
 * concurrent polls of one code, or two uses of one refresh token, cannot both succeed.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { ConstraintError, type Db } from '../../core/db.ts';
import { WharfError } from '../../core/errors.ts';
import { randomToken, sha256Hex } from '../../core/tokens.ts';
import type { AccessTokens } from './access-tokens.ts';
import type { IdentityConfig } from './config.ts';
import type { IdentityStore } from './store.ts';
import type { Org } from './types.ts';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
export const REFRESH_TOKEN_GRANT = 'refresh_token';
/** RFC 8628 §6.1: consonants only, no vowels (no words) and nothing that looks like a digit. */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE_LENGTH = 8;
const USER_CODE = new RegExp(`^[${USER_CODE_ALPHABET}]{${USER_CODE_LENGTH}}$`);
/** RFC 8628 §3.5: each slow_down raises the interval of that code by 5 seconds. */
const SLOW_DOWN_STEP_SECONDS = 5;
/** Timer jitter forgiven between two polls. */
const POLL_GRACE_MS = 250;
/** Expired device codes stay this long, so a late poll hears expired_token rather than invalid_grant. */
const KEEP_EXPIRED_CODES_MS = 86_400_000;
const PRUNE_EVERY_MS = 600_000;
/** Wrong user codes a signed-in user may enter per window before 429 (RFC 8628 §5.1). */
const USER_CODE_FAILURES = 10;
const USER_CODE_WINDOW_SECONDS = 600;

/** The error codes of RFC 6749 §5.2 and RFC 8628 §3.5 that the token and device endpoints answer. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unsupported_grant_type'
  | 'authorization_pending'
  | 'slow_down'
  | 'access_denied'
  | 'expired_token';

/**
 * An OAuth error: status 400, its message is the RFC code, so the plain envelope writes
 * `{error: code}`; the OAuth routes add `error_description` from `description`.
 */
export class OAuthError extends WharfError {
  readonly description: string | undefined;

  constructor(code: OAuthErrorCode, description?: string) {
    super('bad_request', code);
    this.name = 'OAuthError';
    this.description = description;
  }

  /** The RFC 6749 §5.2 body (`error_description` limited to the characters §5.2 allows). */
  body(): { error: string; error_description?: string } {
    const description = this.description?.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, ' ');
    return description ? { error: this.message, error_description: description } : { error: this.message };
  }
}

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
}

export type Decision = { status: 'approved'; org: Org } | { status: 'denied' };

/** A random user code, formatted `XXXX-XXXX`. */
function generateUserCode(): string {
  let letters = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) letters += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return formatUserCode(letters);
}

/** The 8 letters of a user code as typed (any case, dashes, spaces), or null when it cannot be one. */
function normalizeUserCode(input: string): string | null {
  const letters = input.toUpperCase().replace(/[^A-Z0-9]/g, '');
  return USER_CODE.test(letters) ? letters : null;
}

function formatUserCode(letters: string): string {
  return `${letters.slice(0, 4)}-${letters.slice(4)}`;
}

interface DeviceCodeRow {
  code_hash: string;
  client_id: string;
  status: 'pending' | 'approved' | 'denied' | 'redeemed';
  user_id: string | null;
  org_id: string | null;
  interval_seconds: number;
  last_polled_at: string | null;
  expires_at: string;
}

interface RefreshRow {
  token_hash: string;
  family_id: string;
  user_id: string;
  org_id: string | null;
  client_id: string;
  expires_at: string;
  used_at: string | null;
  revoked_at: string | null;
}

/** What a transaction decided: an error to answer (after the writes are committed) or a grant. */
type Outcome = { error: OAuthError } | { userId: string; orgId: string | null; refreshToken: string };

export interface DeviceFlowOptions {
  db: Db;
  store: IdentityStore;
  accessTokens: AccessTokens;
  config: IdentityConfig;
  /** The instance's public URL, without a trailing slash. */
  publicUrl: string;
}

const CODE = 'SELECT code_hash, client_id, status, user_id, org_id, interval_seconds, last_polled_at, expires_at FROM identity_device_codes';
const REFRESH = 'SELECT token_hash, family_id, user_id, org_id, client_id, expires_at, used_at, revoked_at FROM identity_refresh_tokens';

export class DeviceFlow {
  readonly #db: Db;
  readonly #store: IdentityStore;
  readonly #accessTokens: AccessTokens;
  readonly #config: IdentityConfig;
  readonly #verificationUri: string;
  readonly #codeFailures: RateLimiterMemory;
  #lastPrune = 0;

  constructor(options: DeviceFlowOptions) {
    this.#db = options.db;
    this.#store = options.store;
    this.#accessTokens = options.accessTokens;
    this.#config = options.config;
    this.#verificationUri = `${options.publicUrl}/device`;
    this.#codeFailures = new RateLimiterMemory({ keyPrefix: 'device-user-code', points: USER_CODE_FAILURES, duration: USER_CODE_WINDOW_SECONDS });
  }

  /** Refuses a client that is not the command-line client. */
  checkClient(clientId: string): void {
    if (clientId !== this.#config.cli_client_id) throw new OAuthError('invalid_client', 'Unknown client_id');
  }

  /** `POST /oauth/device/code`: a new device code and user code for the command-line client. */
  async authorize(input: { clientId: string; scope?: string | undefined }): Promise<DeviceAuthorization> {
    this.checkClient(input.clientId);
    await this.#prune();
    const deviceCode = randomToken(32);
    const ttl = this.#config.device_code_ttl_seconds;
    const interval = this.#config.device_poll_interval_seconds;
    const now = new Date();
    const expiresAt = new Date(now.getTime() + ttl * 1000).toISOString();
    // A clash with a live user code is one in 20^8 per live code: draw again.
    for (let attempt = 0; ; attempt++) {
      const userCode = generateUserCode();
      try {
        await this.#db.run(
          'INSERT INTO identity_device_codes (code_hash, user_code_hash, client_id, scope, interval_seconds, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
          [sha256Hex(deviceCode), sha256Hex(normalizeUserCode(userCode)!), input.clientId, input.scope ?? null, interval, now.toISOString(), expiresAt],
        );
      } catch (err) {
        if (err instanceof ConstraintError && err.kind === 'unique' && attempt < 10) continue;
        throw err;
      }
      return {
        device_code: deviceCode,
        user_code: userCode,
        verification_uri: this.#verificationUri,
        verification_uri_complete: `${this.#verificationUri}?user_code=${encodeURIComponent(userCode)}`,
        expires_in: ttl,
        interval,
      };
    }
  }

  /** `POST /oauth/token` with the device code grant: tokens once approved, otherwise the RFC's error. */
  async redeemDeviceCode(input: { deviceCode: string; clientId: string }): Promise<TokenResponse> {
    this.checkClient(input.clientId);
    const codeHash = sha256Hex(input.deviceCode);
    const outcome = await this.#db.transaction(async (tx): Promise<Outcome> => {
      const row = await tx.one<DeviceCodeRow>(`${CODE} WHERE code_hash = ?`, [codeHash]);
      if (!row || row.client_id !== input.clientId) return { error: new OAuthError('invalid_grant', 'Unknown device_code') };
      if (row.status === 'redeemed') return { error: new OAuthError('invalid_grant', 'This device_code was already redeemed') };
      if (row.status === 'denied') return { error: new OAuthError('access_denied', 'The user denied the request') };
      const now = new Date();
      const nowIso = now.toISOString();
      if (row.expires_at <= nowIso) return { error: new OAuthError('expired_token', 'The device_code expired; start again') };
      if (row.status === 'pending') {
        const tooSoon = row.last_polled_at !== null && now.getTime() - Date.parse(row.last_polled_at) < row.interval_seconds * 1000 - POLL_GRACE_MS;
        const interval = tooSoon ? row.interval_seconds + SLOW_DOWN_STEP_SECONDS : row.interval_seconds;
        await tx.run('UPDATE identity_device_codes SET last_polled_at = ?, interval_seconds = ? WHERE code_hash = ?', [nowIso, interval, codeHash]);
        return tooSoon
          ? { error: new OAuthError('slow_down', `Polled too often; wait ${interval} seconds between polls`) }
          : { error: new OAuthError('authorization_pending', 'The user has not approved yet') };
      }
      // Approved: spend the code and open a refresh token family, or nothing at all.
      const redeemed =
        row.user_id !== null &&
        (await tx.run("UPDATE identity_device_codes SET status = 'redeemed', redeemed_at = ? WHERE code_hash = ? AND status = 'approved'", [nowIso, codeHash]))
          .changes === 1;
      if (!row.user_id || !redeemed) return { error: new OAuthError('invalid_grant', 'This device_code was already redeemed') };
      const refreshToken = await this.#insertRefresh(tx, randomUUID(), row.user_id, row.org_id, row.client_id, now);
      return { userId: row.user_id, orgId: row.org_id, refreshToken };
    });
    return this.#grant(outcome);
  }

  /** `POST /oauth/token` with the refresh token grant: rotates, and revokes the family on reuse. */
  async refresh(input: { refreshToken: string; clientId?: string | undefined }): Promise<TokenResponse> {
    if (input.clientId !== undefined) this.checkClient(input.clientId);
    await this.#prune();
    const tokenHash = sha256Hex(input.refreshToken);
    const outcome = await this.#db.transaction(async (tx): Promise<Outcome> => {
      const row = await tx.one<RefreshRow>(`${REFRESH} WHERE token_hash = ?`, [tokenHash]);
      if (!row || (input.clientId !== undefined && row.client_id !== input.clientId)) {
        return { error: new OAuthError('invalid_grant', 'Unknown refresh_token') };
      }
      const now = new Date();
      const nowIso = now.toISOString();
      if (row.revoked_at) return { error: new OAuthError('invalid_grant', 'This refresh_token was revoked; sign in again') };
      if (row.used_at) {
        // A spent token came back: someone holds a copy. End the whole sign-in, newest token included.
        await tx.run('UPDATE identity_refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL', [nowIso, row.family_id]);
        return { error: new OAuthError('invalid_grant', 'This refresh_token was already used; every token of this sign-in is revoked, sign in again') };
      }
      if (row.expires_at <= nowIso) return { error: new OAuthError('invalid_grant', 'This refresh_token expired; sign in again') };
      const spent = await tx.run('UPDATE identity_refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL', [
        nowIso,
        tokenHash,
      ]);
      if (spent.changes !== 1) return { error: new OAuthError('invalid_grant', 'Unknown refresh_token') };
      const refreshToken = await this.#insertRefresh(tx, row.family_id, row.user_id, row.org_id, row.client_id, now);
      return { userId: row.user_id, orgId: row.org_id, refreshToken };
    });
    return this.#grant(outcome);
  }

  async #insertRefresh(tx: Db, familyId: string, userId: string, orgId: string | null, clientId: string, now: Date): Promise<string> {
    const token = randomToken(32);
    const expiresAt = new Date(now.getTime() + this.#config.refresh_token_ttl_days * 86_400_000).toISOString();
    await tx.run(
      'INSERT INTO identity_refresh_tokens (token_hash, family_id, user_id, org_id, client_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [sha256Hex(token), familyId, userId, orgId, clientId, now.toISOString(), expiresAt],
    );
    return token;
  }

  async #grant(outcome: Outcome): Promise<TokenResponse> {
    if ('error' in outcome) throw outcome.error;
    return {
      access_token: await this.#accessTokens.issue({ userId: outcome.userId, orgId: outcome.orgId }),
      token_type: 'Bearer',
      expires_in: this.#accessTokens.ttlSeconds,
      refresh_token: outcome.refreshToken,
    };
  }

  /**
   * The pending request a user code names, for the approval page: the code formatted, or a
   * WharfError (400 malformed, 404 unknown or expired, 409 already decided, 429 too many wrong codes).
   */
  async pending(userCode: string, userId: string): Promise<{ userCode: string }> {
    const { userCode: formatted } = await this.#pending(userCode, userId);
    return { userCode: formatted };
  }

  async #pending(userCode: string, userId: string): Promise<{ userCode: string; row: DeviceCodeRow }> {
    await this.#checkFailures(userId);
    const letters = normalizeUserCode(userCode);
    if (!letters) {
      await this.#codeFailures.penalty(userId, 1);
      throw new WharfError('bad_request', `That is not a valid code: it has ${USER_CODE_LENGTH} letters, like WDJB-MJHT`);
    }
    const row = await this.#db.one<DeviceCodeRow>(`${CODE} WHERE user_code_hash = ?`, [sha256Hex(letters)]);
    if (!row || row.expires_at <= new Date().toISOString()) {
      await this.#codeFailures.penalty(userId, 1);
      throw new WharfError('not_found', 'Unknown or expired code; start the sign-in on your device again');
    }
    if (row.status !== 'pending') throw new WharfError('conflict', 'This code was already approved or denied');
    return { userCode: formatUserCode(letters), row };
  }

  /**
   * Approves (binding the user and the organization to the device code) or denies the request
   * a user code names. Approving needs an organization the user is a member of (403 otherwise).
   */
  async decide(input: { userCode: string; userId: string; orgId?: string | undefined; approve: boolean }): Promise<Decision> {
    const { row } = await this.#pending(input.userCode, input.userId);
    let org: Org | undefined;
    if (input.approve) {
      if (!input.orgId) throw new WharfError('bad_request', 'orgId is required to approve');
      org = await this.#store.org(input.orgId);
      if (!org || !(await this.#store.role(input.userId, org.id))) throw new WharfError('forbidden', 'Not a member of that organization');
    }
    const { changes: changed } = await this.#db.run(
      "UPDATE identity_device_codes SET status = ?, user_id = ?, org_id = ?, decided_at = ? WHERE code_hash = ? AND status = 'pending'",
      [input.approve ? 'approved' : 'denied', input.userId, org?.id ?? null, new Date().toISOString(), row.code_hash],
    );
    if (changed !== 1) throw new WharfError('conflict', 'This code was already approved or denied');
    return org ? { status: 'approved', org } : { status: 'denied' };
  }

  async #checkFailures(userId: string): Promise<void> {
    const res = await this.#codeFailures.get(userId);
    if (res && res.consumedPoints >= USER_CODE_FAILURES) {
      throw new WharfError('rate_limited', 'Too many wrong codes; try again later', { retryAfter: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) });
    }
  }

  /** Deletes long-expired device codes and expired refresh tokens, at most every ten minutes. */
  async #prune(): Promise<void> {
    const now = Date.now();
    if (now - this.#lastPrune < PRUNE_EVERY_MS) return;
    this.#lastPrune = now;
    await this.#db.run('DELETE FROM identity_device_codes WHERE expires_at < ?', [new Date(now - KEEP_EXPIRED_CODES_MS).toISOString()]);
    await this.#db.run('DELETE FROM identity_refresh_tokens WHERE expires_at < ?', [new Date(now).toISOString()]);
  }
}
