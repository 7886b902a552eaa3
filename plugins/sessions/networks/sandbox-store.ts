/**
 * The sandbox network's SQL, on its own tables (`sessions_sandbox_*`): the LID of each number,
 * every session's copy of each message, contacts, groups and their members, and media (uploads
 * and the encrypted copies on the sandbox "CDN"). Session rows are not here: the sandbox reaches
 * them through its host.
 */
import type { Database } from '../../../core/db.ts';
import type { ChatKind } from './types.ts';

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

export class SandboxStore {
  readonly #s;

  constructor(db: Database) {
    this.#s = {
      lidByPn: db.prepare('SELECT lid FROM sessions_sandbox_lids WHERE pn = ?').pluck(),
      pnByLid: db.prepare('SELECT pn FROM sessions_sandbox_lids WHERE lid = ?').pluck(),
      insertLid: db.prepare('INSERT OR IGNORE INTO sessions_sandbox_lids (pn, lid) VALUES (?, ?)'),

      insertMessage: db.prepare(
        `INSERT OR REPLACE INTO sessions_sandbox_messages (session_id, key_id, from_me, chat, remote_key, message, origin_session_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      message: db.prepare('SELECT * FROM sessions_sandbox_messages WHERE session_id = ? AND key_id = ?'),
      copies: db.prepare('SELECT * FROM sessions_sandbox_messages WHERE key_id = ? AND origin_session_id = ?'),
      setNode: db.prepare('UPDATE sessions_sandbox_messages SET message = ? WHERE key_id = ? AND (session_id = ? OR origin_session_id = ?)'),
      deleteMessage: db.prepare('DELETE FROM sessions_sandbox_messages WHERE session_id = ? AND key_id = ?'),
      markRead: db.prepare('UPDATE sessions_sandbox_messages SET read_at = ? WHERE session_id = ? AND key_id = ? AND read_at IS NULL'),

      contacts: db.prepare('SELECT jid, name, notify, blocked FROM sessions_sandbox_contacts WHERE session_id = ? ORDER BY jid'),
      contact: db.prepare('SELECT jid, name, notify, blocked FROM sessions_sandbox_contacts WHERE session_id = ? AND jid = ?'),
      upsertContact: db.prepare(
        `INSERT INTO sessions_sandbox_contacts (session_id, jid, name, notify, blocked, updated_at) VALUES (@session_id, @jid, @name, @notify, COALESCE(@blocked, 0), @now)
         ON CONFLICT (session_id, jid) DO UPDATE SET name = COALESCE(@name, name), notify = COALESCE(@notify, notify),
           blocked = COALESCE(@blocked, blocked), updated_at = @now`,
      ),

      group: db.prepare('SELECT * FROM sessions_sandbox_groups WHERE jid = ? AND org_id = ?'),
      groupByCode: db.prepare('SELECT * FROM sessions_sandbox_groups WHERE invite_code = ? AND org_id = ?'),
      groupsOf: db.prepare(
        `SELECT g.* FROM sessions_sandbox_groups g JOIN sessions_sandbox_group_members m ON m.group_jid = g.jid
         WHERE g.org_id = ? AND m.jid = ? ORDER BY g.created_at, g.jid`,
      ),
      insertGroup: db.prepare(
        'INSERT INTO sessions_sandbox_groups (jid, org_id, subject, description, owner_jid, invite_code, created_at) VALUES (?, ?, ?, NULL, ?, ?, ?)',
      ),
      updateGroup: db.prepare(
        `UPDATE sessions_sandbox_groups SET subject = COALESCE(@subject, subject), description = COALESCE(@description, description),
          announce = COALESCE(@announce, announce), restrict_info = COALESCE(@restrict, restrict_info) WHERE jid = @jid`,
      ),
      deleteGroup: db.prepare('DELETE FROM sessions_sandbox_groups WHERE jid = ?'),
      members: db.prepare('SELECT jid, admin FROM sessions_sandbox_group_members WHERE group_jid = ? ORDER BY rowid'),
      member: db.prepare('SELECT admin FROM sessions_sandbox_group_members WHERE group_jid = ? AND jid = ?'),
      addMember: db.prepare('INSERT INTO sessions_sandbox_group_members (group_jid, jid, admin) VALUES (?, ?, ?)'),
      removeMember: db.prepare('DELETE FROM sessions_sandbox_group_members WHERE group_jid = ? AND jid = ?'),
      setAdmin: db.prepare('UPDATE sessions_sandbox_group_members SET admin = ? WHERE group_jid = ? AND jid = ?'),

      insertMedia: db.prepare('INSERT INTO sessions_sandbox_media (id, org_id, kind, mimetype, file_name, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      media: db.prepare('SELECT mimetype, file_name, bytes FROM sessions_sandbox_media WHERE id = ? AND org_id = ? AND kind = ?'),
    };
  }

  // Identities

  lidByPn(digits: string): string | undefined {
    return this.#s.lidByPn.get(digits) as string | undefined;
  }

  pnByLid(lid: string): string | undefined {
    return this.#s.pnByLid.get(lid) as string | undefined;
  }

  insertLid(digits: string, lid: string): void {
    this.#s.insertLid.run(digits, lid);
  }

  // Messages: every session's copy, keyed by (session, key id)

  insertMessage(row: Omit<SandboxMessageRow, 'read_at'>, now: string): void {
    this.#s.insertMessage.run(row.session_id, row.key_id, row.from_me, row.chat, row.remote_key, row.message, row.origin_session_id, now);
  }

  message(sessionId: number, keyId: string): SandboxMessageRow | undefined {
    return this.#s.message.get(sessionId, keyId) as SandboxMessageRow | undefined;
  }

  /** The recipients' copies of a message sent by `originId`. */
  copies(keyId: string, originId: number): SandboxMessageRow[] {
    return this.#s.copies.all(keyId, originId) as SandboxMessageRow[];
  }

  /** Replaces the node of a message in the sender's copy and every recipient's. */
  setNode(keyId: string, senderId: number, node: string): void {
    this.#s.setNode.run(node, keyId, senderId, senderId);
  }

  deleteMessage(sessionId: number, keyId: string): void {
    this.#s.deleteMessage.run(sessionId, keyId);
  }

  /** Marks a received copy read; false when it already was. */
  markRead(sessionId: number, keyId: string, now: string): boolean {
    return this.#s.markRead.run(now, sessionId, keyId).changes > 0;
  }

  // Contacts

  contacts(sessionId: number): ContactRow[] {
    return this.#s.contacts.all(sessionId) as ContactRow[];
  }

  contact(sessionId: number, jid: string): ContactRow | undefined {
    return this.#s.contact.get(sessionId, jid) as ContactRow | undefined;
  }

  /** Creates or changes a contact; a null field keeps what is stored. */
  upsertContact(sessionId: number, jid: string, fields: { name?: string | null; notify?: string | null; blocked?: boolean | null }, now: string): void {
    const blocked = fields.blocked === undefined || fields.blocked === null ? null : fields.blocked ? 1 : 0;
    this.#s.upsertContact.run({ session_id: sessionId, jid, name: fields.name ?? null, notify: fields.notify ?? null, blocked, now });
  }

  // Groups

  group(jid: string, orgId: string): GroupRow | undefined {
    return this.#s.group.get(jid, orgId) as GroupRow | undefined;
  }

  groupByCode(code: string, orgId: string): GroupRow | undefined {
    return this.#s.groupByCode.get(code, orgId) as GroupRow | undefined;
  }

  /** The groups of an organization a number is a member of, oldest first. */
  groupsOf(orgId: string, memberJid: string): GroupRow[] {
    return this.#s.groupsOf.all(orgId, memberJid) as GroupRow[];
  }

  insertGroup(input: { jid: string; orgId: string; subject: string; ownerJid: string; inviteCode: string }, now: string): void {
    this.#s.insertGroup.run(input.jid, input.orgId, input.subject, input.ownerJid, input.inviteCode, now);
  }

  /** Changes the given settings of a group; undefined ones stay. */
  updateGroup(jid: string, settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean }): void {
    const flag = (v: boolean | undefined) => (v === undefined ? null : v ? 1 : 0);
    this.#s.updateGroup.run({
      jid,
      subject: settings.subject ?? null,
      description: settings.description ?? null,
      announce: flag(settings.announce),
      restrict: flag(settings.restrict),
    });
  }

  deleteGroup(jid: string): void {
    this.#s.deleteGroup.run(jid);
  }

  members(groupJid: string): { jid: string; admin: MemberRole }[] {
    return this.#s.members.all(groupJid) as { jid: string; admin: MemberRole }[];
  }

  member(groupJid: string, jid: string): { admin: MemberRole } | undefined {
    return this.#s.member.get(groupJid, jid) as { admin: MemberRole } | undefined;
  }

  addMember(groupJid: string, jid: string, admin: MemberRole): void {
    this.#s.addMember.run(groupJid, jid, admin);
  }

  removeMember(groupJid: string, jid: string): void {
    this.#s.removeMember.run(groupJid, jid);
  }

  setAdmin(groupJid: string, jid: string, admin: MemberRole): void {
    this.#s.setAdmin.run(admin, groupJid, jid);
  }

  // Media

  insertMedia(input: { id: string; orgId: string; kind: SandboxMediaKind; mimetype: string; fileName: string | null; bytes: Buffer }, now: string): void {
    this.#s.insertMedia.run(input.id, input.orgId, input.kind, input.mimetype, input.fileName, input.bytes, now);
  }

  media(id: string, orgId: string, kind: SandboxMediaKind): MediaRow | undefined {
    return this.#s.media.get(id, orgId, kind) as MediaRow | undefined;
  }
}
