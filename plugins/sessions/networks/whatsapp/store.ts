/**
 * The WhatsApp network's SQL, on its own tables (`sessions_whatsapp_*`, all deleted with their
 * session): the paired account and Baileys' credentials, the Signal keys, the message store that
 * answers WhatsApp's retry requests, LID <-> phone-number mappings, contacts, and uploaded files.
 *
 * Credentials and keys are encrypted at rest with the data dir's key, each ciphertext bound to its
 * session, kind and id (a row copied elsewhere does not decrypt). A set of key writes is one
 * transaction: all of it is stored, or none.
 */
import type { Database } from '../../../../core/db.ts';
import type { Keys } from '../../../../core/keys.ts';

export interface AccountRow {
  session_id: number;
  creds_enc: string;
  registered: number;
  /** Reconnect this session when the server starts (connected by request, not disconnected since). */
  resume: number;
  me_jid: string | null;
  me_lid: string | null;
  me_name: string | null;
}

export interface StoredMessageRow {
  key_id: string;
  remote_jid: string;
  from_me: number;
  /** The gateway's message id (its message log) for a message this session sent through the API. */
  msg_id: number | null;
  /** The server acknowledged this send (the message log row was moved to sent). */
  acked: number;
  /** The key as JSON. */
  key: string;
  /** The message as protobuf bytes (`proto.Message`), null until the network built it. */
  message: Buffer | null;
  timestamp: number;
}

export interface ContactRow {
  jid: string;
  lid: string | null;
  name: string | null;
  notify: string | null;
  img_url: string | null;
  blocked: number;
}

export interface UploadRow {
  mimetype: string;
  file_name: string | null;
  bytes: Buffer;
}

const credsContext = (sessionId: number) => `sessions:whatsapp:${sessionId}:creds`;
const keyContext = (sessionId: number, type: string, id: string) => `sessions:whatsapp:${sessionId}:key:${type}:${id}`;

export class WhatsAppStore {
  readonly db: Database;
  readonly #keys: Pick<Keys, 'encrypt' | 'decrypt'>;
  readonly #s;

  constructor(db: Database, keys: Pick<Keys, 'encrypt' | 'decrypt'>) {
    this.db = db;
    this.#keys = keys;
    this.#s = {
      account: db.prepare('SELECT * FROM sessions_whatsapp_accounts WHERE session_id = ?'),
      accounts: db.prepare('SELECT * FROM sessions_whatsapp_accounts ORDER BY session_id'),
      saveCreds: db.prepare(
        `INSERT INTO sessions_whatsapp_accounts (session_id, creds_enc, registered, resume, updated_at) VALUES (@id, @creds, @registered, 0, @now)
         ON CONFLICT (session_id) DO UPDATE SET creds_enc = @creds, registered = @registered, updated_at = @now`,
      ),
      setResume: db.prepare('UPDATE sessions_whatsapp_accounts SET resume = ?, updated_at = ? WHERE session_id = ?'),
      setMe: db.prepare('UPDATE sessions_whatsapp_accounts SET me_jid = ?, me_lid = ?, me_name = ?, updated_at = ? WHERE session_id = ?'),
      deleteAccount: db.prepare('DELETE FROM sessions_whatsapp_accounts WHERE session_id = ?'),

      key: db.prepare('SELECT value_enc FROM sessions_whatsapp_keys WHERE session_id = ? AND type = ? AND id = ?').pluck(),
      setKey: db.prepare(
        'INSERT INTO sessions_whatsapp_keys (session_id, type, id, value_enc) VALUES (?, ?, ?, ?) ON CONFLICT (session_id, type, id) DO UPDATE SET value_enc = excluded.value_enc',
      ),
      deleteKey: db.prepare('DELETE FROM sessions_whatsapp_keys WHERE session_id = ? AND type = ? AND id = ?'),
      deleteKeys: db.prepare('DELETE FROM sessions_whatsapp_keys WHERE session_id = ?'),
      countKeys: db.prepare('SELECT COUNT(*) FROM sessions_whatsapp_keys WHERE session_id = ?').pluck(),

      insertMessage: db.prepare(
        `INSERT INTO sessions_whatsapp_messages (session_id, key_id, remote_jid, from_me, msg_id, key, message, timestamp, created_at)
         VALUES (@session_id, @key_id, @remote_jid, @from_me, @msg_id, @key, @message, @timestamp, @now)
         ON CONFLICT (session_id, key_id) DO UPDATE SET key = @key, message = COALESCE(@message, message), msg_id = COALESCE(@msg_id, msg_id),
           timestamp = @timestamp`,
      ),
      message: db.prepare(
        'SELECT key_id, remote_jid, from_me, msg_id, acked, key, message, timestamp FROM sessions_whatsapp_messages WHERE session_id = ? AND key_id = ?',
      ),
      markAcked: db.prepare('UPDATE sessions_whatsapp_messages SET acked = 1 WHERE session_id = ? AND key_id = ? AND acked = 0'),
      setMessage: db.prepare('UPDATE sessions_whatsapp_messages SET message = ? WHERE session_id = ? AND key_id = ?'),
      pruneMessagesByCount: db.prepare(
        `DELETE FROM sessions_whatsapp_messages WHERE session_id = @session_id AND rowid <= (
           SELECT rowid FROM sessions_whatsapp_messages WHERE session_id = @session_id ORDER BY rowid DESC LIMIT 1 OFFSET @keep)`,
      ),
      pruneMessagesByAge: db.prepare('DELETE FROM sessions_whatsapp_messages WHERE created_at < ?'),
      messageSessions: db.prepare('SELECT DISTINCT session_id FROM sessions_whatsapp_messages').pluck(),

      pnOfLid: db.prepare('SELECT pn FROM sessions_whatsapp_lids WHERE session_id = ? AND lid = ?').pluck(),
      lidOfPn: db.prepare('SELECT lid FROM sessions_whatsapp_lids WHERE session_id = ? AND pn = ?').pluck(),
      setLid: db.prepare(
        'INSERT INTO sessions_whatsapp_lids (session_id, lid, pn) VALUES (?, ?, ?) ON CONFLICT (session_id, lid) DO UPDATE SET pn = excluded.pn',
      ),

      contacts: db.prepare('SELECT jid, lid, name, notify, img_url, blocked FROM sessions_whatsapp_contacts WHERE session_id = ? ORDER BY jid'),
      contact: db.prepare('SELECT jid, lid, name, notify, img_url, blocked FROM sessions_whatsapp_contacts WHERE session_id = ? AND jid = ?'),
      upsertContact: db.prepare(
        `INSERT INTO sessions_whatsapp_contacts (session_id, jid, lid, name, notify, img_url, blocked, updated_at)
         VALUES (@session_id, @jid, @lid, @name, @notify, @img_url, COALESCE(@blocked, 0), @now)
         ON CONFLICT (session_id, jid) DO UPDATE SET lid = COALESCE(@lid, lid), name = COALESCE(@name, name), notify = COALESCE(@notify, notify),
           img_url = COALESCE(@img_url, img_url), blocked = COALESCE(@blocked, blocked), updated_at = @now`,
      ),
      clearBlocked: db.prepare('UPDATE sessions_whatsapp_contacts SET blocked = 0 WHERE session_id = ? AND blocked = 1'),

      insertUpload: db.prepare(
        'INSERT INTO sessions_whatsapp_uploads (id, org_id, session_id, mimetype, file_name, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      upload: db.prepare('SELECT mimetype, file_name, bytes FROM sessions_whatsapp_uploads WHERE id = ? AND org_id = ?'),
      pruneUploads: db.prepare('DELETE FROM sessions_whatsapp_uploads WHERE created_at < ?'),
    };
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  // The account and its credentials

  account(sessionId: number): AccountRow | undefined {
    return this.#s.account.get(sessionId) as AccountRow | undefined;
  }

  accounts(): AccountRow[] {
    return this.#s.accounts.all() as AccountRow[];
  }

  /** Baileys' credentials (JSON, Buffers as Baileys' BufferJSON writes them), decrypted; undefined when none are stored. */
  creds(sessionId: number): string | undefined {
    const row = this.account(sessionId);
    return row && this.#keys.decrypt(row.creds_enc, credsContext(sessionId));
  }

  saveCreds(sessionId: number, json: string, registered: boolean, now: string): void {
    this.#s.saveCreds.run({ id: sessionId, creds: this.#keys.encrypt(json, credsContext(sessionId)), registered: registered ? 1 : 0, now });
  }

  setResume(sessionId: number, resume: boolean, now: string): void {
    this.#s.setResume.run(resume ? 1 : 0, now, sessionId);
  }

  setMe(sessionId: number, me: { jid: string; lid: string | null; name: string | null }, now: string): void {
    this.#s.setMe.run(me.jid, me.lid, me.name, now, sessionId);
  }

  /** Forgets the pairing: credentials, every Signal key. Contacts and messages stay (they go with the session). */
  clearAuth(sessionId: number): void {
    this.transaction(() => {
      this.#s.deleteKeys.run(sessionId);
      this.#s.deleteAccount.run(sessionId);
    });
  }

  // Signal keys

  /** A key's JSON, decrypted; undefined when not stored. */
  key(sessionId: number, type: string, id: string): string | undefined {
    const enc = this.#s.key.get(sessionId, type, id) as string | undefined;
    return enc === undefined ? undefined : this.#keys.decrypt(enc, keyContext(sessionId, type, id));
  }

  /** Writes and deletes keys (null deletes) in one transaction: every change is stored, or none. */
  setKeys(sessionId: number, changes: Iterable<{ type: string; id: string; json: string | null }>): void {
    this.transaction(() => {
      for (const { type, id, json } of changes) {
        if (json === null) this.#s.deleteKey.run(sessionId, type, id);
        else this.#s.setKey.run(sessionId, type, id, this.#keys.encrypt(json, keyContext(sessionId, type, id)));
      }
    });
  }

  keyCount(sessionId: number): number {
    return this.#s.countKeys.get(sessionId) as number;
  }

  // Messages (answers retry requests, replies, poll votes, media re-requests)

  saveMessage(
    sessionId: number,
    row: { keyId: string; remoteJid: string; fromMe: boolean; msgId: number | null; key: unknown; message: Uint8Array | null; timestamp: number },
    now: string,
  ): void {
    this.#s.insertMessage.run({
      session_id: sessionId,
      key_id: row.keyId,
      remote_jid: row.remoteJid,
      from_me: row.fromMe ? 1 : 0,
      msg_id: row.msgId,
      key: JSON.stringify(row.key),
      message: row.message === null ? null : Buffer.from(row.message),
      timestamp: row.timestamp,
      now,
    });
  }

  message(sessionId: number, keyId: string): StoredMessageRow | undefined {
    return this.#s.message.get(sessionId, keyId) as StoredMessageRow | undefined;
  }

  /** Marks a send acknowledged; false when it already was (or is unknown). */
  markAcked(sessionId: number, keyId: string): boolean {
    return this.#s.markAcked.run(sessionId, keyId).changes > 0;
  }

  /** Replaces a stored message's content (an edit). */
  setMessage(sessionId: number, keyId: string, message: Uint8Array): void {
    this.#s.setMessage.run(Buffer.from(message), sessionId, keyId);
  }

  /** Keeps at most `keep` messages per session and none created before `before`. */
  pruneMessages(keep: number, before: string): void {
    this.transaction(() => {
      this.#s.pruneMessagesByAge.run(before);
      for (const sessionId of this.#s.messageSessions.all() as number[]) this.#s.pruneMessagesByCount.run({ session_id: sessionId, keep });
    });
  }

  // LID <-> phone number

  pnOfLid(sessionId: number, lid: string): string | undefined {
    return this.#s.pnOfLid.get(sessionId, lid) as string | undefined;
  }

  lidOfPn(sessionId: number, pn: string): string | undefined {
    return this.#s.lidOfPn.get(sessionId, pn) as string | undefined;
  }

  /** Records that `lid` (user@lid) is `pn` (user@s.whatsapp.net). */
  setLid(sessionId: number, lid: string, pn: string): void {
    this.#s.setLid.run(sessionId, lid, pn);
  }

  // Contacts

  contacts(sessionId: number): ContactRow[] {
    return this.#s.contacts.all(sessionId) as ContactRow[];
  }

  contact(sessionId: number, jid: string): ContactRow | undefined {
    return this.#s.contact.get(sessionId, jid) as ContactRow | undefined;
  }

  /** Creates or changes a contact; an absent (or null) field keeps what is stored. */
  upsertContact(
    sessionId: number,
    jid: string,
    fields: { lid?: string | null; name?: string | null; notify?: string | null; imgUrl?: string | null; blocked?: boolean },
    now: string,
  ): void {
    this.#s.upsertContact.run({
      session_id: sessionId,
      jid,
      lid: fields.lid ?? null,
      name: fields.name ?? null,
      notify: fields.notify ?? null,
      img_url: fields.imgUrl ?? null,
      blocked: fields.blocked === undefined ? null : fields.blocked ? 1 : 0,
      now,
    });
  }

  /** Replaces the block list: these contacts blocked, every other one not. */
  setBlocklist(sessionId: number, jids: string[], now: string): void {
    this.transaction(() => {
      this.#s.clearBlocked.run(sessionId);
      for (const jid of jids) this.upsertContact(sessionId, jid, { blocked: true }, now);
    });
  }

  // Uploaded files (sent later by URL)

  insertUpload(input: { id: string; orgId: string; sessionId: number; mimetype: string; fileName: string | null; bytes: Buffer }, now: string): void {
    this.#s.insertUpload.run(input.id, input.orgId, input.sessionId, input.mimetype, input.fileName, input.bytes, now);
  }

  upload(id: string, orgId: string): UploadRow | undefined {
    return this.#s.upload.get(id, orgId) as UploadRow | undefined;
  }

  pruneUploads(before: string): void {
    this.#s.pruneUploads.run(before);
  }
}
