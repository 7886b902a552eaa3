/**
 * The WhatsApp network's SQL, on its own tables (`sessions_whatsapp_*`, all deleted with their
 * session): the paired account and Baileys' credentials, the Signal keys, the message store that
 * answers WhatsApp's retry requests, LID <-> phone-number mappings, contacts, and uploaded files.
 *
 * Credentials and keys are encrypted at rest with the data dir's key, each ciphertext bound to its
 * session, kind and id (a row copied elsewhere does not decrypt). A set of key writes is one
 * transaction: all of it is stored, or none. `db` is the plugin's scoped view (see `scoped-db.ts`):
 * inside a transaction of the host, writes join it.
 */
import type { Db } from '../../../../core/db.ts';
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
  readonly db: Db;
  readonly #keys: Pick<Keys, 'encrypt' | 'decrypt'>;

  constructor(db: Db, keys: Pick<Keys, 'encrypt' | 'decrypt'>) {
    this.db = db;
    this.#keys = keys;
  }

  transaction<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(() => fn());
  }

  // The account and its credentials

  account(sessionId: number): Promise<AccountRow | undefined> {
    return this.db.one<AccountRow>('SELECT * FROM sessions_whatsapp_accounts WHERE session_id = ?', [sessionId]);
  }

  accounts(): Promise<AccountRow[]> {
    return this.db.all<AccountRow>('SELECT * FROM sessions_whatsapp_accounts ORDER BY session_id');
  }

  /** Baileys' credentials (JSON, Buffers as Baileys' BufferJSON writes them), decrypted; undefined when none are stored. */
  async creds(sessionId: number): Promise<string | undefined> {
    const row = await this.account(sessionId);
    return row && this.#keys.decrypt(row.creds_enc, credsContext(sessionId));
  }

  async saveCreds(sessionId: number, json: string, registered: boolean, now: string): Promise<void> {
    await this.db.run(
      `INSERT INTO sessions_whatsapp_accounts (session_id, creds_enc, registered, resume, updated_at) VALUES (@id, @creds, @registered, 0, @now)
       ON CONFLICT (session_id) DO UPDATE SET creds_enc = @creds, registered = @registered, updated_at = @now`,
      { id: sessionId, creds: this.#keys.encrypt(json, credsContext(sessionId)), registered: registered ? 1 : 0, now },
    );
  }

  async setResume(sessionId: number, resume: boolean, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_whatsapp_accounts SET resume = ?, updated_at = ? WHERE session_id = ?', [resume ? 1 : 0, now, sessionId]);
  }

  async setMe(sessionId: number, me: { jid: string; lid: string | null; name: string | null }, now: string): Promise<void> {
    await this.db.run('UPDATE sessions_whatsapp_accounts SET me_jid = ?, me_lid = ?, me_name = ?, updated_at = ? WHERE session_id = ?', [
      me.jid,
      me.lid,
      me.name,
      now,
      sessionId,
    ]);
  }

  /** Forgets the pairing: credentials, every Signal key. Contacts and messages stay (they go with the session). */
  clearAuth(sessionId: number): Promise<void> {
    return this.transaction(async () => {
      await this.db.run('DELETE FROM sessions_whatsapp_keys WHERE session_id = ?', [sessionId]);
      await this.db.run('DELETE FROM sessions_whatsapp_accounts WHERE session_id = ?', [sessionId]);
    });
  }

  // Signal keys

  /** A key's JSON, decrypted; undefined when not stored. */
  async key(sessionId: number, type: string, id: string): Promise<string | undefined> {
    const enc = await this.db.value<string>('SELECT value_enc FROM sessions_whatsapp_keys WHERE session_id = ? AND type = ? AND id = ?', [sessionId, type, id]);
    return enc === undefined ? undefined : this.#keys.decrypt(enc, keyContext(sessionId, type, id));
  }

  /** Writes and deletes keys (null deletes) in one transaction: every change is stored, or none. */
  setKeys(sessionId: number, changes: Iterable<{ type: string; id: string; json: string | null }>): Promise<void> {
    const list = [...changes];
    return this.transaction(async () => {
      for (const { type, id, json } of list) {
        if (json === null) await this.db.run('DELETE FROM sessions_whatsapp_keys WHERE session_id = ? AND type = ? AND id = ?', [sessionId, type, id]);
        else {
          await this.db.run(
            'INSERT INTO sessions_whatsapp_keys (session_id, type, id, value_enc) VALUES (?, ?, ?, ?) ON CONFLICT (session_id, type, id) DO UPDATE SET value_enc = excluded.value_enc',
            [sessionId, type, id, this.#keys.encrypt(json, keyContext(sessionId, type, id))],
          );
        }
      }
    });
  }

  async keyCount(sessionId: number): Promise<number> {
    return (await this.db.value<number>('SELECT COUNT(*) FROM sessions_whatsapp_keys WHERE session_id = ?', [sessionId])) ?? 0;
  }

  // Messages (answers retry requests, replies, poll votes, media re-requests)

  async saveMessage(
    sessionId: number,
    row: { keyId: string; remoteJid: string; fromMe: boolean; msgId: number | null; key: unknown; message: Uint8Array | null; timestamp: number },
    now: string,
  ): Promise<void> {
    await this.db.run(
      `INSERT INTO sessions_whatsapp_messages (session_id, key_id, remote_jid, from_me, msg_id, key, message, timestamp, created_at)
       VALUES (@session_id, @key_id, @remote_jid, @from_me, @msg_id, @key, @message, @timestamp, @now)
       ON CONFLICT (session_id, key_id) DO UPDATE SET key = @key, message = COALESCE(@message, sessions_whatsapp_messages.message),
         msg_id = COALESCE(@msg_id, sessions_whatsapp_messages.msg_id), timestamp = @timestamp`,
      {
        session_id: sessionId,
        key_id: row.keyId,
        remote_jid: row.remoteJid,
        from_me: row.fromMe ? 1 : 0,
        msg_id: row.msgId,
        key: JSON.stringify(row.key),
        message: row.message === null ? null : Buffer.from(row.message),
        timestamp: row.timestamp,
        now,
      },
    );
  }

  message(sessionId: number, keyId: string): Promise<StoredMessageRow | undefined> {
    return this.db.one<StoredMessageRow>(
      'SELECT key_id, remote_jid, from_me, msg_id, acked, key, message, timestamp FROM sessions_whatsapp_messages WHERE session_id = ? AND key_id = ?',
      [sessionId, keyId],
    );
  }

  /** Marks a send acknowledged; false when it already was (or is unknown). */
  async markAcked(sessionId: number, keyId: string): Promise<boolean> {
    return (
      (await this.db.run('UPDATE sessions_whatsapp_messages SET acked = 1 WHERE session_id = ? AND key_id = ? AND acked = 0', [sessionId, keyId])).changes > 0
    );
  }

  /** Replaces a stored message's content (an edit). */
  async setMessage(sessionId: number, keyId: string, message: Uint8Array): Promise<void> {
    await this.db.run('UPDATE sessions_whatsapp_messages SET message = ? WHERE session_id = ? AND key_id = ?', [Buffer.from(message), sessionId, keyId]);
  }

  /**
   * Keeps at most `keep` messages per session and none created before `before`. Insertion order
   * is `rowid`: SQLite's own, an identity column of that name on PostgreSQL.
   */
  pruneMessages(keep: number, before: string): Promise<void> {
    return this.transaction(async () => {
      await this.db.run('DELETE FROM sessions_whatsapp_messages WHERE created_at < ?', [before]);
      for (const sessionId of await this.db.all<{ session_id: number }>('SELECT DISTINCT session_id FROM sessions_whatsapp_messages')) {
        await this.db.run(
          `DELETE FROM sessions_whatsapp_messages WHERE session_id = @session_id AND rowid <= (
             SELECT rowid FROM sessions_whatsapp_messages WHERE session_id = @session_id ORDER BY rowid DESC LIMIT 1 OFFSET @keep)`,
          { session_id: sessionId.session_id, keep },
        );
      }
    });
  }

  // LID <-> phone number

  pnOfLid(sessionId: number, lid: string): Promise<string | undefined> {
    return this.db.value<string>('SELECT pn FROM sessions_whatsapp_lids WHERE session_id = ? AND lid = ?', [sessionId, lid]);
  }

  lidOfPn(sessionId: number, pn: string): Promise<string | undefined> {
    return this.db.value<string>('SELECT lid FROM sessions_whatsapp_lids WHERE session_id = ? AND pn = ?', [sessionId, pn]);
  }

  /** Records that `lid` (user@lid) is `pn` (user@s.whatsapp.net). */
  async setLid(sessionId: number, lid: string, pn: string): Promise<void> {
    await this.db.run(
      'INSERT INTO sessions_whatsapp_lids (session_id, lid, pn) VALUES (?, ?, ?) ON CONFLICT (session_id, lid) DO UPDATE SET pn = excluded.pn',
      [sessionId, lid, pn],
    );
  }

  // Contacts

  contacts(sessionId: number): Promise<ContactRow[]> {
    return this.db.all<ContactRow>('SELECT jid, lid, name, notify, img_url, blocked FROM sessions_whatsapp_contacts WHERE session_id = ? ORDER BY jid', [
      sessionId,
    ]);
  }

  contact(sessionId: number, jid: string): Promise<ContactRow | undefined> {
    return this.db.one<ContactRow>('SELECT jid, lid, name, notify, img_url, blocked FROM sessions_whatsapp_contacts WHERE session_id = ? AND jid = ?', [
      sessionId,
      jid,
    ]);
  }

  /** Creates or changes a contact; an absent (or null) field keeps what is stored. */
  async upsertContact(
    sessionId: number,
    jid: string,
    fields: { lid?: string | null; name?: string | null; notify?: string | null; imgUrl?: string | null; blocked?: boolean },
    now: string,
  ): Promise<void> {
    await this.db.run(
      `INSERT INTO sessions_whatsapp_contacts AS c (session_id, jid, lid, name, notify, img_url, blocked, updated_at)
       VALUES (@session_id, @jid, @lid, @name, @notify, @img_url, COALESCE(@blocked, 0), @now)
       ON CONFLICT (session_id, jid) DO UPDATE SET lid = COALESCE(@lid, c.lid), name = COALESCE(@name, c.name), notify = COALESCE(@notify, c.notify),
         img_url = COALESCE(@img_url, c.img_url), blocked = COALESCE(@blocked, c.blocked), updated_at = @now`,
      {
        session_id: sessionId,
        jid,
        lid: fields.lid ?? null,
        name: fields.name ?? null,
        notify: fields.notify ?? null,
        img_url: fields.imgUrl ?? null,
        blocked: fields.blocked === undefined ? null : fields.blocked ? 1 : 0,
        now,
      },
    );
  }

  /** Replaces the block list: these contacts blocked, every other one not. */
  setBlocklist(sessionId: number, jids: string[], now: string): Promise<void> {
    return this.transaction(async () => {
      await this.db.run('UPDATE sessions_whatsapp_contacts SET blocked = 0 WHERE session_id = ? AND blocked = 1', [sessionId]);
      for (const jid of jids) await this.upsertContact(sessionId, jid, { blocked: true }, now);
    });
  }

  // Uploaded files (sent later by URL)

  async insertUpload(
    input: { id: string; orgId: string; sessionId: number; mimetype: string; fileName: string | null; bytes: Buffer },
    now: string,
  ): Promise<void> {
    await this.db.run('INSERT INTO sessions_whatsapp_uploads (id, org_id, session_id, mimetype, file_name, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
      input.id,
      input.orgId,
      input.sessionId,
      input.mimetype,
      input.fileName,
      input.bytes,
      now,
    ]);
  }

  upload(id: string, orgId: string): Promise<UploadRow | undefined> {
    return this.db.one<UploadRow>('SELECT mimetype, file_name, bytes FROM sessions_whatsapp_uploads WHERE id = ? AND org_id = ?', [id, orgId]);
  }

  async pruneUploads(before: string): Promise<void> {
    await this.db.run('DELETE FROM sessions_whatsapp_uploads WHERE created_at < ?', [before]);
  }
}
