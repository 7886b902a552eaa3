/**
 * What a send becomes for Baileys: the gateway's content kinds (`OutgoingContent`) as
 * `AnyMessageContent` (media as bytes, which Baileys encrypts and uploads), and the options of
 * `sendMessage` (the message id the gateway chose, the quoted message of a reply). Typed against
 * Baileys' own declarations, so a wrong shape fails `tsc`.
 */
import type { AnyMessageContent, MiscMessageGenerationOptions, proto, WAMessage } from 'baileys';
import { digitsOf, fileNameOf, mimetypeOf } from '../nodes.ts';
import type { MediaType, MessageNode, OutgoingMessage } from '../types.ts';
import type { FetchedMedia } from './media-fetch.ts';

/** The bytes of a media URL, with a file name when the source knows one. */
export type MediaSource = (url: string, type: MediaType) => Promise<FetchedMedia & { fileName?: string | null }>;

/** The request field a media type comes from, for error messages. */
export const MEDIA_URL_FIELD: Readonly<Record<MediaType, string>> = {
  image: 'imageUrl',
  video: 'videoUrl',
  document: 'documentUrl',
  audio: 'audioUrl',
  sticker: 'stickerUrl',
};

/** A vCard for a contact card, as WhatsApp clients write them. */
export function vcardOf(name: string, phone: string): string {
  const digits = digitsOf(phone);
  const escaped = name.replace(/[\\;,]/g, (c) => `\\${c}`).replace(/\r?\n/g, ' ');
  return `BEGIN:VCARD\nVERSION:3.0\nFN:${escaped}\nTEL;type=CELL;type=VOICE;waid=${digits}:+${digits}\nEND:VCARD`;
}

export async function contentOf(out: OutgoingMessage, media: MediaSource): Promise<AnyMessageContent> {
  const c = out.content;
  const mentions = out.mentions.length ? { mentions: out.mentions } : {};
  switch (c.type) {
    case 'text':
      return { text: c.text, ...mentions };
    case 'contact':
      return { contacts: { displayName: c.name, contacts: [{ displayName: c.name, vcard: vcardOf(c.name, c.phone) }] } };
    case 'location':
      return {
        location: {
          degreesLatitude: c.latitude,
          degreesLongitude: c.longitude,
          ...(c.name ? { name: c.name } : {}),
          ...(c.address ? { address: c.address } : {}),
        },
      };
    case 'poll':
      // selectableCount 0 lets the voter pick any number of options; 1 exactly one.
      return { poll: { name: c.question, values: c.options, selectableCount: c.multiSelect ? 0 : 1 } };
    default: {
      const file = await media(c.url, c.type);
      const mimetype =
        c.type === 'sticker' ? 'image/webp' : file.mimetype && file.mimetype !== 'application/octet-stream' ? file.mimetype : mimetypeOf(c.url, c.type);
      const viewOnce = c.viewOnce ? { viewOnce: true } : {};
      switch (c.type) {
        case 'image':
          return { image: file.bytes, mimetype, ...(c.caption ? { caption: c.caption } : {}), ...mentions, ...viewOnce };
        case 'video':
          return { video: file.bytes, mimetype, ...(c.caption ? { caption: c.caption } : {}), ...mentions, ...viewOnce };
        case 'audio':
          return { audio: file.bytes, mimetype, ptt: true, ...viewOnce };
        case 'sticker':
          return { sticker: file.bytes, mimetype };
        case 'document':
          return {
            document: file.bytes,
            mimetype,
            fileName: c.fileName ?? file.fileName ?? fileNameOf(c.url),
            ...(c.caption ? { caption: c.caption } : {}),
            ...mentions,
          };
      }
    }
  }
}

/** `sendMessage` options: the gateway's message id, and the message replied to. */
export function sendOptions(out: OutgoingMessage, message: (node: MessageNode) => proto.IMessage): MiscMessageGenerationOptions {
  const quoted: WAMessage | undefined = out.quoted
    ? {
        key: {
          id: out.quoted.key.id,
          remoteJid: out.quoted.key.remoteJid,
          fromMe: out.quoted.key.fromMe,
          ...(out.quoted.key.participant ? { participant: out.quoted.key.participant } : {}),
        },
        message: out.quoted.message ? message(out.quoted.message) : { conversation: '' },
      }
    : undefined;
  return { messageId: out.id, ...(quoted ? { quoted } : {}) };
}
