/**
 * The sandbox network's SQL, on its own tables (`sessions_sandbox_*`): the LID of each number,
 * every session's copy of each message, contacts, groups and their members, and media (uploads
 * and the encrypted copies on the sandbox "CDN"). Session rows are not here: the sandbox reaches
 * them through its host.
 */
import { StaleAssumption } from '../../../core/db-postgres.ts';
import type { ScopedDb } from '../scoped-db.ts';
import type { ChatKind } from './types.ts';

/** How many phone <-> LID pairs a store keeps in memory. */
const LID_CACHE_SIZE = 10_000;

/**
 * Committed phone <-> LID pairs, bounded (the oldest go first). A pair never changes once
 * written: `pn` and `lid` are each unique in `sessions_sandbox_lids`, whose rows are only ever
 * inserted (never updated or deleted), so a committed pair is the answer on every instance for
 * good. A pair enters only once the transaction that read it committed (ScopedDb.afterCommit): a
 * row read inside a transaction may be one it wrote and may yet roll back. Absence is not kept.
 */
class LidPairs {
  readonly #lidOfPn = new Map<string, string>();
  readonly #pnOfLid = new Map<string, string>();

  lid(pn: string): string | undefined {
    return this.#lidOfPn.get(pn);
  }

  pn(lid: string): string | undefined {
    return this.#pnOfLid.get(lid);
  }

  add(pn: string, lid: string): void {
    if (this.#lidOfPn.has(pn)) return;
    if (this.#lidOfPn.size >= LID_CACHE_SIZE) {
      const [oldPn, oldLid] = this.#lidOfPn.entries().next().value!;
      this.#lidOfPn.delete(oldPn);
      this.#pnOfLid.delete(oldLid);
    }
    this.#lidOfPn.set(pn, lid);
    this.#pnOfLid.set(lid, pn);
  }
}

/** How many senders' contacts a store remembers as last read (the oldest go first). */
const CONTACT_HINTS = 10_000;

/**
 * The contacts of senders as this process last read them, by session and JID, bounded: a hint,
 * never an answer (another instance may have changed one since). A receive whose sender's hint
 * says there is nothing to change goes on without waiting for its contact read, and the read's
 * answer is checked when it comes (see `insertMessageKnowingContact`).
 */
class ContactHints {
  readonly #rows = new Map<string, ContactRow>();

  get(sessionId: number, jid: string): ContactRow | undefined {
    return this.#rows.get(`${sessionId} ${jid}`);
  }

  set(sessionId: number, jid: string, row: ContactRow | undefined): void {
    const key = `${sessionId} ${jid}`;
    this.#rows.delete(key);
    if (!row) return;
    if (this.#rows.size >= CONTACT_HINTS) this.#rows.delete(this.#rows.keys().next().value!);
    this.#rows.set(key, row);
  }
}

export interface SandboxMessageRow {
  session_id: number;
  key_id: string;
  from_me: number;
  chat: ChatKind;
  remote_key: string;
  message: string;
  origin_session_id: number | null;
  read_at: string | null;
}

export interface GroupRow {
  jid: string;
  org_id: string;
  subject: string;
  description: string | null;
  owner_jid: string | null;
  announce: number;
  restrict_info: number;
  invite_code: string;
  created_at: string;
}

export interface ContactRow {
  jid: string;
  name: string | null;
  notify: string | null;
  blocked: number;
}

export interface MediaRow {
  mimetype: string;
  file_name: string | null;
  bytes: Buffer;
}

export type MemberRole = 'admin' | 'superadmin' | null;
export type SandboxMediaKind = 'upload' | 'cdn';

const INSERT_MESSAGE = `INSERT INTO sessions_sandbox_messages (session_id, key_id, from_me, chat, remote_key, message, origin_session_id, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (session_id, key_id) DO UPDATE SET from_me = excluded.from_me, chat = excluded.chat, remote_key = excluded.remote_key,
    message = excluded.message, origin_session_id = excluded.origin_session_id, read_at = NULL, created_at = excluded.created_at`;

const messageParams = (row: Omit<SandboxMessageRow, 'read_at'>, now: string) => [
  row.session_id,
  row.key_id,
  row.from_me,
  row.chat,
  row.remote_key,
  row.message,
  row.origin_session_id,
  now,
];

const SELECT_CONTACT = 'SELECT jid, name, notify, blocked FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?';

export class SandboxStore {
  readonly #db: ScopedDb;
  readonly #lids = new LidPairs();
  readonly #contacts = new ContactHints();

  constructor(db: ScopedDb) {
    this.#db = db;
  }

  // Identities (read through the committed pairs kept in memory, see LidPairs)

  async lidByPn(digits: string): Promise<string | undefined> {
    const known = this.#lids.lid(digits);
    if (known !== undefined) return known;
    const lid = await this.#db.value<string>('SELECT lid FROM sessions_sandbox_lids WHERE pn = ?', [digits]);
    if (lid !== undefined) this.#db.afterCommit(() => this.#lids.add(digits, lid));
    return lid;
  }

  async pnByLid(lid: string): Promise<string | undefined> {
    const known = this.#lids.pn(lid);
    if (known !== undefined) return known;
    const pn = await this.#db.value<string>('SELECT pn FROM sessions_sandbox_lids WHERE lid = ?', [lid]);
    if (pn !== undefined) this.#db.afterCommit(() => this.#lids.add(pn, lid));
    return pn;
  }

  async insertLid(digits: string, lid: string): Promise<void> {
    const { changes } = await this.#db.run('INSERT INTO sessions_sandbox_lids (pn, lid) VALUES (?, ?) ON CONFLICT DO NOTHING', [digits, lid]);
    if (changes > 0) this.#db.afterCommit(() => this.#lids.add(digits, lid));
  }

  // Messages: every session's copy, keyed by (session, key id)

  /** Stores a copy of a message; one with the same key replaces it (unread again). */
  async insertMessage(row: Omit<SandboxMessageRow, 'read_at'>, now: string): Promise<void> {
    await this.#db.run(INSERT_MESSAGE, messageParams(row, now));
  }

  /**
   * {@link insertMessage}, then {@link contact} `jid` of the copy's session (the sender of an
   * inbound text): on PostgreSQL one statement, a round trip fewer on the chain of the session's
   * transactions (they run one after another, see `sessionLock`).
   */
  async insertMessageAndContact(row: Omit<SandboxMessageRow, 'read_at'>, now: string, jid: string): Promise<ContactRow | undefined> {
    if (this.#db.engine !== 'postgres') {
      await this.insertMessage(row, now);
      return this.contact(row.session_id, jid);
    }
    // Kept as a hint on PostgreSQL only, the one engine where a receive can go on without the answer.
    const contact = await this.#db.one<ContactRow>(...this.#insertMessageAndContact(row, now, jid));
    this.#contacts.set(row.session_id, jid, contact);
    return contact;
  }

  /**
   * {@link insertMessageAndContact} without waiting for its answer: when the contact as this store
   * last read it is `expected` (a sender whose contact the receive leaves as it is) and the
   * transaction is a PostgreSQL group member's, the statement is sent and true returned at once, the
   * caller going on as if the contact were still so; its answer is checked while the group's next
   * member runs, and a contact found otherwise (changed by another instance, say) runs the attempt
   * again (`StaleAssumption`), which then waits for the answer. False, having sent nothing,
   * otherwise (always on SQLite, where no hint is kept: `expected` gets undefined). On a session's chain of transactions (one after another) this is the one answer a
   * receive waited for.
   */
  insertMessageKnowingContact(
    row: Omit<SandboxMessageRow, 'read_at'>,
    now: string,
    jid: string,
    expected: (contact: ContactRow | undefined) => boolean,
  ): boolean {
    if (!expected(this.#contacts.get(row.session_id, jid))) return false;
    return this.#db.leaveToGroup(
      (db) => db.one<ContactRow>(...this.#insertMessageAndContact(row, now, jid)),
      (contact) => {
        this.#contacts.set(row.session_id, jid, contact);
        if (!expected(contact)) throw new StaleAssumption(`the contact ${jid} changed since this instance read it`);
      },
    );
  }

  #insertMessageAndContact(row: Omit<SandboxMessageRow, 'read_at'>, now: string, jid: string): [string, unknown[]] {
    return [`WITH copy AS (${INSERT_MESSAGE}) ${SELECT_CONTACT}`, [...messageParams(row, now), row.session_id, jid]];
  }

  message(sessionId: number, keyId: string): Promise<SandboxMessageRow | undefined> {
    return this.#db.one<SandboxMessageRow>('SELECT * FROM sessions_sandbox_messages WHERE session_id = ? AND key_id = ?', [sessionId, keyId]);
  }

  /** The recipients' copies of a message sent by `originId`. */
  copies(keyId: string, originId: number): Promise<SandboxMessageRow[]> {
    return this.#db.all<SandboxMessageRow>('SELECT * FROM sessions_sandbox_messages WHERE key_id = ? AND origin_session_id = ? ORDER BY session_id', [
      keyId,
      originId,
    ]);
  }

  /** Replaces the node of a message in the sender's copy and every recipient's. */
  async setNode(keyId: string, senderId: number, node: string): Promise<void> {
    await this.#db.run('UPDATE sessions_sandbox_messages SET message = ? WHERE key_id = ? AND (session_id = ? OR origin_session_id = ?)', [
      node,
      keyId,
      senderId,
      senderId,
    ]);
  }

  async deleteMessage(sessionId: number, keyId: string): Promise<void> {
    await this.#db.run('DELETE FROM sessions_sandbox_messages WHERE session_id = ? AND key_id = ?', [sessionId, keyId]);
  }

  /** Marks a received copy read; false when it already was. */
  async markRead(sessionId: number, keyId: string, now: string): Promise<boolean> {
    return (
      (await this.#db.run('UPDATE sessions_sandbox_messages SET read_at = ? WHERE session_id = ? AND key_id = ? AND read_at IS NULL', [now, sessionId, keyId]))
        .changes > 0
    );
  }

  // Contacts

  contacts(sessionId: number): Promise<ContactRow[]> {
    return this.#db.all<ContactRow>('SELECT jid, name, notify, blocked FROM sessions_sandbox_contacts WHERE session_id = ? ORDER BY jid', [sessionId]);
  }

  contact(sessionId: number, jid: string): Promise<ContactRow | undefined> {
    return this.#db.one<ContactRow>(SELECT_CONTACT, [sessionId, jid]);
  }

  /** Creates or changes a contact; a null field keeps what is stored. */
  async upsertContact(
    sessionId: number,
    jid: string,
    fields: { name?: string | null; notify?: string | null; blocked?: boolean | null },
    now: string,
  ): Promise<void> {
    const blocked = fields.blocked === undefined || fields.blocked === null ? null : fields.blocked ? 1 : 0;
    this.#contacts.set(sessionId, jid, undefined);
    await this.#db.run(
      `INSERT INTO sessions_sandbox_contacts (session_id, jid, name, notify, blocked, updated_at) VALUES (@session_id, @jid, @name, @notify, COALESCE(@blocked, 0), @now)
       ON CONFLICT (session_id, jid) DO UPDATE SET name = COALESCE(@name, sessions_sandbox_contacts.name), notify = COALESCE(@notify, sessions_sandbox_contacts.notify),
         blocked = COALESCE(@blocked, sessions_sandbox_contacts.blocked), updated_at = @now`,
      { session_id: sessionId, jid, name: fields.name ?? null, notify: fields.notify ?? null, blocked, now },
    );
  }

  // Groups

  group(jid: string, orgId: string): Promise<GroupRow | undefined> {
    return this.#db.one<GroupRow>('SELECT * FROM sessions_sandbox_groups WHERE jid = ? AND org_id = ?', [jid, orgId]);
  }

  groupByCode(code: string, orgId: string): Promise<GroupRow | undefined> {
    return this.#db.one<GroupRow>('SELECT * FROM sessions_sandbox_groups WHERE invite_code = ? AND org_id = ?', [code, orgId]);
  }

  /** The groups of an organization a number is a member of, oldest first. */
  groupsOf(orgId: string, memberJid: string): Promise<GroupRow[]> {
    return this.#db.all<GroupRow>(
      `SELECT g.* FROM sessions_sandbox_groups g JOIN sessions_sandbox_group_members m ON m.group_jid = g.jid
       WHERE g.org_id = ? AND m.jid = ? ORDER BY g.created_at, g.jid`,
      [orgId, memberJid],
    );
  }

  async insertGroup(input: { jid: string; orgId: string; subject: string; ownerJid: string; inviteCode: string }, now: string): Promise<void> {
    await this.#db.run(
      'INSERT INTO sessions_sandbox_groups (jid, org_id, subject, description, owner_jid, invite_code, created_at) VALUES (?, ?, ?, NULL, ?, ?, ?)',
      [input.jid, input.orgId, input.subject, input.ownerJid, input.inviteCode, now],
    );
  }

  /** Changes the given settings of a group; undefined ones stay. */
  async updateGroup(jid: string, settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean }): Promise<void> {
    const flag = (v: boolean | undefined) => (v === undefined ? null : v ? 1 : 0);
    await this.#db.run(
      `UPDATE sessions_sandbox_groups SET subject = COALESCE(@subject, subject), description = COALESCE(@description, description),
        announce = COALESCE(@announce, announce), restrict_info = COALESCE(@restrict, restrict_info) WHERE jid = @jid`,
      {
        jid,
        subject: settings.subject ?? null,
        description: settings.description ?? null,
        announce: flag(settings.announce),
        restrict: flag(settings.restrict),
      },
    );
  }

  async deleteGroup(jid: string): Promise<void> {
    await this.#db.run('DELETE FROM sessions_sandbox_groups WHERE jid = ?', [jid]);
  }

  /** Members in the order they joined (rowid: SQLite's own, an identity column of that name on PostgreSQL). */
  members(groupJid: string): Promise<{ jid: string; admin: MemberRole }[]> {
    return this.#db.all<{ jid: string; admin: MemberRole }>('SELECT jid, admin FROM sessions_sandbox_group_members WHERE group_jid = ? ORDER BY rowid', [
      groupJid,
    ]);
  }

  member(groupJid: string, jid: string): Promise<{ admin: MemberRole } | undefined> {
    return this.#db.one<{ admin: MemberRole }>('SELECT admin FROM sessions_sandbox_group_members WHERE group_jid = ? AND jid = ?', [groupJid, jid]);
  }

  async addMember(groupJid: string, jid: string, admin: MemberRole): Promise<void> {
    await this.#db.run('INSERT INTO sessions_sandbox_group_members (group_jid, jid, admin) VALUES (?, ?, ?)', [groupJid, jid, admin]);
  }

  async removeMember(groupJid: string, jid: string): Promise<void> {
    await this.#db.run('DELETE FROM sessions_sandbox_group_members WHERE group_jid = ? AND jid = ?', [groupJid, jid]);
  }

  async setAdmin(groupJid: string, jid: string, admin: MemberRole): Promise<void> {
    await this.#db.run('UPDATE sessions_sandbox_group_members SET admin = ? WHERE group_jid = ? AND jid = ?', [admin, groupJid, jid]);
  }

  // Media

  async insertMedia(
    input: { id: string; orgId: string; kind: SandboxMediaKind; mimetype: string; fileName: string | null; bytes: Buffer },
    now: string,
  ): Promise<void> {
    await this.#db.run('INSERT INTO sessions_sandbox_media (id, org_id, kind, mimetype, file_name, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
      input.id,
      input.orgId,
      input.kind,
      input.mimetype,
      input.fileName,
      input.bytes,
      now,
    ]);
  }

  media(id: string, orgId: string, kind: SandboxMediaKind): Promise<MediaRow | undefined> {
    return this.#db.one<MediaRow>('SELECT mimetype, file_name, bytes FROM sessions_sandbox_media WHERE id = ? AND org_id = ? AND kind = ?', [id, orgId, kind]);
  }
}
