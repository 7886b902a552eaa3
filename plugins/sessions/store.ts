/**
 * The sessions plugin's SQL: sessions (with their encrypted secrets), personal access tokens,
 * the message log, recorded events, session logs and audit logs.
 *
 * Inside a transaction a session row is read once: later reads of the same id answer what the
 * first one read, until a write through this store changes the row, so an event recorder, a
 * network host and a filter that each ask for the session cost one statement between them. (On
 * PostgreSQL the transaction is SERIALIZABLE: a concurrent change of the row fails the commit and
 * the transaction runs again with a fresh snapshot.)
 *
 * Every query goes through the plugin's {@link ScopedDb}: inside a transaction, it joins it.
 */
import type { Db } from '../../core/db.ts';
import { groupState } from '../../core/db-postgres.ts';
import type { ScopedDb } from './scoped-db.ts';
import type { Keys } from '../../core/keys.ts';
import type { EventName } from './events.ts';
import type { Actor, EventRowTable, SessionEvent, SessionRecord, SessionStatus, SessionType, SigningMode } from './types.ts';

/**
 * The lock key of a session's writers (`Db.transaction`'s `lock`): its events, message log and
 * webhook outbox get their ids in commit order, and on PostgreSQL concurrent writers of one
 * session queue instead of failing each other's serializable transactions.
 */
export function sessionLock(sessionId: number): string {
  return `sessions:${sessionId}`;
}

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

const PAT_COLUMNS = 'id, org_id, user_id, name, hint, created_by, created_at, last_used_at, expires_at, revoked_at';

const apiKeyContext = (id: number) => `sessions:api_key:${id}`;
const secretContext = (id: number) => `sessions:webhook_secret:${id}`;
const proxyContext = (id: number) => `sessions:proxy_url:${id}`;

/** An event to write (see {@link SessionsStore.insertEvents}). */
export interface NewEvent {
  sessionId: number;
  orgId: string;
  event: EventName;
  /** The payload as JSON. */
  raw: string;
  createdAt: string;
}

/** A row written with a batch of events: of a table that takes an event's id (`event`: its index in the batch), or of one that takes none (an audit row). */
export interface BatchRow {
  table: EventRowTable;
  event?: number;
  values: readonly unknown[];
}

/**
 * The audit log, as a transaction's audit rows are written: with its events (see
 * `Sessions.audit`); a row's values are session_id, org_id, action, actor_kind, actor_id,
 * user_id, details, address, created_at.
 */
export const AUDIT_LOG: EventRowTable = {
  name: 'sessions_audit_logs',
  columns: [
    ['session_id', 'bigint'],
    ['org_id', 'text'],
    ['action', 'text'],
    ['actor_kind', 'text'],
    ['actor_id', 'text'],
    ['user_id', 'text'],
    ['details', 'text'],
    ['address', 'text'],
    ['created_at', 'text'],
  ],
};

/** An audit row's values, in the order of {@link AUDIT_LOG}'s columns. */
export function auditRow(sessionId: number, orgId: string, action: string, actor: Actor, details: Record<string, unknown> | null, now: string): unknown[] {
  return [sessionId, orgId, action, actor.kind, actor.id, actor.userId, details ? JSON.stringify(details) : null, actor.address, now];
}

/** The text of PostgreSQL's statement writing events with the rows of `tables`, by their names. */
const eventStatements = new Map<string, string>();

function eventStatement(tables: readonly EventRowTable[]): string {
  const key = tables.map((t) => t.name).join(',');
  let sql = eventStatements.get(key);
  if (sql) return sql;
  const parts = [
    `e AS (INSERT INTO sessions_events (session_id, org_id, event, payload, created_at)
       SELECT s, o, ev, p, c FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS u(s, o, ev, p, c, n) ORDER BY n
       RETURNING id)`,
    'n AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM e)',
  ];
  const results = ['(SELECT array_agg(id ORDER BY id) FROM e) AS events'];
  tables.forEach((table, t) => {
    const names = table.columns.map(([name]) => name);
    const arrays = table.columns.map(([, type]) => `?::${type}[]`).join(', ');
    const returning = table.notify ? `id, ${table.notify.column}` : 'id';
    const selected = names.map((name) => `r.${name}`).join(', ');
    parts.push(
      table.eventId
        ? `d${t} AS (INSERT INTO ${table.name} (${names.join(', ')}, ${table.eventId})
             SELECT ${selected}, n.id FROM unnest(?::bigint[], ${arrays}) WITH ORDINALITY AS r(k, ${names.join(', ')}, m)
             JOIN n ON n.n = r.k ORDER BY r.m
             RETURNING ${returning})`
        : `d${t} AS (INSERT INTO ${table.name} (${names.join(', ')})
             SELECT ${selected} FROM unnest(${arrays}) WITH ORDINALITY AS r(${names.join(', ')}, m) ORDER BY r.m
             RETURNING ${returning})`,
    );
    results.push(`(SELECT array_agg(id ORDER BY id) FROM d${t}) AS d${t}`);
    if (table.notify) results.push(`(SELECT count(pg_notify(?, ${table.notify.column}::text)) FROM d${t}) AS notified${t}`);
  });
  sql = `WITH ${parts.join(',\n')}\nSELECT ${results.join(', ')}`;
  eventStatements.set(key, sql);
  return sql;
}

/** {@link SessionsStore.insertEvents} on PostgreSQL: one statement. */
async function insertEventsPostgres(tx: Db, events: readonly NewEvent[], rows: readonly BatchRow[]): Promise<{ events: number[]; rows: number[] }> {
  // Each table's rows, in the order given; the tables in the order of their first row.
  const byTable = new Map<EventRowTable, BatchRow[]>();
  for (const r of rows) {
    const mine = byTable.get(r.table);
    if (mine) mine.push(r);
    else byTable.set(r.table, [r]);
  }
  const tables = [...byTable.keys()];
  const params: unknown[] = [
    events.map((e) => e.sessionId),
    events.map((e) => e.orgId),
    events.map((e) => e.event),
    events.map((e) => e.raw),
    events.map((e) => e.createdAt),
  ];
  for (const [table, mine] of byTable) {
    // Events are numbered from 1 in the statement (row_number).
    if (table.eventId) params.push(mine.map((r) => r.event! + 1));
    for (let c = 0; c < table.columns.length; c++) params.push(mine.map((r) => r.values[c] ?? null));
  }
  // The NOTIFYs' channels, in the SELECT after every table's INSERT.
  for (const table of tables) if (table.notify) params.push(table.notify.channel);
  const result = (await tx.one<Record<string, (string | number)[] | null>>(eventStatement(tables), params))!;
  const ids = (result.events ?? []).map(Number);
  if (ids.length !== events.length) throw new Error(`wrote ${ids.length} of ${events.length} events`);
  // Each table's ids, in the order of its rows; then in the order of every row.
  const idsOf = new Map(
    tables.map((table, t) => {
      const written = (result[`d${t}`] ?? []).map(Number);
      const wanted = byTable.get(table)!.length;
      if (written.length !== wanted) throw new Error(`wrote ${written.length} of ${wanted} rows of ${table.name}`);
      return [table, written];
    }),
  );
  const next = new Map(tables.map((table) => [table, 0]));
  const rowIds = rows.map((r) => {
    const i = next.get(r.table)!;
    next.set(r.table, i + 1);
    return idsOf.get(r.table)![i]!;
  });
  return { events: ids, rows: rowIds };
}

/** What the hourly prune deletes by age. */
export type PrunedTable = 'events' | 'messages' | 'statusLogs' | 'auditLogs';

export class SessionsStore {
  readonly db: ScopedDb;
  readonly #keys: Keys;

  constructor(db: ScopedDb, keys: Keys) {
    this.db = db;
    this.#keys = keys;
  }

  /**
   * Runs `fn` in one transaction (inside one: joins it); session rows are read once in it (see
   * above). `sessions`: the sessions whose logs it writes (events, messages, the outbox); the
   * transactions that name one run one at a time, over every instance ({@link sessionLock}).
   */
  transaction<T>(fn: () => Promise<T>, sessions: readonly number[] = []): Promise<T> {
    return this.db.transaction(() => fn(), sessions.length ? { lock: sessions.map(sessionLock) } : undefined);
  }

  /**
   * Session rows read in the current transaction, by id (undefined: no such row); undefined
   * outside one. On PostgreSQL the transactions of a group share theirs (they share a snapshot, see `groupState`).
   */
  #snapshot(): Map<number, SessionRecord | undefined> | undefined {
    const scope = this.db.scope;
    if (!scope) return undefined;
    const state = groupState(scope.tx) ?? scope.state;
    let snapshot = state.get(this) as Map<number, SessionRecord | undefined> | undefined;
    if (!snapshot) state.set(this, (snapshot = new Map()));
    return snapshot;
  }

  /** A session row changed: the snapshot forgets it. */
  #wrote(id: number): void {
    const scope = this.db.scope;
    if (scope) ((groupState(scope.tx) ?? scope.state).get(this) as Map<number, unknown> | undefined)?.delete(id);
  }

  async #session(where: string, params: unknown[]): Promise<SessionRecord | undefined> {
    const row = await this.db.one<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE ${where}`, params);
    return row && toSession(row);
  }

  // Sessions

  /** A session by id; inside a transaction, read once (see above). */
  async session(id: number): Promise<SessionRecord | undefined> {
    const snapshot = this.#snapshot();
    if (snapshot?.has(id)) return snapshot.get(id);
    const session = await this.#session('id = ?', [id]);
    snapshot?.set(id, session);
    return session;
  }

  sessionInOrg(id: number, orgId: string): Promise<SessionRecord | undefined> {
    return this.#session('id = ? AND org_id = ?', [id, orgId]);
  }

  async sessionsOfOrg(orgId: string): Promise<SessionRecord[]> {
    return (await this.db.all<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions_sessions WHERE org_id = ? ORDER BY id`, [orgId])).map(toSession);
  }

  /** The session that owns a number in an organization, of one type when `type` is given. */
  sessionByPhone(orgId: string, phone: string, type?: SessionType): Promise<SessionRecord | undefined> {
    return type
      ? this.#session('org_id = ? AND phone_number = ? AND type = ?', [orgId, phone, type])
      : this.#session('org_id = ? AND phone_number = ?', [orgId, phone]);
  }

  /** The session of an API key, by the key's SHA-256. */
  sessionByKeyHash(hash: string): Promise<SessionRecord | undefined> {
    return this.#session('api_key_hash = ?', [hash]);
  }

  /** Inserts a session with its secrets (encrypted, bound to the new id), in one transaction. */
  insertSession(
    input: { orgId: string; type: SessionType; status: SessionStatus; phoneNumber: string; name: string } & Omit<SessionChanges, 'name' | 'phone_number'>,
    secrets: { apiKey: string; apiKeyHash: string; webhookSecret: string },
    now: string,
  ): Promise<number> {
    return this.transaction(async () => {
      const id = (await this.db.value<number>(
        `INSERT INTO sessions_sessions (org_id, type, name, phone_number, status, account_protection, log_messages, webhook_url,
          webhook_enabled, webhook_events, webhook_secret_enc, read_incoming_messages, auto_reject_calls, ignore_groups,
          ignore_channels, ignore_broadcasts, always_online, api_key_enc, api_key_hash, created_at, updated_at)
         VALUES (@org_id, @type, @name, @phone_number, @status, @account_protection, @log_messages, @webhook_url, @webhook_enabled,
          @webhook_events, '', @read_incoming_messages, @auto_reject_calls, @ignore_groups, @ignore_channels, @ignore_broadcasts,
          @always_online, '', @api_key_hash, @now, @now) RETURNING id`,
        {
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
        },
      ))!;
      await this.db.run('UPDATE sessions_sessions SET api_key_enc = ?, api_key_hash = ?, webhook_secret_enc = ? WHERE id = ?', [
        this.#keys.encrypt(secrets.apiKey, apiKeyContext(id)),
        secrets.apiKeyHash,
        this.#keys.encrypt(secrets.webhookSecret, secretContext(id)),
        id,
      ]);
      this.#wrote(id);
      return id;
    });
  }

  async updateSession(id: number, changes: SessionChanges, now: string): Promise<void> {
    const entries = Object.entries(changes).filter(([k, v]) => CHANGEABLE.has(k) && v !== undefined);
    if (entries.length === 0) return;
    const sets = entries.map(([k]) => `${k} = @${k}`).join(', ');
    const params: Record<string, unknown> = { id, updated_at: now };
    for (const [k, v] of entries) params[k] = columnValue(v);
    await this.db.run(`UPDATE sessions_sessions SET ${sets}, updated_at = @updated_at WHERE id = @id`, params);
    this.#wrote(id);
  }

  /** Sets the status with why it is so (null: no reason given). */
  async setStatus(id: number, status: SessionStatus, reason: string | null, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_sessions SET status = ?, status_reason = ?, updated_at = ? WHERE id = ?', [status, reason, now, id]);
    this.#wrote(id);
  }

  async setApiKey(id: number, apiKey: string, hash: string, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_sessions SET api_key_enc = ?, api_key_hash = ?, updated_at = ? WHERE id = ?', [
      this.#keys.encrypt(apiKey, apiKeyContext(id)),
      hash,
      now,
      id,
    ]);
    this.#wrote(id);
  }

  async setWebhookSecret(id: number, secret: string, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_sessions SET webhook_secret_enc = ?, updated_at = ? WHERE id = ?', [
      this.#keys.encrypt(secret, secretContext(id)),
      now,
      id,
    ]);
    this.#wrote(id);
  }

  async setProxyUrl(id: number, proxyUrl: string | null, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_sessions SET proxy_url_enc = ?, updated_at = ? WHERE id = ?', [
      proxyUrl === null ? null : this.#keys.encrypt(proxyUrl, proxyContext(id)),
      now,
      id,
    ]);
    this.#wrote(id);
  }

  async secrets(id: number): Promise<{ apiKey: string; webhookSecret: string; proxyUrl: string | null }> {
    const row = (await this.db.one<{ api_key_enc: string; webhook_secret_enc: string; proxy_url_enc: string | null }>(
      'SELECT api_key_enc, webhook_secret_enc, proxy_url_enc FROM sessions_sessions WHERE id = ?',
      [id],
    ))!;
    return {
      apiKey: this.#keys.decrypt(row.api_key_enc, apiKeyContext(id)),
      webhookSecret: this.#keys.decrypt(row.webhook_secret_enc, secretContext(id)),
      proxyUrl: row.proxy_url_enc === null ? null : this.#keys.decrypt(row.proxy_url_enc, proxyContext(id)),
    };
  }

  /** The webhook secret of a session, decrypted; undefined when there is no such session. */
  async webhookSecret(id: number): Promise<string | undefined> {
    const enc = await this.db.value<string>('SELECT webhook_secret_enc FROM sessions_sessions WHERE id = ?', [id]);
    return enc === undefined ? undefined : this.#keys.decrypt(enc, secretContext(id));
  }

  async deleteSession(id: number): Promise<void> {
    await this.db.run('DELETE FROM sessions_sessions WHERE id = ?', [id]);
    this.#wrote(id);
  }

  // Personal access tokens

  async insertPat(
    input: { orgId: string; userId: string; name: string; hash: string; hint: string; createdBy: string; expiresAt: string | null },
    now: string,
  ): Promise<PatRow> {
    return (await this.db.one<PatRow>(
      `INSERT INTO sessions_pats (org_id, user_id, name, token_hash, hint, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       RETURNING ${PAT_COLUMNS}`,
      [input.orgId, input.userId, input.name, input.hash, input.hint, input.createdBy, now, input.expiresAt],
    ))!;
  }

  patByHash(hash: string): Promise<PatRow | undefined> {
    return this.db.one<PatRow>(`SELECT ${PAT_COLUMNS} FROM sessions_pats WHERE token_hash = ?`, [hash]);
  }

  pat(id: number, orgId: string): Promise<PatRow | undefined> {
    return this.db.one<PatRow>(`SELECT ${PAT_COLUMNS} FROM sessions_pats WHERE id = ? AND org_id = ?`, [id, orgId]);
  }

  patsOfOrg(orgId: string): Promise<PatRow[]> {
    return this.db.all<PatRow>(`SELECT ${PAT_COLUMNS} FROM sessions_pats WHERE org_id = ? AND revoked_at IS NULL ORDER BY id`, [orgId]);
  }

  async revokePat(id: number, now: string): Promise<boolean> {
    return (await this.db.run('UPDATE sessions_pats SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [now, id])).changes > 0;
  }

  async touchPat(id: number, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_pats SET last_used_at = ? WHERE id = ?', [now, id]);
  }

  // Message log

  async insertMessage(
    input: { sessionId: number; keyId: string; jid: string; recipient: string; type: string; key: unknown; request: unknown | null },
    now: string,
  ): Promise<number> {
    return (await this.db.value<number>(
      `INSERT INTO sessions_messages (session_id, key_id, jid, recipient, type, status, remote_key, request, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 'in_progress', ?, ?, ?, ?) RETURNING id`,
      [
        input.sessionId,
        input.keyId,
        input.jid,
        input.recipient,
        input.type,
        JSON.stringify(input.key),
        input.request === null ? null : JSON.stringify(input.request),
        now,
        now,
      ],
    ))!;
  }

  message(sessionId: number, msgId: number): Promise<MessageRow | undefined> {
    return this.db.one<MessageRow>('SELECT * FROM sessions_messages WHERE id = ? AND session_id = ?', [msgId, sessionId]);
  }

  messageByKey(sessionId: number, keyId: string): Promise<MessageRow | undefined> {
    return this.db.one<MessageRow>('SELECT * FROM sessions_messages WHERE session_id = ? AND key_id = ?', [sessionId, keyId]);
  }

  async messageSent(sessionId: number, msgId: number, key: unknown, message: unknown | null, timestamp: number, now: string): Promise<void> {
    await this.db.run(
      "UPDATE sessions_messages SET status = 'sent', remote_key = ?, message = ?, message_timestamp = ?, error = NULL, updated_at = ? WHERE id = ? AND session_id = ?",
      [JSON.stringify(key), message === null ? null : JSON.stringify(message), timestamp, now, msgId, sessionId],
    );
  }

  async messageStatus(msgId: number, status: MessageStatus, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_messages SET status = ?, updated_at = ? WHERE id = ?', [status, now, msgId]);
  }

  async messageFailed(sessionId: number, msgId: number, error: string, now: string): Promise<void> {
    await this.db.run("UPDATE sessions_messages SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND session_id = ?", [
      error,
      now,
      msgId,
      sessionId,
    ]);
  }

  async messageRetry(msgId: number, keyId: string, key: unknown, now: string): Promise<void> {
    await this.db.run(
      "UPDATE sessions_messages SET status = 'in_progress', key_id = ?, remote_key = ?, error = NULL, attempts = attempts + 1, updated_at = ? WHERE id = ?",
      [keyId, JSON.stringify(key), now, msgId],
    );
  }

  async messageEdited(msgId: number, message: unknown | null, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_messages SET message = COALESCE(?, message), updated_at = ? WHERE id = ?', [
      message === null ? null : JSON.stringify(message),
      now,
      msgId,
    ]);
  }

  async messageDeleted(msgId: number, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_messages SET deleted_at = ?, updated_at = ? WHERE id = ?', [now, now, msgId]);
  }

  /** Removes a log row outright (a send the network refused before anything went out). */
  async dropMessage(msgId: number): Promise<void> {
    await this.db.run('DELETE FROM sessions_messages WHERE id = ?', [msgId]);
  }

  /** A page of rows of a table, newest first, and how many there are in all. */
  async #page<T>(table: string, where: string, args: unknown[], page: number, perPage: number): Promise<Page<T>> {
    const total = (await this.db.value<number>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, args)) ?? 0;
    const rows = await this.db.all<T>(`SELECT * FROM ${table} WHERE ${where} ORDER BY id DESC LIMIT ? OFFSET ?`, [...args, perPage, (page - 1) * perPage]);
    return { rows, total };
  }

  messageLogs(sessionId: number, options: { status?: MessageStatus; page: number; perPage: number }): Promise<Page<MessageRow>> {
    return options.status
      ? this.#page('sessions_messages', 'session_id = ? AND status = ?', [sessionId, options.status], options.page, options.perPage)
      : this.#page('sessions_messages', 'session_id = ?', [sessionId], options.page, options.perPage);
  }

  // Events

  /**
   * Writes events, in order, and with them rows of other tables that take an event's id (the
   * webhooks outbox), with `tx` (the recording transaction's). Answers the events' ids and the
   * rows' (in the order given). On PostgreSQL this is one statement: the events by one INSERT,
   * each table's rows by one INSERT taking the ids from it, and their NOTIFYs; the ids of one
   * INSERT are drawn in the order of its rows (`ORDER BY` of its source), so sorted they are the
   * rows' in order. On SQLite, where a statement costs no round trip, one INSERT per row.
   */
  async insertEvents(tx: Db, events: readonly NewEvent[], rows: readonly BatchRow[]): Promise<{ events: number[]; rows: number[] }> {
    if (events.length === 0 && rows.length === 0) return { events: [], rows: [] };
    if (tx.engine === 'postgres') return insertEventsPostgres(tx, events, rows);
    const ids: number[] = [];
    for (const e of events) {
      ids.push(
        (await tx.value<number>('INSERT INTO sessions_events (session_id, org_id, event, payload, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id', [
          e.sessionId,
          e.orgId,
          e.event,
          e.raw,
          e.createdAt,
        ]))!,
      );
    }
    const rowIds: number[] = [];
    for (const { table, event, values } of rows) {
      const columns = [...table.columns.map(([name]) => name), ...(table.eventId ? [table.eventId] : [])];
      rowIds.push(
        (await tx.value<number>(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')}) RETURNING id`, [
          ...values,
          ...(table.eventId ? [ids[event!]] : []),
        ]))!,
      );
    }
    return { events: ids, rows: rowIds };
  }

  async events(sessionId: number, options: { afterId?: number; limit?: number; event?: EventName } = {}): Promise<SessionEvent[]> {
    const rows = await this.db.all<{ id: number; session_id: number; org_id: string; event: EventName; payload: string; created_at: string }>(
      `SELECT id, session_id, org_id, event, payload, created_at FROM sessions_events
       WHERE session_id = ? AND id > ? ${options.event ? 'AND event = ?' : ''} ORDER BY id LIMIT ?`,
      [sessionId, options.afterId ?? 0, ...(options.event ? [options.event] : []), options.limit ?? 1000],
    );
    return rows.map((r) => ({ id: r.id, sessionId: r.session_id, orgId: r.org_id, event: r.event, payload: JSON.parse(r.payload), createdAt: r.created_at }));
  }

  // Session and audit logs

  async statusLog(sessionId: number, eventType: string, status: string, reason: string | null, now: string): Promise<void> {
    await this.db.run('INSERT INTO sessions_status_logs (session_id, event_type, status, reason, occurred_at) VALUES (?, ?, ?, ?, ?)', [
      sessionId,
      eventType,
      status,
      reason,
      now,
    ]);
  }

  statusLogs(sessionId: number, page: number, perPage: number): Promise<Page<StatusLogRow>> {
    return this.#page('sessions_status_logs', 'session_id = ?', [sessionId], page, perPage);
  }

  async audit(sessionId: number, orgId: string, action: string, actor: Actor, details: Record<string, unknown> | null, now: string): Promise<void> {
    const columns = AUDIT_LOG.columns.map(([name]) => name);
    await this.db.run(
      `INSERT INTO ${AUDIT_LOG.name} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
      auditRow(sessionId, orgId, action, actor, details, now),
    );
  }

  auditLogs(sessionId: number, orgId: string, page: number, perPage: number): Promise<Page<AuditRow>> {
    return this.#page('sessions_audit_logs', 'session_id = ? AND org_id = ?', [sessionId, orgId], page, perPage);
  }

  /** Deletes recorded events, message logs, session logs and audit logs older than their cutoffs (ISO times); how many of each. */
  prune(before: Record<PrunedTable, string>): Promise<Record<PrunedTable, number>> {
    return this.transaction(async () => ({
      events: (await this.db.run('DELETE FROM sessions_events WHERE created_at < ?', [before.events])).changes,
      messages: (await this.db.run('DELETE FROM sessions_messages WHERE created_at < ?', [before.messages])).changes,
      statusLogs: (await this.db.run('DELETE FROM sessions_status_logs WHERE occurred_at < ?', [before.statusLogs])).changes,
      auditLogs: (await this.db.run('DELETE FROM sessions_audit_logs WHERE created_at < ?', [before.auditLogs])).changes,
    }));
  }
}
