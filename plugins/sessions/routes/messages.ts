/**
 * Session-scoped message operations (session API key): `POST /api/send-message` in all of
 * WasenderAPI's variants, and `/api/messages/...` info, edit, delete, resend, read and react.
 */
import type { RouteGroup } from '../../../core/api.ts';
import type { Context } from 'koa';
import { z } from 'zod';
import { toWharfError, WharfError } from '../../../core/errors.ts';
import { newMessageId, participantJid, recipientOf } from '../networks/nodes.ts';
import type { MessageKey, MessageNode, NetworkAdapter, OutgoingContent } from '../networks/types.ts';
import { requireConnected } from '../service.ts';
import type { MessageRow } from '../store.ts';
import { STATUS_RANK } from '../store.ts';
import type { SessionRecord } from '../types.ts';
import { actingOf, mediaUrl, operation, type RouteDeps, success } from './common.ts';

const coordinate = (min: number, max: number) =>
  z
    .union([z.number(), z.string().regex(/^\s*-?\d+(\.\d+)?\s*$/, 'must be a number')])
    .transform((v) => Number(v))
    .refine((v) => v >= min && v <= max, { message: `must be between ${min} and ${max}` });

const MEDIA_FIELDS = ['imageUrl', 'videoUrl', 'documentUrl', 'audioUrl', 'stickerUrl'] as const;
const KIND_FIELDS = [...MEDIA_FIELDS, 'contact', 'location', 'poll'] as const;

export const sendBody = z
  .strictObject({
    to: z.string().min(1).max(128).describe('Recipient: a phone number in E.164, a group JID (…@g.us) or a channel JID (…@newsletter).'),
    text: z.string().min(1).max(65_536).optional().describe('The text, or the caption of an image, video or document.'),
    imageUrl: mediaUrl.optional().describe('Send an image from this URL (JPEG, PNG).'),
    videoUrl: mediaUrl.optional().describe('Send a video from this URL (MP4, 3GPP).'),
    documentUrl: mediaUrl.optional().describe('Send a document from this URL.'),
    audioUrl: mediaUrl.optional().describe('Send a voice note from this URL (AAC, MP3, OGG, AMR).'),
    stickerUrl: mediaUrl.optional().describe('Send a sticker (.webp) from this URL.'),
    fileName: z.string().min(1).max(255).optional().describe('File name of a document.'),
    contact: z
      .strictObject({ name: z.string().min(1).max(256), phone: z.string().min(1).max(32) })
      .optional()
      .describe('Send a contact card.'),
    location: z
      .strictObject({ latitude: coordinate(-90, 90), longitude: coordinate(-180, 180), name: z.string().max(256).optional(), address: z.string().max(512).optional() })
      .optional()
      .describe('Send a location pin.'),
    poll: z
      .strictObject({
        question: z.string().min(1).max(255),
        options: z.array(z.string().min(1).max(100)).min(2).max(12),
        multiSelect: z.boolean().optional(),
      })
      .optional()
      .describe('Send a poll.'),
    mentions: z.array(z.string().max(64)).max(1024).optional().describe('Phone numbers or JIDs mentioned in the text.'),
    replyTo: z.int().positive().optional().describe('msgId of a message of this session to reply to.'),
    viewOnce: z.boolean().optional().describe('View-once image, video or audio.'),
  })
  .superRefine((b, ctx) => {
    if (!recipientOf(b.to)) ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be a phone number in E.164 format, a group JID (…@g.us) or a channel JID (…@newsletter)' });
    const kinds = KIND_FIELDS.filter((k) => b[k] !== undefined);
    for (const extra of kinds.slice(1)) ctx.addIssue({ code: 'custom', path: [extra], message: `cannot be combined with ${kinds[0]}: one message carries one kind of content` });
    if (kinds.length === 0 && b.text === undefined) ctx.addIssue({ code: 'custom', path: ['text'], message: 'is required when no media, contact, location or poll is given' });
    if (b.text !== undefined && (b.stickerUrl || b.audioUrl || b.contact || b.location || b.poll)) {
      ctx.addIssue({ code: 'custom', path: ['text'], message: `cannot be combined with ${kinds[0]} (no caption)` });
    }
    if (b.fileName !== undefined && !b.documentUrl) ctx.addIssue({ code: 'custom', path: ['fileName'], message: 'only goes with documentUrl' });
    if (b.viewOnce && !(b.imageUrl || b.videoUrl || b.audioUrl)) ctx.addIssue({ code: 'custom', path: ['viewOnce'], message: 'only goes with imageUrl, videoUrl or audioUrl' });
    if (b.contact && !participantJid(b.contact.phone)) ctx.addIssue({ code: 'custom', path: ['contact', 'phone'], message: 'must be a phone number in E.164 format' });
    b.mentions?.forEach((m, i) => {
      if (!participantJid(m)) ctx.addIssue({ code: 'custom', path: ['mentions', i], message: 'must be a phone number or a phone JID' });
    });
  });

type SendBody = z.output<typeof sendBody>;

function contentOf(b: SendBody): OutgoingContent {
  if (b.imageUrl) return { type: 'image', url: b.imageUrl, caption: b.text, viewOnce: b.viewOnce };
  if (b.videoUrl) return { type: 'video', url: b.videoUrl, caption: b.text, viewOnce: b.viewOnce };
  if (b.documentUrl) return { type: 'document', url: b.documentUrl, caption: b.text, fileName: b.fileName };
  if (b.audioUrl) return { type: 'audio', url: b.audioUrl, viewOnce: b.viewOnce };
  if (b.stickerUrl) return { type: 'sticker', url: b.stickerUrl };
  if (b.contact) return { type: 'contact', name: b.contact.name, phone: b.contact.phone };
  if (b.location) return { type: 'location', latitude: b.location.latitude, longitude: b.location.longitude, name: b.location.name, address: b.location.address };
  if (b.poll) return { type: 'poll', question: b.poll.question, options: b.poll.options, multiSelect: b.poll.multiSelect ?? false };
  return { type: 'text', text: b.text! };
}

/** Accepts a key as webhooks deliver it (extra fields such as remoteJidAlt are fine). */
const keySchema = z.looseObject({
  id: z.string().min(1).max(128),
  remoteJid: z.string().min(1).max(128),
  fromMe: z.boolean().optional(),
});

const readBody = z.strictObject({ key: keySchema.describe('The key of a received message, as the webhook delivered it.') });
const reactBody = z
  .strictObject({
    key: keySchema.optional().describe('The key of the message to react to (received messages have only a key).'),
    msgId: z.int().positive().optional().describe('Or the msgId of a message this session sent.'),
    reaction: z.string().max(32).describe('An emoji; an empty string removes the reaction.'),
  })
  .superRefine((b, ctx) => {
    if ((b.key === undefined) === (b.msgId === undefined)) ctx.addIssue({ code: 'custom', path: ['key'], message: 'give exactly one of key and msgId' });
  });
const editBody = z.strictObject({ text: z.string().min(1).max(65_536).describe('The new text.') });

/** WhatsApp's numeric message status (Baileys' WebMessageInfo.Status), as WasenderAPI's message info gives it. */
const NUMERIC_STATUS = { failed: 0, in_progress: 1, sent: 2, delivered: 3, read: 4, played: 5 } as const;

const sendResult = success(z.object({ msgId: z.int(), jid: z.string(), status: z.string() }));

function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

export function messageRoutes(deps: RouteDeps): { send: RouteGroup; messages: RouteGroup } {
  const { sessions } = deps;
  const { store } = sessions;
  const send = deps.api.group({ prefixes: ['/api/send-message'], envelope: 'messaging' });
  const messages = deps.api.group({ prefixes: ['/api/messages'], envelope: 'messaging' });
  const tag = 'Messages';
  const connected = (ctx: Context): { session: SessionRecord; network: NetworkAdapter } => {
    const { session, network } = actingOf(ctx);
    requireConnected(session, network);
    return { session, network };
  };
  const messageOf = (session: SessionRecord, param: string | undefined): MessageRow => {
    const id = /^[1-9]\d{0,15}$/.test(param ?? '') ? Number(param) : 0;
    const row = id ? store.message(session.id, id) : undefined;
    if (!row || row.deleted_at) throw new WharfError('not_found', 'Message not found');
    return row;
  };

  /** Hands a logged message to the network; a refusal by the network marks it failed (5xx) or removes it (4xx). */
  async function dispatch(session: SessionRecord, network: NetworkAdapter, row: { msgId: number; keyId: string; jid: string }, body: SendBody, fresh: boolean): Promise<void> {
    const content = contentOf(body);
    let quoted: { key: MessageKey; message: MessageNode | null } | undefined;
    if (body.replyTo !== undefined) {
      const original = store.message(session.id, body.replyTo);
      if (!original || original.deleted_at) throw invalid('replyTo', `no message ${body.replyTo} in this session`);
      const key = JSON.parse(original.remote_key) as MessageKey;
      quoted = { key, message: original.message ? (JSON.parse(original.message) as MessageNode) : ((await network.findMessage(session, key.id))?.message ?? null) };
    }
    try {
      await network.send(session, { msgId: row.msgId, id: row.keyId, jid: row.jid, content, mentions: (body.mentions ?? []).map((m) => participantJid(m)!), quoted });
    } catch (thrown) {
      const err = toWharfError(thrown);
      if (err.status < 500 && fresh) store.db.prepare('DELETE FROM sessions_messages WHERE id = ?').run(row.msgId);
      else store.messageFailed(session.id, row.msgId, err.message, new Date().toISOString());
      throw thrown;
    }
  }

  operation(
    deps,
    send,
    {
      method: 'POST',
      path: '/api/send-message',
      summary: 'Send a message: text, image, video, document, audio, sticker, contact, location or poll (chosen by which field is present)',
      tag,
      credential: 'sessionKey',
      body: sendBody,
      success: { schema: sendResult },
      errors: {
        409: 'The session is not connected: `{success: false, error, message}`',
        429: 'Account protection: one message per interval: `{message, retry_after}`',
        503: 'The network is briefly unavailable; retry with backoff: `{success: false, error, message}`',
      },
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      if (body.replyTo !== undefined && !store.message(session.id, body.replyTo)) throw invalid('replyTo', `no message ${body.replyTo} in this session`);
      await sessions.protectAccount(session);
      const target = recipientOf(body.to)!;
      const keyId = newMessageId();
      const msgId = store.insertMessage(
        {
          sessionId: session.id,
          keyId,
          jid: target.jid,
          recipient: body.to,
          type: contentOf(body).type,
          key: { id: keyId, remoteJid: target.jid, fromMe: true },
          request: session.logMessages ? body : null,
        },
        new Date().toISOString(),
      );
      await dispatch(session, network, { msgId, keyId, jid: target.jid }, body, true);
      ctx.body = { success: true, data: { msgId, jid: body.to, status: store.message(session.id, msgId)!.status } };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'GET',
      path: '/api/messages/:msgId/info',
      summary: 'Information on a message this session sent: key, message, timestamp, numeric status (0 error … 5 played)',
      tag,
      credential: 'sessionKey',
      errors: { 404: 'No such message in this session: `{success: false, error, message}`' },
    },
    (ctx) => {
      const { session } = actingOf(ctx);
      const row = messageOf(session, ctx.params.msgId);
      ctx.body = {
        success: true,
        data: {
          msgId: row.id,
          key: JSON.parse(row.remote_key),
          message: row.message === null ? null : JSON.parse(row.message),
          messageTimestamp: row.message_timestamp,
          status: NUMERIC_STATUS[row.status],
          statusText: row.status,
          jid: row.recipient,
          ...(row.error ? { error: row.error } : {}),
        },
      };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'PUT',
      path: '/api/messages/:msgId',
      summary: 'Edit the text of a message this session sent',
      tag,
      credential: 'sessionKey',
      body: editBody,
      success: { schema: sendResult },
      errors: { 404: 'No such message: `{success: false, error, message}`', 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const row = messageOf(session, ctx.params.msgId);
      if (row.status === 'failed' || row.status === 'in_progress') throw invalid('msgId', `message ${row.id} was not sent (status: ${row.status})`);
      const node = await network.editMessage(session, JSON.parse(row.remote_key) as MessageKey, body.text);
      store.messageEdited(row.id, session.logMessages ? node : null, new Date().toISOString());
      ctx.body = { success: true, data: { msgId: row.id, jid: row.recipient, status: row.status } };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'DELETE',
      path: '/api/messages/:msgId',
      summary: 'Delete a message this session sent, for everyone',
      tag,
      credential: 'sessionKey',
      errors: { 404: 'No such message: `{success: false, error, message}`', 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const row = messageOf(session, ctx.params.msgId);
      if (row.status !== 'failed' && row.status !== 'in_progress') await network.deleteMessage(session, JSON.parse(row.remote_key) as MessageKey);
      store.messageDeleted(row.id, new Date().toISOString());
      ctx.body = { success: true, data: { msgId: row.id } };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'POST',
      path: '/api/messages/:msgId/resend',
      summary: 'Send a failed message again (needs log_messages, which keeps its content)',
      tag,
      credential: 'sessionKey',
      success: { schema: sendResult },
      errors: {
        404: 'No such message: `{success: false, error, message}`',
        409: 'The session is not connected: `{success: false, error, message}`',
        429: 'Account protection: `{message, retry_after}`',
      },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const row = messageOf(session, ctx.params.msgId);
      if (row.status !== 'failed') throw invalid('msgId', `only failed messages can be resent (message ${row.id} is ${row.status})`);
      if (row.request === null) throw invalid('msgId', `message ${row.id} cannot be resent: its content was not logged (log_messages is off)`);
      const body = sendBody.parse(JSON.parse(row.request));
      await sessions.protectAccount(session);
      const keyId = newMessageId();
      store.messageRetry(row.id, keyId, { id: keyId, remoteJid: row.jid, fromMe: true }, new Date().toISOString());
      await dispatch(session, network, { msgId: row.id, keyId, jid: row.jid }, body, false);
      ctx.body = { success: true, data: { msgId: row.id, jid: row.recipient, status: store.message(session.id, row.id)!.status } };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'POST',
      path: '/api/messages/read',
      summary: 'Mark a received message as read (its sender gets a read receipt)',
      tag,
      credential: 'sessionKey',
      body: readBody,
      errors: { 404: 'No such message: `{success: false, error, message}`', 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const key = body.key as MessageKey;
      await network.readMessages(session, [{ ...key, fromMe: key.fromMe ?? false }]);
      ctx.body = { success: true, data: { key: body.key, status: 'read' } };
    },
  );

  operation(
    deps,
    messages,
    {
      method: 'POST',
      path: '/api/messages/react',
      summary: 'React to a message with an emoji (by key, or by msgId for own messages)',
      tag,
      credential: 'sessionKey',
      body: reactBody,
      errors: { 404: 'No such message: `{success: false, error, message}`', 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      let key: MessageKey;
      if (body.msgId !== undefined) {
        const row = messageOf(session, String(body.msgId));
        if (STATUS_RANK[row.status] < STATUS_RANK.sent) throw invalid('msgId', `message ${row.id} was not sent (status: ${row.status})`);
        key = JSON.parse(row.remote_key) as MessageKey;
      } else {
        key = { ...(body.key as MessageKey), fromMe: body.key!.fromMe ?? false };
      }
      const reactionKey = await network.react(session, key, body.reaction);
      ctx.body = { success: true, data: { key: reactionKey, reaction: body.reaction, target: key } };
    },
  );

  return { send, messages };
}
