/**
 * JIDs and message nodes as WhatsApp shapes them, shared by every adapter: recipients in the
 * forms WasenderAPI accepts (E.164, group JID, newsletter JID), and the `proto.Message` JSON of
 * each content kind.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { WharfError } from '../../../core/errors.ts';
import type { ChatKind, MediaType, MessageKey, MessageNode, OutgoingContent } from './types.ts';

const E164 = /^\+?[1-9]\d{6,14}$/;

/** `+<digits>` for a phone number in E.164 (spaces, dashes, dots and parentheses ignored); null otherwise. */
export function normalizePhone(input: string): string | null {
  const compact = input.replace(/[\s().-]/g, '');
  return E164.test(compact) ? `+${compact.replace(/^\+/, '')}` : null;
}

export const digitsOf = (phone: string): string => phone.replace(/\D/g, '');
export const phoneJid = (digits: string): string => `${digits}@s.whatsapp.net`;
export const lidJid = (lid: string): string => `${lid}@lid`;

/** The chat JID and its kind for a `to` value (E.164 or a JID); null when it is neither. */
export function recipientOf(to: string): { jid: string; chat: ChatKind } | null {
  const value = to.trim();
  const phone = normalizePhone(value);
  if (phone) return { jid: phoneJid(digitsOf(phone)), chat: 'personal' };
  if (/^[1-9]\d{6,14}@s\.whatsapp\.net$/.test(value)) return { jid: value, chat: 'personal' };
  if (/^\d{6,20}@lid$/.test(value)) return { jid: value, chat: 'personal' };
  if (/^\d[\d-]{5,40}@g\.us$/.test(value)) return { jid: value, chat: 'group' };
  if (/^\d{6,30}@newsletter$/.test(value)) return { jid: value, chat: 'newsletter' };
  return null;
}

/** A participant or contact given as E.164, bare digits or a phone JID, as a phone JID; null otherwise. */
export function participantJid(value: string): string | null {
  const trimmed = value.trim();
  if (/^[1-9]\d{6,14}@s\.whatsapp\.net$/.test(trimmed)) return trimmed;
  const phone = normalizePhone(trimmed);
  return phone ? phoneJid(digitsOf(phone)) : null;
}

/** A group's participants as phone JIDs, without repeats; 422 naming the entries that are neither a phone number nor a phone JID. */
export function participantJids(list: readonly string[]): string[] {
  const jids = list.map((p) => participantJid(p));
  const bad = list.filter((_, i) => !jids[i]);
  if (bad.length)
    throw new WharfError('validation_failed', 'The given data was invalid.', {
      fields: { participants: bad.map((b) => `${b} is not a phone number or phone JID`) },
    });
  return [...new Set(jids as string[])];
}

const MIME_BY_EXT: ReadonlyMap<string, string> = new Map(
  Object.entries({
    '.jpg': 'image/jpeg',
    '.jpeg': 'image/jpeg',
    '.png': 'image/png',
    '.gif': 'image/gif',
    '.webp': 'image/webp',
    '.mp4': 'video/mp4',
    '.3gp': 'video/3gpp',
    '.mov': 'video/quicktime',
    '.mp3': 'audio/mpeg',
    '.ogg': 'audio/ogg; codecs=opus',
    '.opus': 'audio/ogg; codecs=opus',
    '.aac': 'audio/aac',
    '.m4a': 'audio/mp4',
    '.amr': 'audio/amr',
    '.pdf': 'application/pdf',
    '.txt': 'text/plain',
    '.csv': 'text/csv',
    '.doc': 'application/msword',
    '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    '.xls': 'application/vnd.ms-excel',
    '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    '.zip': 'application/zip',
  }),
);

const DEFAULT_MIME: Readonly<Record<MediaType, string>> = {
  image: 'image/jpeg',
  video: 'video/mp4',
  audio: 'audio/ogg; codecs=opus',
  document: 'application/octet-stream',
  sticker: 'image/webp',
};

/** The last path segment of a URL (for a document's default file name). */
export function fileNameOf(url: string): string {
  try {
    return decodeURIComponent(path.posix.basename(new URL(url).pathname)) || 'file';
  } catch {
    return 'file';
  }
}

export function mimetypeOf(url: string, type: MediaType): string {
  if (type === 'sticker') return 'image/webp';
  return MIME_BY_EXT.get(path.posix.extname(fileNameOf(url)).toLowerCase()) ?? DEFAULT_MIME[type];
}

/** The node field of each media type. */
export const MEDIA_FIELD: Readonly<Record<MediaType, string>> = {
  image: 'imageMessage',
  video: 'videoMessage',
  audio: 'audioMessage',
  document: 'documentMessage',
  sticker: 'stickerMessage',
};

/** The media part of a message node (unwrapping view-once), with its type; undefined when it has none. */
export function mediaOf(node: MessageNode): { type: MediaType; media: Record<string, unknown> } | undefined {
  const inner =
    (node.viewOnceMessage as { message?: MessageNode } | undefined)?.message ??
    (node.viewOnceMessageV2 as { message?: MessageNode } | undefined)?.message ??
    node;
  for (const [type, field] of Object.entries(MEDIA_FIELD) as [MediaType, string][]) {
    const media = inner[field];
    if (media && typeof media === 'object') return { type, media: media as Record<string, unknown> };
  }
  return undefined;
}

/** The readable text of a node (conversation, extended text or a caption), if any. */
export function textOf(node: MessageNode | null): string | null {
  if (!node) return null;
  if (typeof node.conversation === 'string') return node.conversation;
  const ext = node.extendedTextMessage as { text?: unknown } | undefined;
  if (typeof ext?.text === 'string') return ext.text;
  const media = mediaOf(node);
  return typeof media?.media.caption === 'string' ? media.media.caption : null;
}

export interface NodeOptions {
  mentions: string[];
  quoted?: { key: MessageKey; message: MessageNode | null };
  /** Extra fields of a media node (url, mediaKey, hashes) when the network stored the bytes. */
  media?: Record<string, unknown>;
}

/** The `proto.Message` JSON for a content kind. */
export function messageNode(content: OutgoingContent, options: NodeOptions): MessageNode {
  const contextInfo: Record<string, unknown> = {};
  if (options.mentions.length) contextInfo.mentionedJid = options.mentions;
  if (options.quoted) {
    contextInfo.stanzaId = options.quoted.key.id;
    contextInfo.participant = options.quoted.key.participant ?? options.quoted.key.remoteJid;
    if (options.quoted.message) contextInfo.quotedMessage = options.quoted.message;
  }
  const context = Object.keys(contextInfo).length ? { contextInfo } : {};
  switch (content.type) {
    case 'text':
      return Object.keys(context).length ? { extendedTextMessage: { text: content.text, ...context } } : { conversation: content.text };
    case 'contact': {
      const digits = digitsOf(content.phone);
      const vcard = `BEGIN:VCARD\nVERSION:3.0\nFN:${content.name}\nTEL;type=CELL;waid=${digits}:+${digits}\nEND:VCARD`;
      return { contactMessage: { displayName: content.name, vcard, ...context } };
    }
    case 'location':
      return {
        locationMessage: {
          degreesLatitude: content.latitude,
          degreesLongitude: content.longitude,
          ...(content.name ? { name: content.name } : {}),
          ...(content.address ? { address: content.address } : {}),
          ...context,
        },
      };
    case 'poll':
      return {
        pollCreationMessage: {
          name: content.question,
          options: content.options.map((optionName) => ({ optionName })),
          selectableOptionsCount: content.multiSelect ? 0 : 1,
          ...context,
        },
      };
    default: {
      const field = MEDIA_FIELD[content.type];
      const media: Record<string, unknown> = {
        url: content.url,
        mimetype: mimetypeOf(content.url, content.type),
        ...(content.type === 'document' ? { fileName: content.fileName ?? fileNameOf(content.url) } : {}),
        ...(content.caption && content.type !== 'sticker' && content.type !== 'audio' ? { caption: content.caption } : {}),
        ...(content.type === 'audio' ? { ptt: true } : {}),
        ...options.media,
        ...context,
      };
      if (content.viewOnce && (content.type === 'image' || content.type === 'video' || content.type === 'audio')) {
        return { viewOnceMessageV2: { message: { [field]: { ...media, viewOnce: true } } } };
      }
      return { [field]: media };
    }
  }
}

/** A fresh message id in WhatsApp's style (`3EB0` + hex). */
export function newMessageId(): string {
  return `3EB0${randomBytes(16).toString('hex').toUpperCase()}`;
}
