/**
 * `POST /api/send-message` (session API key), in all of WasenderAPI's variants: text, image,
 * video, document, audio, sticker, contact, location or poll, chosen by which field is present.
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import type { SendRequest } from '../messages.ts';
import { participantJid, recipientOf } from '../networks/nodes.ts';
import { mediaUrl, NOT_CONNECTED, type RouteDeps, success } from './common.ts';

const coordinate = (min: number, max: number) =>
  z
    .union([z.number(), z.string().regex(/^\s*-?\d+(\.\d+)?\s*$/, 'must be a number')])
    .transform((v) => Number(v))
    .refine((v) => v >= min && v <= max, { message: `must be between ${min} and ${max}` });

const MEDIA_FIELDS = ['imageUrl', 'videoUrl', 'documentUrl', 'audioUrl', 'stickerUrl'] as const;
const KIND_FIELDS = [...MEDIA_FIELDS, 'contact', 'location', 'poll'] as const;

export const sendBody = z.lazy(() =>
  z
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
        .strictObject({
          latitude: coordinate(-90, 90),
          longitude: coordinate(-180, 180),
          name: z.string().max(256).optional(),
          address: z.string().max(512).optional(),
        })
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
      if (!recipientOf(b.to))
        ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be a phone number in E.164 format, a group JID (…@g.us) or a channel JID (…@newsletter)' });
      const kinds = KIND_FIELDS.filter((k) => b[k] !== undefined);
      for (const extra of kinds.slice(1))
        ctx.addIssue({ code: 'custom', path: [extra], message: `cannot be combined with ${kinds[0]}: one message carries one kind of content` });
      if (kinds.length === 0 && b.text === undefined)
        ctx.addIssue({ code: 'custom', path: ['text'], message: 'is required when no media, contact, location or poll is given' });
      if (b.text !== undefined && (b.stickerUrl || b.audioUrl || b.contact || b.location || b.poll)) {
        ctx.addIssue({ code: 'custom', path: ['text'], message: `cannot be combined with ${kinds[0]} (no caption)` });
      }
      if (b.fileName !== undefined && !b.documentUrl) ctx.addIssue({ code: 'custom', path: ['fileName'], message: 'only goes with documentUrl' });
      if (b.viewOnce && !(b.imageUrl || b.videoUrl || b.audioUrl))
        ctx.addIssue({ code: 'custom', path: ['viewOnce'], message: 'only goes with imageUrl, videoUrl or audioUrl' });
      if (b.contact && !participantJid(b.contact.phone))
        ctx.addIssue({ code: 'custom', path: ['contact', 'phone'], message: 'must be a phone number in E.164 format' });
      b.mentions?.forEach((m, i) => {
        if (!participantJid(m)) ctx.addIssue({ code: 'custom', path: ['mentions', i], message: 'must be a phone number or a phone JID' });
      });
    }),
);

/** What a send, an edit or a resend answers. */
export const sendResult = z.lazy(() => success(z.object({ msgId: z.int(), jid: z.string(), status: z.string() })));

export function sendMessageRoutes(deps: RouteDeps): RouteGroup {
  const { sessions, messages } = deps;
  const group = deps.api.group({ prefixes: ['/api/send-message'], envelope: 'messaging' });
  group.route({
    method: 'POST',
    path: '/api/send-message',
    summary: 'Send a message: text, image, video, document, audio, sticker, contact, location or poll (chosen by which field is present)',
    tag: 'Messages',
    auth: sessions.credentials.sessionKey,
    body: sendBody,
    success: { schema: sendResult },
    errors: {
      ...NOT_CONNECTED,
      429: 'Account protection: one message per interval: `{message, retry_after}`',
      503: 'The network is briefly unavailable; retry with backoff: `{success: false, error, message}`',
    },
    async handler(ctx, { auth, body }) {
      ctx.body = { success: true, data: await messages.send(sessions.connected(auth), body satisfies SendRequest) };
    },
  });
  return group;
}
