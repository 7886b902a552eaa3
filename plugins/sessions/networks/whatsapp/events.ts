/**
 * Baileys' events as the gateway's: one batch (Baileys buffers events and hands them over
 * together) becomes host calls in one transaction.
 *
 * - `messages.upsert`: every message goes to the message store; an inbound one (`notify`) goes
 *   through `host.inbound` (messages.upsert, messages.received, the chat's view, the session's
 *   filters), one sent from the phone or replayed from history is messages.upsert only, one this
 *   session sent through the API is reported when the server acks it. Protocol messages (edits,
 *   deletes), reactions and poll votes arrive as their own events.
 * - Acks of sends: the server's ack (`CB:ack,class:message` on the socket) is `sent`; receipts
 *   (`messages.update` with a status, `message-receipt.update` in groups) are delivered, read,
 *   played; an error ack fails the message. Sends made elsewhere (the phone) get messages.update.
 * - Edits and deletes (`messages.update`), reactions, poll votes (as poll.results, tallied from
 *   the poll in the message store), chats, groups, contacts, calls: their events, JSON-safe.
 * - LID <-> phone-number pairs from keys, contacts, history and `lid-mapping.update` are kept.
 */
import type { BaileysEventMap, BinaryNode, GroupMetadata as BaileysGroup, WAMessage, WAMessageKey } from 'baileys';
import type { Logger } from '../../../../core/logger.ts';
import type { GroupMetadata, MessageKey, NetworkHost, ReceiptStatus } from '../types.ts';
import type { BoundedCache } from './cache.ts';
import { chatOf, isLid, isPn, jsonOfMessage, jsonSafe, keyOf, type LidDirectory, lidPairsOf, normalizeJid, toNumber } from './convert.ts';
import type { WhatsAppRuntime } from './load.ts';
import type { BaileysSocket } from './socket.ts';
import type { WhatsAppStore } from './store.ts';

/** What one session's batch is handled with. */
export interface SessionContext {
  sessionId: number;
  socket: BaileysSocket;
  /** Group metadata the socket reads instead of asking WhatsApp (`cachedGroupMetadata`). */
  groups: BoundedCache;
}

/** Content types that are not messages of their own: they arrive as updates, reactions or votes. */
const NOT_A_MESSAGE = new Set([
  'protocolMessage',
  'reactionMessage',
  'encReactionMessage',
  'pollUpdateMessage',
  'senderKeyDistributionMessage',
  'messageContextInfo',
  'keepInChatMessage',
  'encEventResponseMessage',
]);

/** WhatsApp's message status numbers (WebMessageInfo.Status), by name. */
const STATUS_NAME = ['error', 'pending', 'sent', 'delivered', 'read', 'played'] as const;
const RECEIPT_OF: Readonly<Record<number, ReceiptStatus>> = { 3: 'delivered', 4: 'read', 5: 'played' };

const now = () => new Date().toISOString();

export class EventMapper {
  readonly #runtime: WhatsAppRuntime;
  readonly #host: NetworkHost;
  readonly #store: WhatsAppStore;
  readonly #log: Logger;
  /** Sends the server acked before the message they became was stored, by `session:key id` (bounded). */
  readonly #earlyAcks = new Set<string>();

  constructor(deps: { runtime: WhatsAppRuntime; host: NetworkHost; store: WhatsAppStore; log: Logger }) {
    this.#runtime = deps.runtime;
    this.#host = deps.host;
    this.#store = deps.store;
    this.#log = deps.log;
  }

  /** The LID directory of a session (its own table). */
  lids(sessionId: number): LidDirectory {
    return {
      pnOfLid: (lid) => this.#store.pnOfLid(sessionId, lid),
      lidOfPn: (pn) => this.#store.lidOfPn(sessionId, pn),
    };
  }

  /** Records LID <-> phone-number pairs. */
  async learn(sessionId: number, pairs: Iterable<{ lid: string | null | undefined; pn: string | null | undefined }>): Promise<void> {
    for (const { lid, pn } of pairs) {
      if (isLid(lid) && isPn(pn)) await this.#store.setLid(sessionId, normalizeJid(lid), normalizeJid(pn));
    }
  }

  /** A message as protobuf bytes, for the message store. */
  encode(message: WAMessage['message']): Uint8Array | null {
    return message ? this.#runtime.proto.Message.encode(message).finish() : null;
  }

  /** A batch of a session's events (connection and credential updates excluded: the connection handles those). */
  async handle(ctx: SessionContext, events: Partial<BaileysEventMap>): Promise<void> {
    const toRead: WAMessageKey[] = [];
    const toReject: { id: string; from: string }[] = [];
    await this.#host.transaction(async () => {
      // On PostgreSQL this may run again (a serialization failure): what an attempt collected goes with it.
      toRead.length = 0;
      toReject.length = 0;
      const session = await this.#host.session(ctx.sessionId);
      if (!session) return;
      // The LID <-> phone pairs the messages reveal first: the contact updates of the same batch name LIDs.
      for (const msg of events['messages.upsert']?.messages ?? []) if (msg.key) await this.learn(ctx.sessionId, lidPairsOf(msg.key));
      const history = events['messaging-history.set'];
      if (history) {
        await this.learn(ctx.sessionId, history.lidPnMappings ?? []);
        await this.#contacts(ctx.sessionId, history.contacts, false);
      }
      const mapping = events['lid-mapping.update'];
      if (mapping) await this.learn(ctx.sessionId, [mapping]);
      if (events['contacts.upsert']) await this.#contacts(ctx.sessionId, events['contacts.upsert'], 'contacts.upsert');
      if (events['contacts.update']) await this.#contacts(ctx.sessionId, events['contacts.update'], 'contacts.update');
      const upsert = events['messages.upsert'];
      if (upsert) {
        for (const msg of upsert.messages) {
          const accepted = await this.#message(ctx, msg, upsert.type);
          if (accepted && session.readIncomingMessages) toRead.push(msg.key);
        }
      }
      if (events['messages.update']) await this.#updates(ctx, events['messages.update']);
      if (events['message-receipt.update']) await this.#receipts(ctx, events['message-receipt.update']);
      const reactions = events['messages.reaction'];
      if (reactions?.length) {
        const lids = this.lids(ctx.sessionId);
        await this.#host.emit(
          ctx.sessionId,
          'messages.reaction',
          await Promise.all(
            reactions.map(async ({ key, reaction }) => ({
              key: await keyOf(key, lids),
              reaction: {
                text: reaction.text ?? '',
                ...(reaction.key ? { key: await keyOf(reaction.key, lids) } : {}),
                senderTimestampMs: String(toNumber(reaction.senderTimestampMs)),
              },
            })),
          ),
        );
      }
      const deleted = events['messages.delete'];
      if (deleted) {
        const lids = this.lids(ctx.sessionId);
        await this.#host.emit(
          ctx.sessionId,
          'messages.delete',
          'keys' in deleted ? { keys: await Promise.all(deleted.keys.map((k) => keyOf(k, lids))) } : deleted,
        );
      }
      for (const name of ['chats.upsert', 'chats.update'] as const) {
        const chats = events[name];
        // History sync brings chats with their messages: the events carry the chats only.
        if (chats?.length)
          await this.#host.emit(
            ctx.sessionId,
            name,
            chats.map(({ messages: _messages, ...chat }) => jsonSafe(chat)),
          );
      }
      if (events['chats.delete']?.length) await this.#host.emit(ctx.sessionId, 'chats.delete', events['chats.delete']);
      const groups = events['groups.upsert'];
      if (groups?.length) {
        for (const g of groups) ctx.groups.set(g.id, g);
        await this.#host.emit(ctx.sessionId, 'groups.upsert', await Promise.all(groups.map((g) => this.group(ctx.sessionId, g))));
      }
      const groupUpdates = events['groups.update'];
      if (groupUpdates?.length) {
        for (const g of groupUpdates) if (g.id) ctx.groups.del(g.id);
        await this.#host.emit(ctx.sessionId, 'groups.update', jsonSafe(groupUpdates));
      }
      const participants = events['group-participants.update'];
      if (participants) {
        ctx.groups.del(participants.id);
        await this.learn(
          ctx.sessionId,
          participants.participants.map((p) => ({ lid: isLid(p.id) ? p.id : p.lid, pn: isPn(p.id) ? p.id : p.phoneNumber })),
        );
        await this.#host.emit(ctx.sessionId, 'group-participants.update', {
          id: participants.id,
          author: participants.author,
          action: participants.action,
          participants: await Promise.all(participants.participants.map((p) => this.#participantJid(ctx.sessionId, p))),
        });
      }
      const blocklist = events['blocklist.set'];
      if (blocklist) await this.#store.setBlocklist(ctx.sessionId, blocklist.blocklist.map(normalizeJid), now());
      const blocked = events['blocklist.update'];
      if (blocked)
        for (const jid of blocked.blocklist) await this.#store.upsertContact(ctx.sessionId, normalizeJid(jid), { blocked: blocked.type === 'add' }, now());
      const calls = events.call;
      if (calls?.length) {
        const offers = calls.filter((c) => c.status === 'offer');
        if (offers.length) {
          await this.#host.emit(ctx.sessionId, 'call.received', jsonSafe(offers));
          if (session.autoRejectCalls) for (const c of offers) toReject.push({ id: c.id, from: c.from });
        }
      }
    }, [ctx.sessionId]);
    // Network calls after the transaction: it must not wait on them.
    if (toRead.length)
      ctx.socket.readMessages(toRead).catch((err: unknown) => this.#log.warn({ err, sessionId: ctx.sessionId }, 'marking messages read failed'));
    for (const call of toReject) {
      ctx.socket.rejectCall(call.id, call.from).catch((err: unknown) => this.#log.warn({ err, sessionId: ctx.sessionId }, 'rejecting a call failed'));
    }
  }

  /** One upserted message; true when it was delivered to the session as inbound (its filters let it through). */
  async #message(ctx: SessionContext, msg: WAMessage, type: 'append' | 'notify'): Promise<boolean> {
    const { key } = msg;
    if (!key?.id || !key.remoteJid) return false;
    const sessionId = ctx.sessionId;
    await this.learn(sessionId, lidPairsOf(key));
    const stored = await this.#store.message(sessionId, key.id);
    if (msg.message) {
      await this.#store.saveMessage(
        sessionId,
        {
          keyId: key.id,
          remoteJid: key.remoteJid,
          fromMe: key.fromMe === true,
          msgId: null,
          key,
          message: this.encode(msg.message),
          timestamp: toNumber(msg.messageTimestamp),
        },
        now(),
      );
    }
    const content = this.#runtime.normalizeMessageContent(msg.message);
    const contentType = content ? this.#runtime.getContentType(content) : undefined;
    if (!msg.message || !contentType || NOT_A_MESSAGE.has(contentType)) return false;
    // A send through the API is reported when the server acks it, not as it leaves.
    if (key.fromMe && stored?.msg_id) return false;
    const lids = this.lids(sessionId);
    const chat = chatOf(key.remoteJid);
    const data = {
      key: await keyOf(key, lids),
      message: jsonOfMessage(this.#runtime, msg.message),
      pushName: msg.pushName ?? null,
      messageTimestamp: toNumber(msg.messageTimestamp) || Math.floor(Date.now() / 1000),
    };
    if (!key.fromMe && msg.pushName && (chat === 'personal' || chat === 'group')) {
      const sender = chat === 'group' ? data.key.participant : key.remoteJid;
      const pn = data.key.senderPn as string | undefined;
      const lid = data.key.senderLid as string | undefined;
      if (sender) await this.#store.upsertContact(sessionId, pn ?? normalizeJid(sender), { notify: msg.pushName, lid: lid ?? null }, now());
    }
    if (key.fromMe || type !== 'notify') {
      await this.#host.emit(sessionId, 'messages.upsert', data);
      return false;
    }
    return await this.#host.inbound(sessionId, { ...data, chat });
  }

  async #updates(ctx: SessionContext, updates: BaileysEventMap['messages.update']): Promise<void> {
    const lids = this.lids(ctx.sessionId);
    const plain: unknown[] = [];
    for (const { key, update } of updates) {
      if (!key.id) continue;
      if (typeof update.status === 'number' && key.fromMe) {
        if (await this.#ack(ctx.sessionId, key, update.status, key.remoteJid ?? '')) continue;
        plain.push({ key: await keyOf(key, lids), update: { status: STATUS_NAME[update.status] ?? update.status } });
        continue;
      }
      if (update.message === null && update.messageStubType === this.#runtime.WAMessageStubType.REVOKE) {
        await this.#host.emit(ctx.sessionId, 'messages.delete', { keys: [await keyOf(key, lids)] });
        continue;
      }
      if (update.message?.editedMessage?.message) {
        const edited = update.message.editedMessage.message;
        if (await this.#store.message(ctx.sessionId, key.id)) await this.#store.setMessage(ctx.sessionId, key.id, this.encode(edited)!);
        plain.push({ key: await keyOf(key, lids), update: { message: jsonOfMessage(this.#runtime, update.message) } });
        continue;
      }
      if (update.pollUpdates?.length) {
        await this.#poll(ctx.sessionId, key, update.pollUpdates);
      }
    }
    if (plain.length) await this.#host.emit(ctx.sessionId, 'messages.update', plain);
  }

  async #receipts(ctx: SessionContext, receipts: BaileysEventMap['message-receipt.update']): Promise<void> {
    const lids = this.lids(ctx.sessionId);
    const plain: unknown[] = [];
    for (const { key, receipt } of receipts) {
      const status = receipt.playedTimestamp ? 5 : receipt.readTimestamp ? 4 : 3;
      if (key.fromMe && key.id && (await this.#ack(ctx.sessionId, key, status, receipt.userJid ?? ''))) continue;
      plain.push({ key: await keyOf(key, lids), receipt: jsonSafe(receipt) });
    }
    if (plain.length) await this.#host.emit(ctx.sessionId, 'message-receipt.update', plain);
  }

  /**
   * An ack or receipt of a message this session sent through the API: moves its log row (sent
   * first, once). False when the message is not one of those (sent from the phone, or pruned).
   */
  async #ack(sessionId: number, key: WAMessageKey, status: number, userJid: string): Promise<boolean> {
    const row = key.id ? await this.#store.message(sessionId, key.id) : undefined;
    if (!row?.msg_id) return false;
    const recorded = JSON.parse(row.key) as MessageKey;
    if (status === 0) {
      await this.#host.failed(sessionId, row.msg_id, 'WhatsApp refused the message');
      return true;
    }
    if (status >= 2) await this.#sent(sessionId, row.msg_id, key.id!, recorded);
    const receipt = RECEIPT_OF[status];
    if (receipt) await this.#host.receipt(sessionId, recorded, receipt, normalizeJid(userJid || recorded.remoteJid));
    return true;
  }

  /** Reports a send as sent, once (the server's ack, or the first receipt if that came first). */
  async #sent(sessionId: number, msgId: number, keyId: string, key: MessageKey): Promise<void> {
    const row = await this.#store.message(sessionId, keyId);
    if (!row || row.acked) return;
    if (!row.message) {
      if (this.#earlyAcks.size >= 10_000) this.#earlyAcks.delete(this.#earlyAcks.values().next().value!);
      this.#earlyAcks.add(`${sessionId}:${keyId}`);
      return;
    }
    if (!(await this.#store.markAcked(sessionId, keyId))) return;
    const message = this.#runtime.proto.Message.decode(row.message);
    await this.#host.sent(sessionId, msgId, key, jsonOfMessage(this.#runtime, message), row.timestamp || Math.floor(Date.now() / 1000));
  }

  /** The server's ack of a message this socket sent (`<ack class="message" id=... [error=...]>`). */
  async serverAck(sessionId: number, node: BinaryNode): Promise<void> {
    const { id, error } = node.attrs;
    if (!id || error) return; // an error ack arrives as messages.update with status ERROR
    await this.#host.transaction(async () => {
      const row = await this.#store.message(sessionId, id);
      if (row?.msg_id) await this.#sent(sessionId, row.msg_id, id, JSON.parse(row.key) as MessageKey);
    }, [sessionId]);
  }

  /**
   * A send about to be handed to WhatsApp: its row in the message store links the key id to the
   * message log before anything can come back for it (Baileys announces the send as it goes out).
   */
  async pending(sessionId: number, send: { msgId: number; id: string; jid: string }): Promise<void> {
    await this.#store.saveMessage(
      sessionId,
      {
        keyId: send.id,
        remoteJid: send.jid,
        fromMe: true,
        msgId: send.msgId,
        key: { id: send.id, remoteJid: send.jid, fromMe: true },
        message: null,
        timestamp: 0,
      },
      now(),
    );
  }

  /** A send handed to WhatsApp: stores the message it became, and reports it if its ack came first. */
  async accepted(sessionId: number, msgId: number, msg: WAMessage): Promise<void> {
    if (!msg.key.id || !msg.key.remoteJid) return;
    const key = { id: msg.key.id, remoteJid: msg.key.remoteJid, fromMe: true };
    // Outside the transaction: on PostgreSQL it may run again, and must find the same answer.
    const ackedFirst = this.#earlyAcks.delete(`${sessionId}:${msg.key.id}`);
    await this.#host.transaction(async () => {
      await this.#store.saveMessage(
        sessionId,
        {
          keyId: msg.key.id!,
          remoteJid: msg.key.remoteJid!,
          fromMe: true,
          msgId,
          key,
          message: this.encode(msg.message),
          timestamp: toNumber(msg.messageTimestamp) || Math.floor(Date.now() / 1000),
        },
        now(),
      );
      if (ackedFirst) await this.#sent(sessionId, msgId, msg.key.id!, key);
    }, [sessionId]);
  }

  async #poll(sessionId: number, key: WAMessageKey, pollUpdates: NonNullable<WAMessage['pollUpdates']>): Promise<void> {
    const row = key.id ? await this.#store.message(sessionId, key.id) : undefined;
    if (!row?.message) {
      this.#log.debug({ sessionId, id: key.id }, 'poll vote for a poll not in the message store');
      return;
    }
    const message = this.#runtime.proto.Message.decode(row.message);
    const me = (await this.#store.account(sessionId))?.me_jid ?? undefined;
    const tally = this.#runtime.getAggregateVotesInPollMessage({ message, pollUpdates }, me);
    await this.#host.emit(sessionId, 'poll.results', {
      key: await keyOf(key, this.lids(sessionId)),
      pollResult: tally.map((option) => ({ name: option.name, voters: option.voters })),
    });
  }

  async #contacts(
    sessionId: number,
    contacts: Partial<BaileysEventMap['contacts.upsert'][number]>[],
    event: 'contacts.upsert' | 'contacts.update' | false,
  ): Promise<void> {
    const out: unknown[] = [];
    for (const contact of contacts) {
      if (!contact.id) continue;
      const lid = isLid(contact.id) ? contact.id : contact.lid;
      const pn = isPn(contact.id) ? contact.id : contact.phoneNumber;
      await this.learn(sessionId, [{ lid, pn }]);
      const jid = normalizeJid(pn ?? (await this.#store.pnOfLid(sessionId, normalizeJid(contact.id))) ?? contact.id);
      await this.#store.upsertContact(
        sessionId,
        jid,
        {
          lid: lid ? normalizeJid(lid) : null,
          name: contact.name ?? null,
          notify: contact.notify ?? contact.verifiedName ?? null,
          imgUrl: typeof contact.imgUrl === 'string' && contact.imgUrl !== 'changed' ? contact.imgUrl : null,
        },
        now(),
      );
      out.push(jsonSafe({ ...contact, id: jid, ...(lid ? { lid: normalizeJid(lid) } : {}) }));
    }
    if (event && out.length) await this.#host.emit(sessionId, event, out);
  }

  async #participantJid(sessionId: number, p: { id: string; phoneNumber?: string; lid?: string }): Promise<string> {
    if (isPn(p.id)) return normalizeJid(p.id);
    if (p.phoneNumber) return normalizeJid(p.phoneNumber);
    return (await this.#store.pnOfLid(sessionId, normalizeJid(p.id))) ?? p.id;
  }

  /** A group as the gateway shows it: participants by phone-number JID (their LID beside), the owner likewise. */
  async group(sessionId: number, g: BaileysGroup): Promise<GroupMetadata> {
    await this.learn(
      sessionId,
      g.participants.map((p) => ({ lid: isLid(p.id) ? p.id : p.lid, pn: isPn(p.id) ? p.id : p.phoneNumber })),
    );
    const participants = [];
    for (const p of g.participants) {
      const id = await this.#participantJid(sessionId, p);
      const lid = isLid(p.id) ? normalizeJid(p.id) : p.lid ? normalizeJid(p.lid) : ((await this.#store.lidOfPn(sessionId, id)) ?? null);
      participants.push({ id, lid, admin: p.admin ?? null });
    }
    const owner = g.ownerPn ?? g.owner;
    return {
      id: g.id,
      subject: g.subject,
      desc: g.desc ?? null,
      owner: owner ? (isLid(owner) ? ((await this.#store.pnOfLid(sessionId, normalizeJid(owner))) ?? owner) : normalizeJid(owner)) : null,
      creation: g.creation ?? 0,
      announce: g.announce === true,
      restrict: g.restrict === true,
      size: g.size ?? participants.length,
      participants,
    };
  }
}
