/**
 * The sessions plugin's SQL: sessions (with their encrypted secrets), personal access tokens,
 * the message log, recorded events, session logs and audit logs.
 *
 * Inside {@link SessionsStore.transaction} a session row is read once: later reads of the same id
 * answer what the first one read, until a write through this store changes the row. Nothing else
 * can change it meanwhile (one connection, synchronous transactions), so an event recorder, a
 * network host and a filter that each ask for the session cost one statement between them.
 */
import type { Database } from '../../core/db.ts';
import type { Keys } from '../../core/keys.ts';
import type { EventName } from './events.ts';
import type { Actor, SessionEvent, SessionRecord, SessionStatus, SessionType, SigningMode } from './types.ts';

interface SessionRow {
  id: number;
  org_id: string;
  type: SessionType;
  name: string;
  phone_number: string;
  status: SessionStatus;
  status_reason: string | null;
  account_protection: number;
  log_messages: number;
  webhook_url: string | null;
  webhook_enabled: number;
  webhook_events: string | null;
  webhook_signing: SigningMode;
  read_incoming_messages: number;
  auto_reject_calls: number;
  ignore_groups: number;
  ignore_channels: number;
  ignore_broadcasts: number;
  always_online: number;
  created_at: string;
  updated_at: string;
}

const SESSION_COLUMNS = `id, org_id, type, name, phone_number, status, status_reason, account_protection, log_messages, webhook_url,
  webhook_enabled, webhook_events, webhook_signing, read_incoming_messages, auto_reject_calls, ignore_groups,
  ignore_channels, ignore_broadcasts, always_online, created_at, updated_at`;

function toSession(r: SessionRow): SessionRecord {
  return {
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    phoneNumber: r.phone_number,
    type: r.type,
    status: r.status,
    statusReason: r.status_reason,
    accountProtection: r.account_protection === 1,
    logMessages: r.log_messages === 1,
    webhookUrl: r.webhook_url,
    webhookEnabled: r.webhook_enabled === 1,
    webhookEvents: r.webhook_events === null ? null : (JSON.parse(r.webhook_events) as EventName[]),
    webhookSigning: r.webhook_signing,
    readIncomingMessages: r.read_incoming_messages === 1,
    autoRejectCalls: r.auto_reject_calls === 1,
    ignoreGroups: r.ignore_groups === 1,
    ignoreChannels: r.ignore_channels === 1,
    ignoreBroadcasts: r.ignore_broadcasts === 1,
    alwaysOnline: r.always_online === 1,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** Session settings a caller may change, by column. */
export interface SessionChanges {
  name?: string;
  phone_number?: string;
  account_protection?: boolean;
  log_messages?: boolean;
  webhook_url?: string | null;
  webhook_enabled?: boolean;
  webhook_events?: EventName[] | null;
  read_incoming_messages?: boolean;
  auto_reject_calls?: boolean;
  ignore_groups?: boolean;
  ignore_channels?: boolean;
  ignore_broadcasts?: boolean;
  always_online?: boolean;
  webhook_signing?: SigningMode;
}

const CHANGEABLE = new Set<string>([
  'name',
  'phone_number',
  'account_protection',
  'log_messages',
  'webhook_url',
  'webhook_enabled',
  'webhook_events',
  'read_incoming_messages',
  'auto_reject_calls',
  'ignore_groups',
  'ignore_channels',
  'ignore_broadcasts',
  'always_online',
  'webhook_signing',
]);

function columnValue(value: unknown): unknown {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (Array.isArray(value)) return JSON.stringify(value);
  return value;
}

export type MessageStatus = 'in_progress' | 'sent' | 'delivered' | 'read' | 'played' | 'failed';
/** Forward order of statuses; receipts never move a message backwards. */
export const STATUS_RANK: Readonly<Record<MessageStatus, number>> = { failed: 0, in_progress: 1, sent: 2, delivered: 3, read: 4, played: 5 };

export interface MessageRow {
  id: number;
  session_id: number;
  key_id: string;
  jid: string;
  recipient: string;
  type: string;
  status: MessageStatus;
  remote_key: string;
  request: string | null;
  message: string | null;
  error: string | null;
  attempts: number;
  message_timestamp: number | null;
  deleted_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface PatRow {
  id: number;
  org_id: string;
  user_id: string;
  name: string;
  hint: string;
  created_by: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface StatusLogRow {
  id: number;
  session_id: number;
  event_type: string;
  status: string;
  reason: string | null;
  occurred_at: string;
}

export interface AuditRow {
  id: number;
  session_id: number;
  action: string;
  actor_kind: string;
  actor_id: string | null;
  user_id: string | null;
  details: string | null;
  address: string | null;
  created_at: string;
}

export interface Page<T> {
  rows: T[];
  total: number;
}

const apiKeyContext = (id: number) => `sessions:api_key:${id}`;
const secretContext = (id: number) => `sessions:webhook_secret:${id}`;
const proxyContext = (id: number) => `sessions:proxy_url:${id}`;

/** What the hourly prune deletes by age. */
export type PrunedTable = 'events' | 'messages' | 'statusLogs' | 'auditLogs';

export class SessionsStore {
  readonly db: Database;
  readonly #keys: Keys;
  readonly #s;
  /** Session rows read in the current outermost transaction, by id (undefined: no such row); none outside one. */
  #snapshot: Map<number, SessionRecord | undefined> | undefined;

  constructor(db: Database, keys: Keys) {
    this.db = db;
    this.#keys = keys;
    this.#s = {
      byId: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE id = ?`),
      inOrg: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE id = ? AND org_id = ?`),
      ofOrg: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE org_id = ? ORDER BY id`),
      byKeyHash: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE api_key_hash = ?`),
      byPhone: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE org_id = ? AND phone_number = ?`),
      byPhoneOfType: db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE org_id = ? AND phone_number = ? AND type = ?`),
      insert: db.prepare(
        `INSERT INTO sessions_sessions (org_id, type, name, phone_number, status, account_protection, log_messages, webhook_url,
          webhook_enabled, webhook_events, webhook_secret_enc, read_incoming_messages, auto_reject_calls, ignore_groups,
          ignore_channels, ignore_broadcasts, always_online, api_key_enc, api_key_hash, created_at, updated_at)
         VALUES (@org_id, @type, @name, @phone_number, @status, @account_protection, @log_messages, @webhook_url, @webhook_enabled,
          @webhook_events, '', @read_incoming_messages, @auto_reject_calls, @ignore_groups, @ignore_channels, @ignore_broadcasts,
          @always_online, '', @api_key_hash, @now, @now)`,
      ),
      setSecrets: db.prepare('UPDATE sessions_sessions SET api_key_enc = ?, api_key_hash = ?, webhook_secret_enc = ? WHERE id = ?'),
      setApiKey: db.prepare('UPDATE sessions_sessions SET api_key_enc = ?, api_key_hash = ?, updated_at = ? WHERE id = ?'),
      setProxy: db.prepare('UPDATE sessions_sessions SET proxy_url_enc = ?, updated_at = ? WHERE id = ?'),
      setStatus: db.prepare('UPDATE sessions_sessions SET status = ?, status_reason = ?, updated_at = ? WHERE id = ?'),
      secrets: db.prepare('SELECT api_key_enc, webhook_secret_enc, proxy_url_enc FROM sessions_sessions WHERE id = ?'),
      delete: db.prepare('DELETE FROM sessions_sessions WHERE id = ?'),

      insertPat: db.prepare(
        'INSERT INTO sessions_pats (org_id, user_id, name, token_hash, hint, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      patByHash: db.prepare(
        'SELECT id, org_id, user_id, name, hint, created_by, created_at, last_used_at, expires_at, revoked_at FROM sessions_pats WHERE token_hash = ?',
      ),
      patById: db.prepare(
        'SELECT id, org_id, user_id, name, hint, created_by, created_at, last_used_at, expires_at, revoked_at FROM sessions_pats WHERE id = ? AND org_id = ?',
      ),
      patsOfOrg: db.prepare(
        'SELECT id, org_id, user_id, name, hint, created_by, created_at, last_used_at, expires_at, revoked_at FROM sessions_pats WHERE org_id = ? AND revoked_at IS NULL ORDER BY id',
      ),
      revokePat: db.prepare('UPDATE sessions_pats SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
      touchPat: db.prepare('UPDATE sessions_pats SET last_used_at = ? WHERE id = ?'),

      insertMessage: db.prepare(
        `INSERT INTO sessions_messages (session_id, key_id, jid, recipient, type, status, remote_key, request, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'in_progress', ?, ?, ?, ?)`,
      ),
      messageById: db.prepare('SELECT * FROM sessions_messages WHERE id = ? AND session_id = ?'),
      messageByKey: db.prepare('SELECT * FROM sessions_messages WHERE session_id = ? AND key_id = ?'),
      messageSent: db.prepare(
        "UPDATE sessions_messages SET status = 'sent', remote_key = ?, message = ?, message_timestamp = ?, error = NULL, updated_at = ? WHERE id = ? AND session_id = ?",
      ),
      messageStatus: db.prepare('UPDATE sessions_messages SET status = ?, updated_at = ? WHERE id = ?'),
      messageFailed: db.prepare("UPDATE sessions_messages SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND session_id = ?"),
      messageRetry: db.prepare(
        "UPDATE sessions_messages SET status = 'in_progress', key_id = ?, remote_key = ?, error = NULL, attempts = attempts + 1, updated_at = ? WHERE id = ?",
      ),
      messageEdited: db.prepare('UPDATE sessions_messages SET message = COALESCE(?, message), updated_at = ? WHERE id = ?'),
      messageDeleted: db.prepare('UPDATE sessions_messages SET deleted_at = ?, updated_at = ? WHERE id = ?'),
      dropMessage: db.prepare('DELETE FROM sessions_messages WHERE id = ?'),

      insertEvent: db.prepare('INSERT INTO sessions_events (session_id, org_id, event, payload, created_at) VALUES (?, ?, ?, ?, ?)'),

      insertStatusLog: db.prepare('INSERT INTO sessions_status_logs (session_id, event_type, status, reason, occurred_at) VALUES (?, ?, ?, ?, ?)'),
      insertAudit: db.prepare(
        'INSERT INTO sessions_audit_logs (session_id, org_id, action, actor_kind, actor_id, user_id, details, address, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      pruneEvents: db.prepare('DELETE FROM sessions_events WHERE created_at < ?'),
      pruneMessages: db.prepare('DELETE FROM sessions_messages WHERE created_at < ?'),
      pruneStatusLogs: db.prepare('DELETE FROM sessions_status_logs WHERE occurred_at < ?'),
      pruneAuditLogs: db.prepare('DELETE FROM sessions_audit_logs WHERE created_at < ?'),
    };
  }

  /** Runs `fn` in one transaction (nested: a savepoint); session rows are read once in it (see above). */
  transaction<T>(fn: () => T): T {
    if (this.#snapshot) {
      try {
        return this.db.transaction(fn)();
      } catch (err) {
        // A rolled-back savepoint may have undone a row this snapshot holds: read again.
        this.#snapshot.clear();
        throw err;
      }
    }
    this.#snapshot = new Map();
    try {
      return this.db.transaction(fn)();
    } finally {
      this.#snapshot = undefined;
    }
  }

  /** A session row changed: the snapshot forgets it. */
  #wrote(id: number): void {
    this.#snapshot?.delete(id);
  }

  // Sessions

  /** A session by id; inside a transaction, read once (see {@link SessionsStore.transaction}). */
  session(id: number): SessionRecord | undefined {
    if (this.#snapshot?.has(id)) return this.#snapshot.get(id);
    const row = this.#s.byId.get(id) as SessionRow | undefined;
    const session = row && toSession(row);
    this.#snapshot?.set(id, session);
    return session;
  }

  sessionInOrg(id: number, orgId: string): SessionRecord | undefined {
    const row = this.#s.inOrg.get(id, orgId) as SessionRow | undefined;
    return row && toSession(row);
  }

  sessionsOfOrg(orgId: string): SessionRecord[] {
    return (this.#s.ofOrg.all(orgId) as SessionRow[]).map(toSession);
  }

  /** The session that owns a number in an organization, of one type when `type` is given. */
  sessionByPhone(orgId: string, phone: string, type?: SessionType): SessionRecord | undefined {
    const row = (type ? this.#s.byPhoneOfType.get(orgId, phone, type) : this.#s.byPhone.get(orgId, phone)) as SessionRow | undefined;
    return row && toSession(row);
  }

  /** The session of an API key, by the key's SHA-256. */
  sessionByKeyHash(hash: string): SessionRecord | undefined {
    const row = this.#s.byKeyHash.get(hash) as SessionRow | undefined;
    return row && toSession(row);
  }

  insertSession(
    input: { orgId: string; type: SessionType; status: SessionStatus; phoneNumber: string; name: string } & Omit<SessionChanges, 'name' | 'phone_number'>,
    secrets: { apiKey: string; apiKeyHash: string; webhookSecret: string },
    now: string,
  ): number {
    const info = this.#s.insert.run({
      org_id: input.orgId,
      type: input.type,
      name: input.name,
      phone_number: input.phoneNumber,
      status: input.status,
      account_protection: input.account_protection ? 1 : 0,
      log_messages: input.log_messages === false ? 0 : 1,
      webhook_url: input.webhook_url ?? null,
      webhook_enabled: input.webhook_enabled ? 1 : 0,
      webhook_events: input.webhook_events == null ? null : JSON.stringify(input.webhook_events),
      read_incoming_messages: input.read_incoming_messages ? 1 : 0,
      auto_reject_calls: input.auto_reject_calls ? 1 : 0,
      ignore_groups: input.ignore_groups ? 1 : 0,
      ignore_channels: input.ignore_channels ? 1 : 0,
      ignore_broadcasts: input.ignore_broadcasts ? 1 : 0,
      always_online: input.always_online ? 1 : 0,
      api_key_hash: secrets.apiKeyHash,
      now,
    });
    const id = Number(info.lastInsertRowid);
    this.#s.setSecrets.run(
      this.#keys.encrypt(secrets.apiKey, apiKeyContext(id)),
      secrets.apiKeyHash,
      this.#keys.encrypt(secrets.webhookSecret, secretContext(id)),
      id,
    );
    this.#wrote(id);
    return id;
  }

  updateSession(id: number, changes: SessionChanges, now: string): void {
    const entries = Object.entries(changes).filter(([k, v]) => CHANGEABLE.has(k) && v !== undefined);
    if (entries.length === 0) return;
    const sets = entries.map(([k]) => `${k} = @${k}`).join(', ');
    const params: Record<string, unknown> = { id, updated_at: now };
    for (const [k, v] of entries) params[k] = columnValue(v);
    this.db.prepare(`UPDATE sessions_sessions SET ${sets}, updated_at = @updated_at WHERE id = @id`).run(params);
    this.#wrote(id);
  }

  /** Sets the status with why it is so (null: no reason given). */
  setStatus(id: number, status: SessionStatus, reason: string | null, now: string): void {
    this.#s.setStatus.run(status, reason, now, id);
    this.#wrote(id);
  }

  setApiKey(id: number, apiKey: string, hash: string, now: string): void {
    this.#s.setApiKey.run(this.#keys.encrypt(apiKey, apiKeyContext(id)), hash, now, id);
    this.#wrote(id);
  }

  setWebhookSecret(id: number, secret: string, now: string): void {
    this.db
      .prepare('UPDATE sessions_sessions SET webhook_secret_enc = ?, updated_at = ? WHERE id = ?')
      .run(this.#keys.encrypt(secret, secretContext(id)), now, id);
    this.#wrote(id);
  }

  setProxyUrl(id: number, proxyUrl: string | null, now: string): void {
    this.#s.setProxy.run(proxyUrl === null ? null : this.#keys.encrypt(proxyUrl, proxyContext(id)), now, id);
    this.#wrote(id);
  }

  secrets(id: number): { apiKey: string; webhookSecret: string; proxyUrl: string | null } {
    const row = this.#s.secrets.get(id) as { api_key_enc: string; webhook_secret_enc: string; proxy_url_enc: string | null };
    return {
      apiKey: this.#keys.decrypt(row.api_key_enc, apiKeyContext(id)),
      webhookSecret: this.#keys.decrypt(row.webhook_secret_enc, secretContext(id)),
      proxyUrl: row.proxy_url_enc === null ? null : this.#keys.decrypt(row.proxy_url_enc, proxyContext(id)),
    };
  }

  /** The webhook secret of a session, decrypted; undefined when there is no such session. */
  webhookSecret(id: number): string | undefined {
    const row = this.#s.secrets.get(id) as { webhook_secret_enc: string } | undefined;
    return row && this.#keys.decrypt(row.webhook_secret_enc, secretContext(id));
  }

  deleteSession(id: number): void {
    this.#s.delete.run(id);
    this.#wrote(id);
  }

  // Personal access tokens

  insertPat(
    input: { orgId: string; userId: string; name: string; hash: string; hint: string; createdBy: string; expiresAt: string | null },
    now: string,
  ): PatRow {
    const info = this.#s.insertPat.run(input.orgId, input.userId, input.name, input.hash, input.hint, input.createdBy, now, input.expiresAt);
    return this.pat(Number(info.lastInsertRowid), input.orgId)!;
  }

  patByHash(hash: string): PatRow | undefined {
    return this.#s.patByHash.get(hash) as PatRow | undefined;
  }

  pat(id: number, orgId: string): PatRow | undefined {
    return this.#s.patById.get(id, orgId) as PatRow | undefined;
  }

  patsOfOrg(orgId: string): PatRow[] {
    return this.#s.patsOfOrg.all(orgId) as PatRow[];
  }

  revokePat(id: number, now: string): boolean {
    return this.#s.revokePat.run(now, id).changes > 0;
  }

  touchPat(id: number, now: string): void {
    this.#s.touchPat.run(now, id);
  }

  // Message log

  insertMessage(
    input: { sessionId: number; keyId: string; jid: string; recipient: string; type: string; key: unknown; request: unknown | null },
    now: string,
  ): number {
    const info = this.#s.insertMessage.run(
      input.sessionId,
      input.keyId,
      input.jid,
      input.recipient,
      input.type,
      JSON.stringify(input.key),
      input.request === null ? null : JSON.stringify(input.request),
      now,
      now,
    );
    return Number(info.lastInsertRowid);
  }

  message(sessionId: number, msgId: number): MessageRow | undefined {
    return this.#s.messageById.get(msgId, sessionId) as MessageRow | undefined;
  }

  messageByKey(sessionId: number, keyId: string): MessageRow | undefined {
    return this.#s.messageByKey.get(sessionId, keyId) as MessageRow | undefined;
  }

  messageSent(sessionId: number, msgId: number, key: unknown, message: unknown | null, timestamp: number, now: string): void {
    this.#s.messageSent.run(JSON.stringify(key), message === null ? null : JSON.stringify(message), timestamp, now, msgId, sessionId);
  }

  messageStatus(msgId: number, status: MessageStatus, now: string): void {
    this.#s.messageStatus.run(status, now, msgId);
  }

  messageFailed(sessionId: number, msgId: number, error: string, now: string): void {
    this.#s.messageFailed.run(error, now, msgId, sessionId);
  }

  messageRetry(msgId: number, keyId: string, key: unknown, now: string): void {
    this.#s.messageRetry.run(keyId, JSON.stringify(key), now, msgId);
  }

  messageEdited(msgId: number, message: unknown | null, now: string): void {
    this.#s.messageEdited.run(message === null ? null : JSON.stringify(message), now, msgId);
  }

  messageDeleted(msgId: number, now: string): void {
    this.#s.messageDeleted.run(now, now, msgId);
  }

  /** Removes a log row outright (a send the network refused before anything went out). */
  dropMessage(msgId: number): void {
    this.#s.dropMessage.run(msgId);
  }

  messageLogs(sessionId: number, options: { status?: MessageStatus; page: number; perPage: number }): Page<MessageRow> {
    const where = options.status ? 'session_id = ? AND status = ?' : 'session_id = ?';
    const args: unknown[] = options.status ? [sessionId, options.status] : [sessionId];
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM sessions_messages WHERE ${where}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT * FROM sessions_messages WHERE ${where} ORDER BY id DESC LIMIT ? OFFSET ?`)
      .all(...args, options.perPage, (options.page - 1) * options.perPage) as MessageRow[];
    return { rows, total };
  }

  // Events

  insertEvent(sessionId: number, orgId: string, event: EventName, payload: string, now: string): number {
    return Number(this.#s.insertEvent.run(sessionId, orgId, event, payload, now).lastInsertRowid);
  }

  events(sessionId: number, options: { afterId?: number; limit?: number; event?: EventName } = {}): SessionEvent[] {
    const rows = this.db
      .prepare(
        `SELECT id, session_id, org_id, event, payload, created_at FROM sessions_events
         WHERE session_id = ? AND id > ? ${options.event ? 'AND event = ?' : ''} ORDER BY id LIMIT ?`,
      )
      .all(...[sessionId, options.afterId ?? 0, ...(options.event ? [options.event] : []), options.limit ?? 1000]) as {
      id: number;
      session_id: number;
      org_id: string;
      event: EventName;
      payload: string;
      created_at: string;
    }[];
    return rows.map((r) => ({ id: r.id, sessionId: r.session_id, orgId: r.org_id, event: r.event, payload: JSON.parse(r.payload), createdAt: r.created_at }));
  }

  // Session and audit logs

  statusLog(sessionId: number, eventType: string, status: string, reason: string | null, now: string): void {
    this.#s.insertStatusLog.run(sessionId, eventType, status, reason, now);
  }

  statusLogs(sessionId: number, page: number, perPage: number): Page<StatusLogRow> {
    const total = (this.db.prepare('SELECT COUNT(*) AS n FROM sessions_status_logs WHERE session_id = ?').get(sessionId) as { n: number }).n;
    const rows = this.db
      .prepare('SELECT * FROM sessions_status_logs WHERE session_id = ? ORDER BY id DESC LIMIT ? OFFSET ?')
      .all(sessionId, perPage, (page - 1) * perPage) as StatusLogRow[];
    return { rows, total };
  }

  audit(sessionId: number, orgId: string, action: string, actor: Actor, details: Record<string, unknown> | null, now: string): void {
    this.#s.insertAudit.run(sessionId, orgId, action, actor.kind, actor.id, actor.userId, details ? JSON.stringify(details) : null, actor.address, now);
  }

  auditLogs(sessionId: number, orgId: string, page: number, perPage: number): Page<AuditRow> {
    const total = (this.db.prepare('SELECT COUNT(*) AS n FROM sessions_audit_logs WHERE session_id = ? AND org_id = ?').get(sessionId, orgId) as { n: number })
      .n;
    const rows = this.db
      .prepare('SELECT * FROM sessions_audit_logs WHERE session_id = ? AND org_id = ? ORDER BY id DESC LIMIT ? OFFSET ?')
      .all(sessionId, orgId, perPage, (page - 1) * perPage) as AuditRow[];
    return { rows, total };
  }

  /** Deletes recorded events, message logs, session logs and audit logs older than their cutoffs (ISO times); how many of each. */
  prune(before: Record<PrunedTable, string>): Record<PrunedTable, number> {
    return this.db.transaction(() => ({
      events: this.#s.pruneEvents.run(before.events).changes,
      messages: this.#s.pruneMessages.run(before.messages).changes,
      statusLogs: this.#s.pruneStatusLogs.run(before.statusLogs).changes,
      auditLogs: this.#s.pruneAuditLogs.run(before.auditLogs).changes,
    }))();
  }
}
