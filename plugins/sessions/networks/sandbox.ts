/**
 * The sandbox network: an in-process, deterministic stand-in for WhatsApp, one per organization.
 *
 * - Sandbox sessions are always connected.
 * - A send to another sandbox session's number (or to a sandbox group it belongs to) arrives
 *   there as an inbound message, synchronously, with the sender's key in LID form and the phone
 *   JID beside it, as the real network does; receipts move sent -> delivered (on arrival) -> read
 *   (when the recipient reads it, or at once when it has read_incoming_messages on).
 * - Sends to numbers that are not sandbox sessions are accepted and stay `sent`. Two reserved
 *   country codes simulate failures: `+998...` answers 503 (network briefly unavailable, nothing
 *   sent) and `+999...` is unreachable (the message is logged as failed, and can be resent).
 * - Contacts, groups and media live in SQLite (`sessions_sandbox_*`); media is encrypted as
 *   WhatsApp encrypts it, so received media nodes decrypt like real ones.
 */
import { createHash, randomInt } from 'node:crypto';
import type { Database } from '../../../core/db.ts';
import { WharfError } from '../../../core/errors.ts';
import { randomToken } from '../../../core/tokens.ts';
import type { SessionRecord } from '../types.ts';
import { decryptMedia, encryptMedia } from './media-crypto.ts';
import { digitsOf, lidJid, MEDIA_FIELD, mediaOf, messageNode, newMessageId, normalizePhone, participantJid, phoneJid, recipientOf } from './nodes.ts';
import type {
  ChatKind,
  ConnectResult,
  Contact,
  GroupMetadata,
  MediaType,
  MessageKey,
  MessageNode,
  NetworkAdapter,
  NetworkHost,
  OutgoingMessage,
  ParticipantResult,
  PresenceType,
  StoredMedia,
} from './types.ts';

interface MessageRow {
  session_id: number;
  key_id: string;
  from_me: number;
  chat: ChatKind;
  remote_key: string;
  message: string;
  origin_session_id: number | null;
  read_at: string | null;
}

interface GroupRow {
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

interface ContactRow {
  jid: string;
  name: string | null;
  notify: string | null;
  blocked: number;
}

/** What `POST /api/sandbox/receive` asks for. */
export interface SandboxInbound {
  /** Sender's phone number, E.164. */
  from: string;
  text: string;
  pushName?: string;
  chat: 'personal' | 'group' | 'newsletter';
  groupJid?: string;
}

const CDN_PATH = /\/sandbox-cdn\/([A-Za-z0-9_-]{10,64})\.enc$/;
const now = () => new Date().toISOString();
const seconds = () => Math.floor(Date.now() / 1000);

/** Twelve digits derived from a seed: stable JIDs for virtual groups and newsletters. */
function stableDigits(seed: string, length: number): string {
  const hash = createHash('sha256').update(seed).digest();
  return (BigInt(`0x${hash.subarray(0, 8).toString('hex')}`) % 10n ** BigInt(length)).toString().padStart(length, '0');
}

export class SandboxNetwork implements NetworkAdapter {
  readonly name = 'sandbox';
  readonly #host: NetworkHost;
  readonly #publicUrl: string;
  readonly #s;

  constructor(db: Database, host: NetworkHost, options: { publicUrl: string }) {
    this.#host = host;
    this.#publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.#s = {
      lidByPn: db.prepare('SELECT lid FROM sessions_sandbox_lids WHERE pn = ?').pluck(),
      pnByLid: db.prepare('SELECT pn FROM sessions_sandbox_lids WHERE lid = ?').pluck(),
      insertLid: db.prepare('INSERT OR IGNORE INTO sessions_sandbox_lids (pn, lid) VALUES (?, ?)'),
      sessionByPhone: db.prepare("SELECT id FROM sessions_sessions WHERE org_id = ? AND phone_number = ? AND type = 'sandbox'").pluck(),

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

  /** The LID of a phone number (digits): stable, minted on first sight. */
  lidOf(digits: string): string {
    const known = this.#s.lidByPn.get(digits) as string | undefined;
    if (known) return known;
    for (let i = 0; ; i++) {
      const lid = `1${stableDigits(`wharf-sandbox-lid:${digits}:${i}`, 14)}`;
      if (!this.#s.pnByLid.get(lid)) {
        this.#s.insertLid.run(digits, lid);
        return lid;
      }
    }
  }

  /** Phone digits of a phone number, a phone JID or a known LID JID; null otherwise. */
  #digitsOfJid(value: string): string | null {
    const trimmed = value.trim();
    const lid = /^(\d{6,20})@lid$/.exec(trimmed);
    if (lid) return (this.#s.pnByLid.get(lid[1]) as string | undefined) ?? null;
    const jid = participantJid(trimmed);
    return jid ? digitsOf(jid) : null;
  }

  #sessionByDigits(orgId: string, digits: string): SessionRecord | undefined {
    const id = this.#s.sessionByPhone.get(orgId, `+${digits}`) as number | undefined;
    return id === undefined ? undefined : this.#host.session(id);
  }

  #selfJid(session: SessionRecord): string {
    return phoneJid(digitsOf(session.phoneNumber));
  }

  // Connection

  async connect(session: SessionRecord): Promise<ConnectResult> {
    this.#host.setStatus(session.id, 'connected');
    return { status: 'connected', message: 'Sandbox sessions are always connected' };
  }

  async disconnect(_session: SessionRecord): Promise<ConnectResult> {
    return { status: 'connected', message: 'Sandbox sessions are always connected; disconnect does nothing' };
  }

  async restart(session: SessionRecord): Promise<ConnectResult> {
    this.#host.transaction(() => {
      this.#host.setStatus(session.id, 'connecting', 'restart');
      this.#host.setStatus(session.id, 'connected', 'restart');
    });
    return { status: 'connected', message: 'Sandbox session restarted' };
  }

  async qrCode(_session: SessionRecord): Promise<string> {
    throw new WharfError('conflict', 'A sandbox session is always connected and needs no QR code');
  }

  async user(session: SessionRecord) {
    const digits = digitsOf(session.phoneNumber);
    return { id: phoneJid(digits), lid: lidJid(this.lidOf(digits)), name: session.name, phone_number: session.phoneNumber };
  }

  async forget(_session: SessionRecord): Promise<void> {
    // Messages and contacts go with the session row (ON DELETE CASCADE); group memberships belong to the number.
  }

  async close(): Promise<void> {}

  // Messages

  async send(session: SessionRecord, out: OutgoingMessage): Promise<void> {
    const target = recipientOf(out.jid);
    if (!target) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { to: [`to is not a phone number or JID: ${out.jid}`] } });
    const targetDigits = target.chat === 'personal' ? this.#digitsOfJid(out.jid) : null;
    if (targetDigits?.startsWith('998')) {
      throw new WharfError('unavailable', 'The sandbox network is briefly unavailable (+998 numbers simulate an outage); nothing was sent', { retryAfter: 1 });
    }
    // A group the sandbox knows takes messages from its members only (from admins only when announce is on);
    // a group it does not know is a virtual one (as POST /api/sandbox/receive makes), which takes anything.
    if (target.chat === 'group' && this.#s.group.get(target.jid, session.orgId)) {
      const { group, admin } = this.#memberGroup(session, target.jid);
      if (group.announce === 1 && !admin) {
        throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { to: ['only admins can send to this group (announce is on)'] } });
      }
    }
    this.#host.transaction(() => {
      if (targetDigits?.startsWith('999')) {
        this.#host.failed(session.id, out.msgId, 'Recipient unreachable (+999 numbers are unreachable on the sandbox network)');
        return;
      }
      const media = out.content.type in MEDIA_FIELD && 'url' in out.content ? this.#mediaFields(session.orgId, out.content.url, out.content.type as MediaType) : undefined;
      const node = messageNode(out.content, { mentions: out.mentions, quoted: out.quoted, media });
      const ts = seconds();
      const key: MessageKey = { id: out.id, remoteJid: target.jid, fromMe: true };
      this.#s.insertMessage.run(session.id, out.id, 1, target.chat, JSON.stringify(key), JSON.stringify(node), null, now());
      this.#host.sent(session.id, out.msgId, key, node, ts);
      if (target.chat === 'personal' && targetDigits) {
        const recipient = this.#sessionByDigits(session.orgId, targetDigits);
        if (recipient && recipient.id !== session.id) this.#deliver(session, recipient, key, node, ts, 'personal');
      } else if (target.chat === 'group') {
        const group = this.#s.group.get(target.jid, session.orgId) as GroupRow | undefined;
        if (group) {
          for (const member of this.#memberSessions(group, session.id)) this.#deliver(session, member, key, node, ts, 'group');
        }
      }
    });
  }

  /** An uploaded file named by the URL's last path segment: encrypted onto the sandbox CDN, its node fields returned. */
  #mediaFields(orgId: string, url: string, type: MediaType): Record<string, unknown> | undefined {
    let segment: string;
    try {
      segment = new URL(url).pathname.split('/').pop()?.replace(/\.[A-Za-z0-9]+$/, '') ?? '';
    } catch {
      return undefined;
    }
    const upload = this.#s.media.get(segment, orgId, 'upload') as { mimetype: string; file_name: string | null; bytes: Buffer } | undefined;
    if (!upload) return undefined;
    const enc = encryptMedia(upload.bytes, type);
    const cdnId = randomToken(18);
    this.#s.insertMedia.run(cdnId, orgId, 'cdn', upload.mimetype, upload.file_name, enc.file, now());
    const directPath = `/sandbox-cdn/${cdnId}.enc`;
    return {
      url: `${this.#publicUrl}${directPath}`,
      directPath,
      mimetype: type === 'sticker' ? 'image/webp' : upload.mimetype,
      mediaKey: enc.mediaKey.toString('base64'),
      fileSha256: enc.fileSha256.toString('base64'),
      fileEncSha256: enc.fileEncSha256.toString('base64'),
      fileLength: upload.bytes.length,
      mediaKeyTimestamp: seconds(),
      ...(type === 'document' && upload.file_name ? { fileName: upload.file_name } : {}),
    };
  }

  #memberSessions(group: GroupRow, exceptId: number): SessionRecord[] {
    const out: SessionRecord[] = [];
    for (const m of this.#s.members.all(group.jid) as { jid: string }[]) {
      const s = this.#sessionByDigits(group.org_id, digitsOf(m.jid));
      if (s && s.id !== exceptId) out.push(s);
    }
    return out;
  }

  /** The key of a message from `senderDigits` as a recipient sees it. */
  #inboundKey(id: string, senderDigits: string, chat: ChatKind, chatJid: string | null): MessageKey {
    const lid = lidJid(this.lidOf(senderDigits));
    const pn = phoneJid(senderDigits);
    if (chat === 'group') return { id, remoteJid: chatJid!, fromMe: false, participant: lid, participantAlt: pn, participantLid: lid, participantPn: pn };
    if (chat === 'newsletter') return { id, remoteJid: chatJid!, fromMe: false };
    return { id, remoteJid: lid, remoteJidAlt: pn, fromMe: false, senderLid: lid, senderPn: pn, cleanSenderPn: senderDigits };
  }

  #deliver(sender: SessionRecord, recipient: SessionRecord, senderKey: MessageKey, node: MessageNode, ts: number, chat: 'personal' | 'group'): void {
    const senderDigits = digitsOf(sender.phoneNumber);
    const blocked = this.#s.contact.get(recipient.id, phoneJid(senderDigits)) as ContactRow | undefined;
    if (blocked?.blocked) return;
    const key = this.#inboundKey(senderKey.id, senderDigits, chat, chat === 'group' ? senderKey.remoteJid : null);
    this.#s.insertMessage.run(recipient.id, key.id, 0, chat, JSON.stringify(key), JSON.stringify(node), sender.id, now());
    this.#sawContact(recipient, senderDigits, sender.name);
    const accepted = this.#host.inbound(recipient.id, { key, message: node, pushName: sender.name, messageTimestamp: ts, chat });
    const recipientJid = this.#selfJid(recipient);
    this.#host.receipt(sender.id, senderKey, 'delivered', recipientJid);
    if (accepted && recipient.readIncomingMessages) {
      this.#s.markRead.run(now(), recipient.id, key.id);
      this.#host.receipt(sender.id, senderKey, 'read', recipientJid);
    }
  }

  /** Adds a sender to a recipient's contacts on first sight (contacts.upsert), or refreshes its push name (contacts.update). */
  #sawContact(session: SessionRecord, digits: string, notify: string | null): void {
    const jid = phoneJid(digits);
    const existing = this.#s.contact.get(session.id, jid) as ContactRow | undefined;
    if (existing && (existing.notify === notify || notify === null)) return;
    this.#s.upsertContact.run({ session_id: session.id, jid, name: null, notify, blocked: null, now: now() });
    const entry = { id: jid, lid: lidJid(this.lidOf(digits)), phoneNumber: jid, notify };
    this.#host.emit(session.id, existing ? 'contacts.update' : 'contacts.upsert', [entry]);
  }

  /** `POST /api/sandbox/receive`: an inbound text from a number outside the sandbox. Returns the key the session sees. */
  receive(session: SessionRecord, input: SandboxInbound): MessageKey {
    const phone = normalizePhone(input.from);
    if (!phone) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { from: ['from must be a phone number in E.164 format'] } });
    const digits = digitsOf(phone);
    const chatJid =
      input.chat === 'group'
        ? (input.groupJid ?? `120363${stableDigits(`wharf-sandbox-group:${digits}`, 12)}@g.us`)
        : input.chat === 'newsletter'
          ? `120363${stableDigits(`wharf-sandbox-newsletter:${digits}`, 12)}@newsletter`
          : null;
    const id = newMessageId();
    const key = this.#inboundKey(id, digits, input.chat, chatJid);
    const node: MessageNode = { conversation: input.text };
    const pushName = input.pushName ?? (input.chat === 'newsletter' ? null : phone);
    this.#host.transaction(() => {
      this.#s.insertMessage.run(session.id, id, 0, input.chat, JSON.stringify(key), JSON.stringify(node), null, now());
      if (input.chat !== 'newsletter') this.#sawContact(session, digits, pushName);
      const accepted = this.#host.inbound(session.id, { key, message: node, pushName, messageTimestamp: seconds(), chat: input.chat });
      if (accepted && session.readIncomingMessages) this.#s.markRead.run(now(), session.id, id);
    });
    return key;
  }

  #row(session: SessionRecord, id: string): MessageRow {
    const row = this.#s.message.get(session.id, id) as MessageRow | undefined;
    if (!row) throw new WharfError('not_found', 'Message not found');
    return row;
  }

  async findMessage(session: SessionRecord, id: string) {
    const row = this.#s.message.get(session.id, id) as MessageRow | undefined;
    return row ? { key: JSON.parse(row.remote_key) as MessageKey, message: JSON.parse(row.message) as MessageNode } : null;
  }

  async readMessages(session: SessionRecord, keys: MessageKey[]): Promise<void> {
    this.#host.transaction(() => {
      for (const key of keys) {
        const row = this.#row(session, key.id);
        if (row.from_me) continue;
        if (this.#s.markRead.run(now(), session.id, key.id).changes === 0) continue;
        const origin = row.origin_session_id === null ? undefined : (this.#s.message.get(row.origin_session_id, key.id) as MessageRow | undefined);
        if (origin) this.#host.receipt(origin.session_id, JSON.parse(origin.remote_key) as MessageKey, 'read', this.#selfJid(session));
      }
    });
  }

  /** Every copy of a message on the network: the sender's and each recipient's. */
  #copies(row: MessageRow): MessageRow[] {
    const originId = row.from_me ? row.session_id : row.origin_session_id;
    if (originId === null) return [row];
    const origin = this.#s.message.get(originId, row.key_id) as MessageRow | undefined;
    return [...(origin ? [origin] : []), ...(this.#s.copies.all(row.key_id, originId) as MessageRow[])];
  }

  async react(session: SessionRecord, key: MessageKey, emoji: string): Promise<MessageKey> {
    const row = this.#row(session, key.id);
    const reactionKey: MessageKey = { id: newMessageId(), remoteJid: (JSON.parse(row.remote_key) as MessageKey).remoteJid, fromMe: true };
    const digits = digitsOf(session.phoneNumber);
    this.#host.transaction(() => {
      for (const copy of this.#copies(row)) {
        const mine = copy.session_id === session.id;
        const seenKey = mine ? reactionKey : this.#inboundKey(reactionKey.id, digits, copy.chat === 'group' ? 'group' : 'personal', copy.chat === 'group' ? (JSON.parse(copy.remote_key) as MessageKey).remoteJid : null);
        this.#host.emit(copy.session_id, 'messages.reaction', [
          { key: JSON.parse(copy.remote_key), reaction: { text: emoji, key: seenKey, senderTimestampMs: String(Date.now()) } },
        ]);
      }
    });
    return reactionKey;
  }

  async editMessage(session: SessionRecord, key: MessageKey, text: string): Promise<MessageNode> {
    const row = this.#row(session, key.id);
    if (!row.from_me) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { msgId: ['only messages this session sent can be edited'] } });
    const old = JSON.parse(row.message) as MessageNode;
    const ext = old.extendedTextMessage as { contextInfo?: unknown } | undefined;
    if (typeof old.conversation !== 'string' && !ext) {
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { msgId: ['only text messages can be edited'] } });
    }
    const node: MessageNode = ext ? { extendedTextMessage: { ...ext, text } } : { conversation: text };
    this.#host.transaction(() => {
      this.#s.setNode.run(JSON.stringify(node), key.id, session.id, session.id);
      for (const copy of this.#copies(row)) {
        this.#host.emit(copy.session_id, 'messages.update', [
          { key: JSON.parse(copy.remote_key), update: { message: { editedMessage: { message: node } } } },
        ]);
      }
    });
    return node;
  }

  async deleteMessage(session: SessionRecord, key: MessageKey): Promise<void> {
    const row = this.#row(session, key.id);
    this.#host.transaction(() => {
      // Own messages are deleted for everyone; received ones only for this session.
      const copies = row.from_me ? this.#copies(row) : [row];
      for (const copy of copies) {
        this.#s.deleteMessage.run(copy.session_id, copy.key_id);
        this.#host.emit(copy.session_id, 'messages.delete', { keys: [JSON.parse(copy.remote_key)] });
      }
    });
  }

  async sendPresence(_session: SessionRecord, jid: string, _type: PresenceType, _delayMs?: number): Promise<void> {
    if (!recipientOf(jid)) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { jid: ['jid is not a phone number or JID'] } });
  }

  // Contacts and lookups

  #contact(session: SessionRecord, row: ContactRow): Contact {
    const digits = digitsOf(row.jid);
    return { id: row.jid, lid: lidJid(this.lidOf(digits)), name: row.name, notify: row.notify, imgUrl: null, status: null, blocked: row.blocked === 1 };
  }

  #contactJid(value: string): string {
    const digits = this.#digitsOfJid(value);
    if (!digits) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { jid: ['jid must be a phone number (E.164), a phone JID or a known LID'] } });
    return phoneJid(digits);
  }

  async contacts(session: SessionRecord): Promise<Contact[]> {
    return (this.#s.contacts.all(session.id) as ContactRow[]).map((r) => this.#contact(session, r));
  }

  async contact(session: SessionRecord, jid: string): Promise<Contact | null> {
    const row = this.#s.contact.get(session.id, this.#contactJid(jid)) as ContactRow | undefined;
    return row ? this.#contact(session, row) : null;
  }

  async upsertContact(session: SessionRecord, input: { jid: string; fullName: string }): Promise<Contact> {
    const jid = this.#contactJid(input.jid);
    return this.#host.transaction(() => {
      const existed = this.#s.contact.get(session.id, jid) !== undefined;
      this.#s.upsertContact.run({ session_id: session.id, jid, name: input.fullName, notify: null, blocked: null, now: now() });
      const contact = this.#contact(session, this.#s.contact.get(session.id, jid) as ContactRow);
      this.#host.emit(session.id, existed ? 'contacts.update' : 'contacts.upsert', [{ id: jid, lid: contact.lid, phoneNumber: jid, name: input.fullName }]);
      return contact;
    });
  }

  async setBlocked(session: SessionRecord, jid: string, blocked: boolean): Promise<void> {
    const contactJid = this.#contactJid(jid);
    this.#s.upsertContact.run({ session_id: session.id, jid: contactJid, name: null, notify: null, blocked: blocked ? 1 : 0, now: now() });
  }

  async profilePicture(_session: SessionRecord, jid: string): Promise<string | null> {
    this.#contactJid(jid);
    return null;
  }

  async onWhatsApp(_session: SessionRecord, phone: string) {
    const normalized = normalizePhone(phone);
    if (!normalized) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { phone: ['phone must be in E.164 format'] } });
    const digits = digitsOf(normalized);
    // Every well-formed number exists on the sandbox network; only sandbox sessions answer.
    return { exists: true, jid: phoneJid(digits), lid: lidJid(this.lidOf(digits)) };
  }

  async lidFromPn(_session: SessionRecord, pn: string): Promise<string | null> {
    const digits = this.#digitsOfJid(pn);
    return digits ? lidJid(this.lidOf(digits)) : null;
  }

  async pnFromLid(_session: SessionRecord, lid: string): Promise<string | null> {
    const match = /^(\d{6,20})(?:@lid)?$/.exec(lid.trim());
    const pn = match ? (this.#s.pnByLid.get(match[1]) as string | undefined) : undefined;
    return pn ? phoneJid(pn) : null;
  }

  // Groups

  #metadata(group: GroupRow): GroupMetadata {
    const members = this.#s.members.all(group.jid) as { jid: string; admin: 'admin' | 'superadmin' | null }[];
    return {
      id: group.jid,
      subject: group.subject,
      desc: group.description,
      owner: group.owner_jid,
      creation: Math.floor(Date.parse(group.created_at) / 1000),
      announce: group.announce === 1,
      restrict: group.restrict_info === 1,
      size: members.length,
      participants: members.map((m) => ({ id: m.jid, lid: lidJid(this.lidOf(digitsOf(m.jid))), admin: m.admin })),
    };
  }

  /** The group, when this session is a member of it; 404 otherwise (existing or not). */
  #memberGroup(session: SessionRecord, jid: string): { group: GroupRow; admin: boolean } {
    const group = this.#s.group.get(jid, session.orgId) as GroupRow | undefined;
    const member = group && (this.#s.member.get(group.jid, this.#selfJid(session)) as { admin: string | null } | undefined);
    if (!group || !member) throw new WharfError('not_found', 'Group not found');
    return { group, admin: member.admin !== null };
  }

  /** Emits an event to every sandbox session that is a member of the group (and to `also`). */
  #toMembers(group: GroupRow, event: 'groups.upsert' | 'groups.update' | 'group-participants.update', data: unknown, also: SessionRecord[] = []): void {
    const targets = new Map<number, SessionRecord>();
    for (const s of [...this.#memberSessions(group, -1), ...also]) targets.set(s.id, s);
    for (const s of targets.values()) this.#host.emit(s.id, event, data);
  }

  #participants(list: string[]): string[] {
    const jids = list.map((p) => participantJid(p));
    const bad = list.filter((_, i) => !jids[i]);
    if (bad.length) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { participants: bad.map((b) => `${b} is not a phone number or phone JID`) } });
    return [...new Set(jids as string[])];
  }

  async groups(session: SessionRecord): Promise<GroupMetadata[]> {
    return (this.#s.groupsOf.all(session.orgId, this.#selfJid(session)) as GroupRow[]).map((g) => this.#metadata(g));
  }

  async createGroup(session: SessionRecord, subject: string, participants: string[]): Promise<GroupMetadata> {
    const members = this.#participants(participants);
    return this.#host.transaction(() => {
      let jid: string;
      do jid = `120363${String(randomInt(0, 1e12)).padStart(12, '0')}@g.us`;
      while (this.#s.group.get(jid, session.orgId));
      const self = this.#selfJid(session);
      this.#s.insertGroup.run(jid, session.orgId, subject, self, randomToken(16), now());
      this.#s.addMember.run(jid, self, 'superadmin');
      for (const m of members) if (m !== self) this.#s.addMember.run(jid, m, null);
      const group = this.#s.group.get(jid, session.orgId) as GroupRow;
      const metadata = this.#metadata(group);
      this.#toMembers(group, 'groups.upsert', [metadata]);
      return metadata;
    });
  }

  async groupMetadata(session: SessionRecord, jid: string): Promise<GroupMetadata> {
    return this.#metadata(this.#memberGroup(session, jid).group);
  }

  async updateParticipants(session: SessionRecord, jid: string, action: 'add' | 'remove' | 'promote' | 'demote', participants: string[]): Promise<ParticipantResult[]> {
    const { group, admin } = this.#memberGroup(session, jid);
    const list = this.#participants(participants);
    if (!admin) return list.map((id) => ({ id, status: 403, message: 'not-authorized' }));
    return this.#host.transaction(() => {
      const results: ParticipantResult[] = [];
      const changed: string[] = [];
      const removed: SessionRecord[] = [];
      for (const id of list) {
        const member = this.#s.member.get(group.jid, id) as { admin: string | null } | undefined;
        if (action === 'add') {
          if (member) results.push({ id, status: 409, message: 'already a participant' });
          else {
            this.#s.addMember.run(group.jid, id, null);
            results.push({ id, status: 200, message: 'added' });
            changed.push(id);
          }
        } else if (!member) {
          results.push({ id, status: 404, message: 'not a participant' });
        } else if (action === 'remove') {
          this.#s.removeMember.run(group.jid, id);
          const s = this.#sessionByDigits(session.orgId, digitsOf(id));
          if (s) removed.push(s);
          results.push({ id, status: 200, message: 'removed' });
          changed.push(id);
        } else {
          this.#s.setAdmin.run(action === 'promote' ? 'admin' : null, group.jid, id);
          results.push({ id, status: 200, message: action === 'promote' ? 'promoted' : 'demoted' });
          changed.push(id);
        }
      }
      if (changed.length) this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: changed, action }, removed);
      return results;
    });
  }

  async updateGroupSettings(session: SessionRecord, jid: string, settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean }): Promise<GroupMetadata> {
    const { group, admin } = this.#memberGroup(session, jid);
    if (!admin && (group.restrict_info === 1 || settings.announce !== undefined || settings.restrict !== undefined)) {
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { settings: ['only group admins can change these settings'] } });
    }
    return this.#host.transaction(() => {
      this.#s.updateGroup.run({
        jid: group.jid,
        subject: settings.subject ?? null,
        description: settings.description ?? null,
        announce: settings.announce === undefined ? null : settings.announce ? 1 : 0,
        restrict: settings.restrict === undefined ? null : settings.restrict ? 1 : 0,
      });
      const updated = this.#s.group.get(group.jid, session.orgId) as GroupRow;
      this.#toMembers(updated, 'groups.update', [{ id: group.jid, ...settings }]);
      return this.#metadata(updated);
    });
  }

  async leaveGroup(session: SessionRecord, jid: string): Promise<void> {
    const { group } = this.#memberGroup(session, jid);
    this.#host.transaction(() => {
      const self = this.#selfJid(session);
      this.#s.removeMember.run(group.jid, self);
      this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: [self], action: 'remove' }, [session]);
      if ((this.#s.members.all(group.jid) as unknown[]).length === 0) this.#s.deleteGroup.run(group.jid);
    });
  }

  async groupInviteCode(session: SessionRecord, jid: string): Promise<string> {
    const { group, admin } = this.#memberGroup(session, jid);
    if (!admin) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { groupJid: ['only group admins can read the invite link'] } });
    return group.invite_code;
  }

  async groupInviteInfo(session: SessionRecord, code: string): Promise<GroupMetadata> {
    const group = this.#s.groupByCode.get(code, session.orgId) as GroupRow | undefined;
    if (!group) throw new WharfError('not_found', 'Invite not found');
    return this.#metadata(group);
  }

  async acceptGroupInvite(session: SessionRecord, code: string): Promise<string> {
    const group = this.#s.groupByCode.get(code, session.orgId) as GroupRow | undefined;
    if (!group) throw new WharfError('not_found', 'Invite not found');
    const self = this.#selfJid(session);
    this.#host.transaction(() => {
      if (this.#s.member.get(group.jid, self)) return;
      this.#s.addMember.run(group.jid, self, null);
      this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: [self], action: 'add' });
    });
    return group.jid;
  }

  async groupPicture(session: SessionRecord, jid: string): Promise<string | null> {
    this.#memberGroup(session, jid);
    return null;
  }

  // Media

  async uploadMedia(session: SessionRecord, media: { bytes: Buffer; mimetype: string; fileName?: string }): Promise<{ id: string }> {
    const id = randomToken(18);
    this.#s.insertMedia.run(id, session.orgId, 'upload', media.mimetype, media.fileName ?? null, media.bytes, now());
    return { id };
  }

  async uploadedMedia(session: SessionRecord, id: string): Promise<StoredMedia | null> {
    const row = this.#s.media.get(id, session.orgId, 'upload') as { mimetype: string; file_name: string | null; bytes: Buffer } | undefined;
    return row ? { bytes: row.bytes, mimetype: row.mimetype, fileName: row.file_name } : null;
  }

  async decryptMedia(session: SessionRecord, message: MessageNode): Promise<StoredMedia> {
    const found = mediaOf(message);
    if (!found) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { message: ['the message has no image, video, audio, document or sticker'] } });
    const { type, media } = found;
    const where = String(media.directPath ?? media.url ?? '');
    const cdnId = CDN_PATH.exec(where.split('?')[0] ?? '')?.[1];
    const row = cdnId ? (this.#s.media.get(cdnId, session.orgId, 'cdn') as { mimetype: string; file_name: string | null; bytes: Buffer } | undefined) : undefined;
    if (!row) throw new WharfError('not_found', 'Media not found on the sandbox network (only media sent as an uploaded file carries bytes)');
    const key = typeof media.mediaKey === 'string' ? Buffer.from(media.mediaKey, 'base64') : Buffer.alloc(0);
    const plain = decryptMedia(row.bytes, key, type);
    if (!plain) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { mediaKey: ['mediaKey does not decrypt this media'] } });
    return { bytes: plain, mimetype: String(media.mimetype ?? row.mimetype), fileName: typeof media.fileName === 'string' ? media.fileName : row.file_name };
  }
}

