/**
 * Message operations of a connected session: sends (logged before they go out, paced by account
 * protection), resends of failed ones, edits, deletes, reactions, reads, and what the message log
 * knows of one message. The network reports each send's outcome through its host.
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { toWharfError, WharfError } from '../../core/errors.ts';
import { newMessageId, participantJid, recipientOf } from './networks/nodes.ts';
import type { MessageKey, MessageNode, OutgoingContent, SimulatedInbound } from './networks/types.ts';
import type { ConnectedSession, Sessions } from './service.ts';
import { type MessageRow, STATUS_RANK } from './store.ts';
import type { ActingSession, SessionRecord } from './types.ts';

/** A send as `POST /api/send-message` takes it (validated): one kind of content, chosen by the field present. */
export interface SendRequest {
  to: string;
  text?: string;
  imageUrl?: string;
  videoUrl?: string;
  documentUrl?: string;
  audioUrl?: string;
  stickerUrl?: string;
  fileName?: string;
  contact?: { name: string; phone: string };
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  poll?: { question: string; options: string[]; multiSelect?: boolean };
  mentions?: string[];
  /** msgId of a message of this session to reply to. */
  replyTo?: number;
  viewOnce?: boolean;
}

/** What a send or a resend answers. */
export interface SendOutcome {
  msgId: number;
  /** The recipient as the caller named it. */
  jid: string;
  status: string;
}

/** The message a send replies to. */
type Quoted = { key: MessageKey; message: MessageNode | null };

/** WhatsApp's numeric message status (Baileys' WebMessageInfo.Status), as WasenderAPI's message info gives it. */
const NUMERIC_STATUS = { failed: 0, in_progress: 1, sent: 2, delivered: 3, read: 4, played: 5 } as const;

function contentOf(b: SendRequest): OutgoingContent {
  if (b.imageUrl) return { type: 'image', url: b.imageUrl, caption: b.text, viewOnce: b.viewOnce };
  if (b.videoUrl) return { type: 'video', url: b.videoUrl, caption: b.text, viewOnce: b.viewOnce };
  if (b.documentUrl) return { type: 'document', url: b.documentUrl, caption: b.text, fileName: b.fileName };
  if (b.audioUrl) return { type: 'audio', url: b.audioUrl, viewOnce: b.viewOnce };
  if (b.stickerUrl) return { type: 'sticker', url: b.stickerUrl };
  if (b.contact) return { type: 'contact', name: b.contact.name, phone: b.contact.phone };
  if (b.location)
    return { type: 'location', latitude: b.location.latitude, longitude: b.location.longitude, name: b.location.name, address: b.location.address };
  if (b.poll) return { type: 'poll', question: b.poll.question, options: b.poll.options, multiSelect: b.poll.multiSelect ?? false };
  return { type: 'text', text: b.text! };
}

function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

export class Messages {
  readonly #sessions: Sessions;
  readonly #protection: RateLimiterMemory;

  constructor(sessions: Sessions, options: { accountProtectionSeconds: number }) {
    this.#sessions = sessions;
    this.#protection = new RateLimiterMemory({ keyPrefix: 'account-protection', points: 1, duration: options.accountProtectionSeconds });
  }

  /** Logs a message, then hands it to the network; answers its log id and status. */
  async send({ session, network }: ConnectedSession, request: SendRequest): Promise<SendOutcome> {
    const { store } = this.#sessions;
    // Everything that can refuse the request is checked before the log row is written.
    const quoted = await this.#quoted({ session, network }, request.replyTo);
    await this.#protect(session);
    const target = recipientOf(request.to)!;
    const keyId = newMessageId();
    const msgId = await store.insertMessage(
      {
        sessionId: session.id,
        keyId,
        jid: target.jid,
        recipient: request.to,
        type: contentOf(request).type,
        key: { id: keyId, remoteJid: target.jid, fromMe: true },
        request: session.logMessages ? request : null,
      },
      new Date().toISOString(),
    );
    await this.#dispatch({ session, network }, { msgId, keyId, jid: target.jid }, request, quoted, true);
    return { msgId, jid: request.to, status: (await store.message(session.id, msgId))!.status };
  }

  /** Sends a failed message again (its content was logged). */
  async resend({ session, network }: ConnectedSession, msgParam: string | undefined): Promise<SendOutcome> {
    const { store } = this.#sessions;
    const row = await this.#row(session, msgParam);
    if (row.status !== 'failed') throw invalid('msgId', `only failed messages can be resent (message ${row.id} is ${row.status})`);
    if (row.request === null) throw invalid('msgId', `message ${row.id} cannot be resent: its content was not logged (log_messages is off)`);
    // Logged from a validated request by send().
    const request = JSON.parse(row.request) as SendRequest;
    const quoted = await this.#quoted({ session, network }, request.replyTo);
    await this.#protect(session);
    const keyId = newMessageId();
    await store.messageRetry(row.id, keyId, { id: keyId, remoteJid: row.jid, fromMe: true }, new Date().toISOString());
    await this.#dispatch({ session, network }, { msgId: row.id, keyId, jid: row.jid }, request, quoted, false);
    return { msgId: row.id, jid: row.recipient, status: (await store.message(session.id, row.id))!.status };
  }

  /** What the log knows of a message this session sent. */
  async info(session: SessionRecord, msgParam: string | undefined) {
    const row = await this.#row(session, msgParam);
    return {
      msgId: row.id,
      key: JSON.parse(row.remote_key) as MessageKey,
      message: row.message === null ? null : (JSON.parse(row.message) as MessageNode),
      messageTimestamp: row.message_timestamp,
      status: NUMERIC_STATUS[row.status],
      statusText: row.status,
      jid: row.recipient,
      ...(row.error ? { error: row.error } : {}),
    };
  }

  async edit({ session, network }: ConnectedSession, msgParam: string | undefined, text: string): Promise<SendOutcome> {
    const row = await this.#row(session, msgParam);
    if (row.status === 'failed' || row.status === 'in_progress') throw invalid('msgId', `message ${row.id} was not sent (status: ${row.status})`);
    const node = await network.editMessage(session, JSON.parse(row.remote_key) as MessageKey, text);
    await this.#sessions.store.messageEdited(row.id, session.logMessages ? node : null, new Date().toISOString());
    return { msgId: row.id, jid: row.recipient, status: row.status };
  }

  /** Deletes a message for everyone (one never sent only leaves the log). */
  async remove({ session, network }: ConnectedSession, msgParam: string | undefined): Promise<number> {
    const row = await this.#row(session, msgParam);
    if (row.status !== 'failed' && row.status !== 'in_progress') await network.deleteMessage(session, JSON.parse(row.remote_key) as MessageKey);
    await this.#sessions.store.messageDeleted(row.id, new Date().toISOString());
    return row.id;
  }

  /** Marks a received message read (its sender gets a read receipt). */
  async read({ session, network }: ConnectedSession, key: MessageKey): Promise<void> {
    await network.readMessages(session, [{ ...key, fromMe: key.fromMe ?? false }]);
  }

  /** Reacts to a message given by key, or by msgId for one this session sent. Answers the reaction's key and its target. */
  async react(
    { session, network }: ConnectedSession,
    target: { key?: MessageKey; msgId?: number },
    emoji: string,
  ): Promise<{ key: MessageKey; target: MessageKey }> {
    let key: MessageKey;
    if (target.msgId !== undefined) {
      const row = await this.#row(session, String(target.msgId));
      if (STATUS_RANK[row.status] < STATUS_RANK.sent) throw invalid('msgId', `message ${row.id} was not sent (status: ${row.status})`);
      key = JSON.parse(row.remote_key) as MessageKey;
    } else {
      key = { ...target.key!, fromMe: target.key!.fromMe ?? false };
    }
    return { key: await network.react(session, key, emoji), target: key };
  }

  /**
   * Makes the session's network deliver an inbound text to it (a network with the `receive`
   * capability: the sandbox), audited in the same transaction. Answers the key the session sees.
   */
  receive({ session, network, actor }: ActingSession, input: SimulatedInbound): Promise<MessageKey> {
    if (!network?.capabilities.receive || !network.receive) {
      throw new WharfError('validation_failed', 'Sandbox receive works only on sandbox sessions.', {
        fields: {
          session: [`session ${session.id} is a ${session.type} session; use the API key of a sandbox session (POST /api/sandbox-sessions creates one)`],
        },
      });
    }
    const receive = network.receive.bind(network);
    return this.#sessions.transaction(async () => {
      const key = await receive(session, input);
      await this.#sessions.audit(session, actor, 'sandbox.receive', { chat: input.chat, from: input.from });
      return key;
    }, [session.id]);
  }

  /** Account protection: one send per interval per session, else 429 with Retry-After. */
  async #protect(session: SessionRecord): Promise<void> {
    if (!session.accountProtection) return;
    try {
      await this.#protection.consume(String(session.id));
    } catch (res) {
      if (!(res instanceof RateLimiterRes)) throw res;
      const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
      throw new WharfError('rate_limited', `Account protection is on for this session: one message every ${this.#protection.duration} seconds`, { retryAfter });
    }
  }

  /** A message of this session's log by path id; 404 for a missing or deleted one. */
  async #row(session: SessionRecord, param: string | undefined): Promise<MessageRow> {
    const id = /^[1-9]\d{0,15}$/.test(param ?? '') ? Number(param) : 0;
    const row = id ? await this.#sessions.store.message(session.id, id) : undefined;
    if (!row || row.deleted_at) throw new WharfError('not_found', 'Message not found');
    return row;
  }

  /** The message a send replies to (by msgId, a message of this session not deleted), with its node when known; 422 otherwise. */
  async #quoted({ session, network }: Omit<ConnectedSession, 'actor'>, replyTo: number | undefined): Promise<Quoted | undefined> {
    if (replyTo === undefined) return undefined;
    const original = await this.#sessions.store.message(session.id, replyTo);
    if (!original || original.deleted_at) throw invalid('replyTo', `no message ${replyTo} in this session`);
    const key = JSON.parse(original.remote_key) as MessageKey;
    return { key, message: original.message ? (JSON.parse(original.message) as MessageNode) : ((await network.findMessage(session, key.id))?.message ?? null) };
  }

  /** Hands a logged message to the network; a refusal by the network marks it failed (5xx) or removes it (4xx). */
  async #dispatch(
    { session, network }: Omit<ConnectedSession, 'actor'>,
    row: { msgId: number; keyId: string; jid: string },
    request: SendRequest,
    quoted: Quoted | undefined,
    fresh: boolean,
  ): Promise<void> {
    const { store } = this.#sessions;
    try {
      await network.send(session, {
        msgId: row.msgId,
        id: row.keyId,
        jid: row.jid,
        content: contentOf(request),
        mentions: (request.mentions ?? []).map((m) => participantJid(m)!),
        quoted,
      });
    } catch (thrown) {
      const err = toWharfError(thrown);
      if (err.status < 500 && fresh) await store.dropMessage(row.msgId);
      else await store.messageFailed(session.id, row.msgId, err.message, new Date().toISOString());
      throw thrown;
    }
  }
}
