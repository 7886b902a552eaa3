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
 * - Contacts, groups and media live in SQLite (`sessions_sandbox_*`, see `sandbox-store.ts`);
 *   media is encrypted as WhatsApp encrypts it, so received media nodes decrypt like real ones.
 *
 * Capabilities: no pairing (sessions are connected from creation), and `receive`: the network
 * can be told to deliver an inbound text (`POST /api/sandbox/receive`).
 */
import { createHash, randomInt } from 'node:crypto';
import { WharfError } from '../../../core/errors.ts';
import type { ScopedDb } from '../scoped-db.ts';
import { randomToken } from '../../../core/tokens.ts';
import { decryptMedia, encryptMedia } from './media-crypto.ts';
import { type ContactRow, type GroupRow, SandboxStore, type SandboxMessageRow as MessageRow } from './sandbox-store.ts';
import {
  digitsOf,
  lidJid,
  MEDIA_FIELD,
  mediaOf,
  messageNode,
  newMessageId,
  normalizePhone,
  participantJid,
  participantJids,
  phoneJid,
  recipientOf,
} from './nodes.ts';
import type {
  ChatKind,
  ConnectRequest,
  ConnectResult,
  Contact,
  GroupMetadata,
  MediaType,
  MessageKey,
  MessageNode,
  NetworkAdapter,
  NetworkCapabilities,
  NetworkHost,
  NetworkSession,
  OutgoingMessage,
  ParticipantResult,
  PresenceType,
  SimulatedInbound,
  StoredMedia,
} from './types.ts';

const CDN_PATH = /\/sandbox-cdn\/([A-Za-z0-9_-]{10,64})\.enc$/;
const now = () => new Date().toISOString();
const seconds = () => Math.floor(Date.now() / 1000);

/** Twelve digits derived from a seed: stable JIDs for virtual groups and newsletters. */
function stableDigits(seed: string, length: number): string {
  const hash = createHash('sha256').update(seed).digest();
  return (BigInt(`0x${hash.subarray(0, 8).toString('hex')}`) % 10n ** BigInt(length)).toString().padStart(length, '0');
}

/** A sender's contact that a message with push name `notify` leaves as it is: there, and that name (or none given). */
const contactUnchanged = (contact: ContactRow | undefined, notify: string | null) => contact !== undefined && (contact.notify === notify || notify === null);

export class SandboxNetwork implements NetworkAdapter {
  readonly name = 'sandbox';
  readonly capabilities: NetworkCapabilities = { pairing: [], receive: true };
  readonly #host: NetworkHost;
  readonly #publicUrl: string;
  readonly #store: SandboxStore;

  constructor(db: ScopedDb, host: NetworkHost, options: { publicUrl: string }) {
    this.#host = host;
    this.#publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.#store = new SandboxStore(db);
  }

  // Identities

  /** The LID of a phone number (digits): stable, minted on first sight. */
  async #lidOf(digits: string): Promise<string> {
    const known = await this.#store.lidByPn(digits);
    if (known) return known;
    for (let i = 0; ; i++) {
      const lid = `1${stableDigits(`wharf-sandbox-lid:${digits}:${i}`, 14)}`;
      if (!(await this.#store.pnByLid(lid))) {
        await this.#store.insertLid(digits, lid);
        return lid;
      }
    }
  }

  /** Phone digits of a phone number, a phone JID or a known LID JID; null otherwise. */
  async #digitsOfJid(value: string): Promise<string | null> {
    const trimmed = value.trim();
    const lid = /^(\d{6,20})@lid$/.exec(trimmed);
    if (lid) return (await this.#store.pnByLid(lid[1]!)) ?? null;
    const jid = participantJid(trimmed);
    return jid ? digitsOf(jid) : null;
  }

  async #sessionByDigits(orgId: string, digits: string): Promise<NetworkSession | undefined> {
    return this.#host.sessionByPhone(orgId, `+${digits}`);
  }

  #selfJid(session: NetworkSession): string {
    return phoneJid(digitsOf(session.phoneNumber));
  }

  // Connection

  async connect(session: NetworkSession, _request: ConnectRequest): Promise<ConnectResult> {
    await this.#host.setStatus(session.id, 'connected');
    return { status: 'connected', message: 'Sandbox sessions are always connected' };
  }

  async disconnect(_session: NetworkSession): Promise<ConnectResult> {
    return { status: 'connected', message: 'Sandbox sessions are always connected; disconnect does nothing' };
  }

  async restart(session: NetworkSession): Promise<ConnectResult> {
    await this.#host.transaction(async () => {
      await this.#host.setStatus(session.id, 'connecting', 'restart');
      await this.#host.setStatus(session.id, 'connected', 'restart');
    }, [session.id]);
    return { status: 'connected', message: 'Sandbox session restarted' };
  }

  async user(session: NetworkSession) {
    const digits = digitsOf(session.phoneNumber);
    return { id: phoneJid(digits), lid: lidJid(await this.#lidOf(digits)), name: session.name, phone_number: session.phoneNumber };
  }

  async forget(_session: NetworkSession): Promise<void> {
    // Messages and contacts go with the session row (ON DELETE CASCADE); group memberships belong to the number.
  }

  async close(): Promise<void> {}

  // Messages

  async send(session: NetworkSession, out: OutgoingMessage): Promise<void> {
    const target = recipientOf(out.jid);
    if (!target) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { to: [`to is not a phone number or JID: ${out.jid}`] } });
    const targetDigits = target.chat === 'personal' ? await this.#digitsOfJid(out.jid) : null;
    if (targetDigits?.startsWith('998')) {
      throw new WharfError('unavailable', 'The sandbox network is briefly unavailable (+998 numbers simulate an outage); nothing was sent', { retryAfter: 1 });
    }
    // A group the sandbox knows takes messages from its members only (from admins only when announce is on);
    // a group it does not know is a virtual one (as POST /api/sandbox/receive makes), which takes anything.
    if (target.chat === 'group' && (await this.#store.group(target.jid, session.orgId))) {
      const { group, admin } = await this.#memberGroup(session, target.jid);
      if (group.announce === 1 && !admin) {
        throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { to: ['only admins can send to this group (announce is on)'] } });
      }
    }
    // The sessions this send writes to, locked for its transaction: the sender's log and the
    // recipients' (a send A -> B and one B -> A queue rather than conflict). Read again inside.
    const recipients = target.chat === 'personal' && targetDigits ? [await this.#sessionByDigits(session.orgId, targetDigits)] : [];
    if (target.chat === 'group') {
      const group = await this.#store.group(target.jid, session.orgId);
      if (group) recipients.push(...(await this.#memberSessions(group, session.id)));
    }
    const writes = [session.id, ...recipients.flatMap((s) => (s ? [s.id] : []))];
    await this.#host.transaction(async () => {
      if (targetDigits?.startsWith('999')) {
        await this.#host.failed(session.id, out.msgId, 'Recipient unreachable (+999 numbers are unreachable on the sandbox network)');
        return;
      }
      const media =
        out.content.type in MEDIA_FIELD && 'url' in out.content
          ? await this.#mediaFields(session.orgId, out.content.url, out.content.type as MediaType)
          : undefined;
      const node = messageNode(out.content, { mentions: out.mentions, quoted: out.quoted, media });
      const ts = seconds();
      const key: MessageKey = { id: out.id, remoteJid: target.jid, fromMe: true };
      await this.#store.insertMessage(
        {
          session_id: session.id,
          key_id: out.id,
          from_me: 1,
          chat: target.chat,
          remote_key: JSON.stringify(key),
          message: JSON.stringify(node),
          origin_session_id: null,
        },
        now(),
      );
      await this.#host.sent(session.id, out.msgId, key, node, ts);
      if (target.chat === 'personal' && targetDigits) {
        const recipient = await this.#sessionByDigits(session.orgId, targetDigits);
        if (recipient && recipient.id !== session.id) await this.#deliver(session, recipient, key, node, ts, 'personal');
      } else if (target.chat === 'group') {
        const group = await this.#store.group(target.jid, session.orgId);
        if (group) {
          for (const member of await this.#memberSessions(group, session.id)) await this.#deliver(session, member, key, node, ts, 'group');
        }
      }
    }, writes);
  }

  /** An uploaded file named by the URL's last path segment: encrypted onto the sandbox CDN, its node fields returned. */
  async #mediaFields(orgId: string, url: string, type: MediaType): Promise<Record<string, unknown> | undefined> {
    let segment: string;
    try {
      segment =
        new URL(url).pathname
          .split('/')
          .pop()
          ?.replace(/\.[A-Za-z0-9]+$/, '') ?? '';
    } catch {
      return undefined;
    }
    const upload = await this.#store.media(segment, orgId, 'upload');
    if (!upload) return undefined;
    const enc = encryptMedia(upload.bytes, type);
    const cdnId = randomToken(18);
    await this.#store.insertMedia({ id: cdnId, orgId, kind: 'cdn', mimetype: upload.mimetype, fileName: upload.file_name, bytes: enc.file }, now());
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

  /** The sandbox sessions of these numbers (JIDs), by id. */
  async #sessionsOf(orgId: string, jids: readonly string[]): Promise<number[]> {
    const ids: number[] = [];
    for (const jid of jids) {
      const s = await this.#sessionByDigits(orgId, digitsOf(jid));
      if (s) ids.push(s.id);
    }
    return ids;
  }

  /** The sessions a change of a group writes events to: its members' and those of `also` (numbers joining or leaving). */
  async #groupWriters(group: GroupRow, also: readonly string[]): Promise<number[]> {
    return [...(await this.#memberSessions(group, -1)).map((s) => s.id), ...(await this.#sessionsOf(group.org_id, also))];
  }

  async #memberSessions(group: GroupRow, exceptId: number): Promise<NetworkSession[]> {
    const out: NetworkSession[] = [];
    for (const m of await this.#store.members(group.jid)) {
      const s = await this.#sessionByDigits(group.org_id, digitsOf(m.jid));
      if (s && s.id !== exceptId) out.push(s);
    }
    return out;
  }

  /** The key of a message from `senderDigits` as a recipient sees it. */
  async #inboundKey(id: string, senderDigits: string, chat: ChatKind, chatJid: string | null): Promise<MessageKey> {
    const lid = lidJid(await this.#lidOf(senderDigits));
    const pn = phoneJid(senderDigits);
    if (chat === 'group') return { id, remoteJid: chatJid!, fromMe: false, participant: lid, participantAlt: pn, participantLid: lid, participantPn: pn };
    if (chat === 'newsletter') return { id, remoteJid: chatJid!, fromMe: false };
    return { id, remoteJid: lid, remoteJidAlt: pn, fromMe: false, senderLid: lid, senderPn: pn, cleanedSenderPn: senderDigits };
  }

  async #deliver(
    sender: NetworkSession,
    recipient: NetworkSession,
    senderKey: MessageKey,
    node: MessageNode,
    ts: number,
    chat: 'personal' | 'group',
  ): Promise<void> {
    const senderDigits = digitsOf(sender.phoneNumber);
    const contact = await this.#store.contact(recipient.id, phoneJid(senderDigits));
    if (contact?.blocked) return;
    const key = await this.#inboundKey(senderKey.id, senderDigits, chat, chat === 'group' ? senderKey.remoteJid : null);
    await this.#store.insertMessage(
      {
        session_id: recipient.id,
        key_id: key.id,
        from_me: 0,
        chat,
        remote_key: JSON.stringify(key),
        message: JSON.stringify(node),
        origin_session_id: sender.id,
      },
      now(),
    );
    await this.#sawContact(recipient, senderDigits, sender.name, contact);
    const accepted = await this.#host.inbound(recipient.id, { key, message: node, pushName: sender.name, messageTimestamp: ts, chat });
    const recipientJid = this.#selfJid(recipient);
    await this.#host.receipt(sender.id, senderKey, 'delivered', recipientJid);
    if (accepted && recipient.readIncomingMessages) {
      await this.#store.markRead(recipient.id, key.id, now());
      await this.#host.receipt(sender.id, senderKey, 'read', recipientJid);
    }
  }

  /**
   * Adds a sender to a recipient's contacts on first sight (contacts.upsert), or refreshes its
   * push name (contacts.update). `existing`: the contact as read in this transaction (none: not one).
   */
  async #sawContact(session: NetworkSession, digits: string, notify: string | null, existing: ContactRow | undefined): Promise<void> {
    const jid = phoneJid(digits);
    if (contactUnchanged(existing, notify)) return;
    await this.#store.upsertContact(session.id, jid, { notify }, now());
    const entry = { id: jid, lid: lidJid(await this.#lidOf(digits)), phoneNumber: jid, notify };
    await this.#host.emit(session.id, existing ? 'contacts.update' : 'contacts.upsert', [entry]);
  }

  /** `POST /api/sandbox/receive`: an inbound text from a number outside the sandbox. Returns the key the session sees. */
  async receive(session: NetworkSession, input: SimulatedInbound): Promise<MessageKey> {
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
    const key = await this.#inboundKey(id, digits, input.chat, chatJid);
    const node: MessageNode = { conversation: input.text };
    const pushName = input.pushName ?? (input.chat === 'newsletter' ? null : phone);
    const senderJid = phoneJid(digits);
    const copy = {
      session_id: session.id,
      key_id: id,
      from_me: 0,
      chat: input.chat,
      remote_key: JSON.stringify(key),
      message: JSON.stringify(node),
      origin_session_id: null,
    };
    await this.#host.transaction(async () => {
      // A newsletter's author is not a contact; anyone else's text is stored with its sender's contact read, not
      // waited for when this instance last read that contact as this text leaves it (checked when it comes).
      if (input.chat === 'newsletter') await this.#store.insertMessage(copy, now());
      else if (!this.#store.insertMessageKnowingContact(copy, now(), senderJid, (contact) => contactUnchanged(contact, pushName)))
        await this.#sawContact(session, digits, pushName, await this.#store.insertMessageAndContact(copy, now(), senderJid));
      const accepted = await this.#host.inbound(session.id, { key, message: node, pushName, messageTimestamp: seconds(), chat: input.chat });
      if (accepted && session.readIncomingMessages) await this.#store.markRead(session.id, id, now());
    }, [session.id]);
    return key;
  }

  async #row(session: NetworkSession, id: string): Promise<MessageRow> {
    const row = await this.#store.message(session.id, id);
    if (!row) throw new WharfError('not_found', 'Message not found');
    return row;
  }

  async findMessage(session: NetworkSession, id: string) {
    const row = await this.#store.message(session.id, id);
    return row ? { key: JSON.parse(row.remote_key) as MessageKey, message: JSON.parse(row.message) as MessageNode } : null;
  }

  async readMessages(session: NetworkSession, keys: MessageKey[]): Promise<void> {
    // This session's copies and the senders' logs (their read receipts).
    const writes = [session.id];
    for (const key of keys) {
      const origin = (await this.#store.message(session.id, key.id))?.origin_session_id;
      if (origin) writes.push(origin);
    }
    await this.#host.transaction(async () => {
      for (const key of keys) {
        const row = await this.#row(session, key.id);
        if (row.from_me) continue;
        if (!(await this.#store.markRead(session.id, key.id, now()))) continue;
        const origin = row.origin_session_id === null ? undefined : await this.#store.message(row.origin_session_id, key.id);
        if (origin) await this.#host.receipt(origin.session_id, JSON.parse(origin.remote_key) as MessageKey, 'read', this.#selfJid(session));
      }
    }, writes);
  }

  /** The sessions holding a copy of a message (the transaction changing them names them: SessionsService.transaction). */
  async #copyWriters(row: MessageRow): Promise<number[]> {
    return (await this.#copies(row)).map((copy) => copy.session_id);
  }

  /** Every copy of a message on the network: the sender's and each recipient's. */
  async #copies(row: MessageRow): Promise<MessageRow[]> {
    const originId = row.from_me ? row.session_id : row.origin_session_id;
    if (originId === null) return [row];
    const origin = await this.#store.message(originId, row.key_id);
    return [...(origin ? [origin] : []), ...(await this.#store.copies(row.key_id, originId))];
  }

  async react(session: NetworkSession, key: MessageKey, emoji: string): Promise<MessageKey> {
    const row = await this.#row(session, key.id);
    const reactionKey: MessageKey = { id: newMessageId(), remoteJid: (JSON.parse(row.remote_key) as MessageKey).remoteJid, fromMe: true };
    const digits = digitsOf(session.phoneNumber);
    const writes = await this.#copyWriters(row);
    await this.#host.transaction(async () => {
      for (const copy of await this.#copies(row)) {
        const mine = copy.session_id === session.id;
        const seenKey = mine
          ? reactionKey
          : await this.#inboundKey(
              reactionKey.id,
              digits,
              copy.chat === 'group' ? 'group' : 'personal',
              copy.chat === 'group' ? (JSON.parse(copy.remote_key) as MessageKey).remoteJid : null,
            );
        await this.#host.emit(copy.session_id, 'messages.reaction', [
          { key: JSON.parse(copy.remote_key), reaction: { text: emoji, key: seenKey, senderTimestampMs: String(Date.now()) } },
        ]);
      }
    }, writes);
    return reactionKey;
  }

  async editMessage(session: NetworkSession, key: MessageKey, text: string): Promise<MessageNode> {
    const row = await this.#row(session, key.id);
    if (!row.from_me)
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { msgId: ['only messages this session sent can be edited'] } });
    const old = JSON.parse(row.message) as MessageNode;
    const ext = old.extendedTextMessage as { contextInfo?: unknown } | undefined;
    if (typeof old.conversation !== 'string' && !ext) {
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { msgId: ['only text messages can be edited'] } });
    }
    const node: MessageNode = ext ? { extendedTextMessage: { ...ext, text } } : { conversation: text };
    const writes = await this.#copyWriters(row);
    await this.#host.transaction(async () => {
      await this.#store.setNode(key.id, session.id, JSON.stringify(node));
      for (const copy of await this.#copies(row)) {
        await this.#host.emit(copy.session_id, 'messages.update', [
          { key: JSON.parse(copy.remote_key), update: { message: { editedMessage: { message: node } } } },
        ]);
      }
    }, writes);
    return node;
  }

  async deleteMessage(session: NetworkSession, key: MessageKey): Promise<void> {
    const row = await this.#row(session, key.id);
    const writes = await this.#copyWriters(row);
    await this.#host.transaction(async () => {
      // Own messages are deleted for everyone; received ones only for this session.
      const copies = row.from_me ? await this.#copies(row) : [row];
      for (const copy of copies) {
        await this.#store.deleteMessage(copy.session_id, copy.key_id);
        await this.#host.emit(copy.session_id, 'messages.delete', { keys: [JSON.parse(copy.remote_key)] });
      }
    }, writes);
  }

  async sendPresence(_session: NetworkSession, jid: string, _type: PresenceType, _delayMs?: number): Promise<void> {
    if (!recipientOf(jid)) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { jid: ['jid is not a phone number or JID'] } });
  }

  // Contacts and lookups

  async #contact(row: ContactRow): Promise<Contact> {
    const digits = digitsOf(row.jid);
    return { id: row.jid, lid: lidJid(await this.#lidOf(digits)), name: row.name, notify: row.notify, imgUrl: null, status: null, blocked: row.blocked === 1 };
  }

  async #contactJid(value: string): Promise<string> {
    const digits = await this.#digitsOfJid(value);
    if (!digits)
      throw new WharfError('validation_failed', 'The given data was invalid.', {
        fields: { jid: ['jid must be a phone number (E.164), a phone JID or a known LID'] },
      });
    return phoneJid(digits);
  }

  async contacts(session: NetworkSession): Promise<Contact[]> {
    const contacts: Contact[] = [];
    for (const row of await this.#store.contacts(session.id)) contacts.push(await this.#contact(row));
    return contacts;
  }

  async contact(session: NetworkSession, jid: string): Promise<Contact | null> {
    const row = await this.#store.contact(session.id, await this.#contactJid(jid));
    return row ? await this.#contact(row) : null;
  }

  async upsertContact(session: NetworkSession, input: { jid: string; fullName: string }): Promise<Contact> {
    const jid = await this.#contactJid(input.jid);
    return this.#host.transaction(async () => {
      const existed = (await this.#store.contact(session.id, jid)) !== undefined;
      await this.#store.upsertContact(session.id, jid, { name: input.fullName }, now());
      const contact = await this.#contact((await this.#store.contact(session.id, jid))!);
      await this.#host.emit(session.id, existed ? 'contacts.update' : 'contacts.upsert', [
        { id: jid, lid: contact.lid, phoneNumber: jid, name: input.fullName },
      ]);
      return contact;
    }, [session.id]);
  }

  async setBlocked(session: NetworkSession, jid: string, blocked: boolean): Promise<void> {
    const contactJid = await this.#contactJid(jid);
    await this.#store.upsertContact(session.id, contactJid, { blocked }, now());
  }

  async profilePicture(_session: NetworkSession, jid: string): Promise<string | null> {
    await this.#contactJid(jid);
    return null;
  }

  async onWhatsApp(_session: NetworkSession, phone: string) {
    const normalized = normalizePhone(phone);
    if (!normalized) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { phone: ['phone must be in E.164 format'] } });
    const digits = digitsOf(normalized);
    // Every well-formed number exists on the sandbox network; only sandbox sessions answer.
    return { exists: true, jid: phoneJid(digits), lid: lidJid(await this.#lidOf(digits)) };
  }

  async lidFromPn(_session: NetworkSession, pn: string): Promise<string | null> {
    const digits = await this.#digitsOfJid(pn);
    return digits ? lidJid(await this.#lidOf(digits)) : null;
  }

  async pnFromLid(_session: NetworkSession, lid: string): Promise<string | null> {
    const match = /^(\d{6,20})(?:@lid)?$/.exec(lid.trim());
    const pn = match ? await this.#store.pnByLid(match[1]!) : undefined;
    return pn ? phoneJid(pn) : null;
  }

  // Groups

  async #metadata(group: GroupRow): Promise<GroupMetadata> {
    const members = await this.#store.members(group.jid);
    const participants = [];
    for (const m of members) participants.push({ id: m.jid, lid: lidJid(await this.#lidOf(digitsOf(m.jid))), admin: m.admin });
    return {
      id: group.jid,
      subject: group.subject,
      desc: group.description,
      owner: group.owner_jid,
      creation: Math.floor(Date.parse(group.created_at) / 1000),
      announce: group.announce === 1,
      restrict: group.restrict_info === 1,
      size: members.length,
      participants,
    };
  }

  /** The group, when this session is a member of it; 404 otherwise (existing or not). */
  async #memberGroup(session: NetworkSession, jid: string): Promise<{ group: GroupRow; admin: boolean }> {
    const group = await this.#store.group(jid, session.orgId);
    const member = group && (await this.#store.member(group.jid, this.#selfJid(session)));
    if (!group || !member) throw new WharfError('not_found', 'Group not found');
    return { group, admin: member.admin !== null };
  }

  /** Emits an event to every sandbox session that is a member of the group (and to `also`). */
  async #toMembers(
    group: GroupRow,
    event: 'groups.upsert' | 'groups.update' | 'group-participants.update',
    data: unknown,
    also: NetworkSession[] = [],
  ): Promise<void> {
    const targets = new Map<number, NetworkSession>();
    for (const s of [...(await this.#memberSessions(group, -1)), ...also]) targets.set(s.id, s);
    for (const s of targets.values()) await this.#host.emit(s.id, event, data);
  }

  async groups(session: NetworkSession): Promise<GroupMetadata[]> {
    const groups: GroupMetadata[] = [];
    for (const group of await this.#store.groupsOf(session.orgId, this.#selfJid(session))) groups.push(await this.#metadata(group));
    return groups;
  }

  async createGroup(session: NetworkSession, subject: string, participants: string[]): Promise<GroupMetadata> {
    const members = participantJids(participants);
    const writes = [session.id, ...(await this.#sessionsOf(session.orgId, members))];
    return this.#host.transaction(async () => {
      let jid: string;
      do jid = `120363${String(randomInt(0, 1e12)).padStart(12, '0')}@g.us`;
      while (await this.#store.group(jid, session.orgId));
      const self = this.#selfJid(session);
      await this.#store.insertGroup({ jid, orgId: session.orgId, subject, ownerJid: self, inviteCode: randomToken(16) }, now());
      await this.#store.addMember(jid, self, 'superadmin');
      for (const m of members) if (m !== self) await this.#store.addMember(jid, m, null);
      const group = (await this.#store.group(jid, session.orgId))!;
      const metadata = await this.#metadata(group);
      await this.#toMembers(group, 'groups.upsert', [metadata]);
      return metadata;
    }, writes);
  }

  async groupMetadata(session: NetworkSession, jid: string): Promise<GroupMetadata> {
    return this.#metadata((await this.#memberGroup(session, jid)).group);
  }

  async updateParticipants(
    session: NetworkSession,
    jid: string,
    action: 'add' | 'remove' | 'promote' | 'demote',
    participants: string[],
  ): Promise<ParticipantResult[]> {
    const { group, admin } = await this.#memberGroup(session, jid);
    const list = participantJids(participants);
    if (!admin) return list.map((id) => ({ id, status: 403, message: 'not-authorized' }));
    const writes = await this.#groupWriters(group, list);
    return this.#host.transaction(async () => {
      const results: ParticipantResult[] = [];
      const changed: string[] = [];
      const removed: NetworkSession[] = [];
      for (const id of list) {
        const member = await this.#store.member(group.jid, id);
        if (action === 'add') {
          if (member) results.push({ id, status: 409, message: 'already a participant' });
          else {
            await this.#store.addMember(group.jid, id, null);
            results.push({ id, status: 200, message: 'added' });
            changed.push(id);
          }
        } else if (!member) {
          results.push({ id, status: 404, message: 'not a participant' });
        } else if (action === 'remove') {
          await this.#store.removeMember(group.jid, id);
          const s = await this.#sessionByDigits(session.orgId, digitsOf(id));
          if (s) removed.push(s);
          results.push({ id, status: 200, message: 'removed' });
          changed.push(id);
        } else {
          await this.#store.setAdmin(group.jid, id, action === 'promote' ? 'admin' : null);
          results.push({ id, status: 200, message: action === 'promote' ? 'promoted' : 'demoted' });
          changed.push(id);
        }
      }
      if (changed.length) await this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: changed, action }, removed);
      return results;
    }, writes);
  }

  async updateGroupSettings(
    session: NetworkSession,
    jid: string,
    settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean },
  ): Promise<GroupMetadata> {
    const { group, admin } = await this.#memberGroup(session, jid);
    if (!admin && (group.restrict_info === 1 || settings.announce !== undefined || settings.restrict !== undefined)) {
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { settings: ['only group admins can change these settings'] } });
    }
    const writes = await this.#groupWriters(group, [this.#selfJid(session)]);
    return this.#host.transaction(async () => {
      await this.#store.updateGroup(group.jid, settings);
      const updated = (await this.#store.group(group.jid, session.orgId))!;
      await this.#toMembers(updated, 'groups.update', [{ id: group.jid, ...settings }]);
      return this.#metadata(updated);
    }, writes);
  }

  async leaveGroup(session: NetworkSession, jid: string): Promise<void> {
    const { group } = await this.#memberGroup(session, jid);
    const writes = await this.#groupWriters(group, [this.#selfJid(session)]);
    await this.#host.transaction(async () => {
      const self = this.#selfJid(session);
      await this.#store.removeMember(group.jid, self);
      await this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: [self], action: 'remove' }, [session]);
      if ((await this.#store.members(group.jid)).length === 0) await this.#store.deleteGroup(group.jid);
    }, writes);
  }

  async groupInviteCode(session: NetworkSession, jid: string): Promise<string> {
    const { group, admin } = await this.#memberGroup(session, jid);
    if (!admin)
      throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { groupJid: ['only group admins can read the invite link'] } });
    return group.invite_code;
  }

  async groupInviteInfo(session: NetworkSession, code: string): Promise<GroupMetadata> {
    const group = await this.#store.groupByCode(code, session.orgId);
    if (!group) throw new WharfError('not_found', 'Invite not found');
    return this.#metadata(group);
  }

  async acceptGroupInvite(session: NetworkSession, code: string): Promise<string> {
    const group = await this.#store.groupByCode(code, session.orgId);
    if (!group) throw new WharfError('not_found', 'Invite not found');
    const self = this.#selfJid(session);
    const writes = await this.#groupWriters(group, [this.#selfJid(session)]);
    await this.#host.transaction(async () => {
      if (await this.#store.member(group.jid, self)) return;
      await this.#store.addMember(group.jid, self, null);
      await this.#toMembers(group, 'group-participants.update', { id: group.jid, participants: [self], action: 'add' });
    }, writes);
    return group.jid;
  }

  async groupPicture(session: NetworkSession, jid: string): Promise<string | null> {
    await this.#memberGroup(session, jid);
    return null;
  }

  // Media

  async uploadMedia(session: NetworkSession, media: { bytes: Buffer; mimetype: string; fileName?: string }): Promise<{ id: string }> {
    const id = randomToken(18);
    await this.#store.insertMedia(
      { id, orgId: session.orgId, kind: 'upload', mimetype: media.mimetype, fileName: media.fileName ?? null, bytes: media.bytes },
      now(),
    );
    return { id };
  }

  async uploadedMedia(session: NetworkSession, id: string): Promise<StoredMedia | null> {
    const row = await this.#store.media(id, session.orgId, 'upload');
    return row ? { bytes: row.bytes, mimetype: row.mimetype, fileName: row.file_name } : null;
  }

  async decryptMedia(session: NetworkSession, message: MessageNode): Promise<StoredMedia> {
    const found = mediaOf(message);
    if (!found)
      throw new WharfError('validation_failed', 'The given data was invalid.', {
        fields: { message: ['the message has no image, video, audio, document or sticker'] },
      });
    const { type, media } = found;
    const where = String(media.directPath ?? media.url ?? '');
    const cdnId = CDN_PATH.exec(where.split('?')[0] ?? '')?.[1];
    const row = cdnId ? await this.#store.media(cdnId, session.orgId, 'cdn') : undefined;
    if (!row) throw new WharfError('not_found', 'Media not found on the sandbox network (only media sent as an uploaded file carries bytes)');
    const key = typeof media.mediaKey === 'string' ? Buffer.from(media.mediaKey, 'base64') : Buffer.alloc(0);
    const plain = decryptMedia(row.bytes, key, type);
    if (!plain) throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { mediaKey: ['mediaKey does not decrypt this media'] } });
    return { bytes: plain, mimetype: String(media.mimetype ?? row.mimetype), fileName: typeof media.fileName === 'string' ? media.fileName : row.file_name };
  }
}
