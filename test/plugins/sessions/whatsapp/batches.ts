/**
 * Event batches in the shapes Baileys 7 (rc14) emits them, written from its type declarations
 * and its source (decode-wa-message.js for keys with remoteJidAlt / participantAlt and
 * addressingMode, messages-recv.js for receipts and acks, process-message.js for edits, revokes
 * and reactions, groups.js for group updates). They are not captured from a live session (the
 * network cannot be reached from here): ids, numbers and keys are made up, the shapes are not.
 * Bytes are Uint8Arrays and 64-bit numbers Longs, as protobuf decoding leaves them.
 */
import { createHash } from 'node:crypto';
import type { BaileysEventMap, WAMessage } from 'baileys';
import Long from 'long';

export interface Party {
  /** Phone number digits. */
  digits: string;
  lid: string;
  name: string;
}

const ts = () => Math.floor(Date.now() / 1000);
let counter = 0;
/** A message id as WhatsApp phones make them (hex, 32 characters for iOS, 3A/3E prefixes...). */
export const messageId = () => `3A${(Date.now().toString(16) + (++counter).toString(16)).toUpperCase().padEnd(18, '0')}`;

/** A device list's metadata, as every 1:1 message from a phone carries it. */
const deviceContext = {
  deviceListMetadata: {
    senderKeyHash: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
    senderTimestamp: Long.fromNumber(ts(), true),
    recipientKeyHash: Uint8Array.of(9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
  },
  deviceListMetadataVersion: 2,
};

/** A text from a contact addressed by LID (how WhatsApp addresses most 1:1 chats now). */
export function lidText(from: Party, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [
      {
        key: { remoteJid: `${from.lid}@lid`, remoteJidAlt: `${from.digits}@s.whatsapp.net`, fromMe: false, id, addressingMode: 'lid' },
        messageTimestamp: ts(),
        pushName: from.name,
        broadcast: false,
        message: { conversation: text, messageContextInfo: deviceContext },
      },
    ],
  };
}

/** A text from a contact addressed by phone number (older chats), with no alternate JID in the key. */
export function pnText(from: Party, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [
      {
        key: { remoteJid: `${from.digits}@s.whatsapp.net`, fromMe: false, id },
        messageTimestamp: Long.fromNumber(ts(), true),
        pushName: from.name,
        message: { extendedTextMessage: { text, contextInfo: { expiration: 0 } } },
      },
    ],
  };
}

/** A group message: the chat is the group, the sender its participant (LID) with participantAlt. */
export function groupText(from: Party, groupJid: string, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [
      {
        key: {
          remoteJid: groupJid,
          fromMe: false,
          id,
          participant: `${from.lid}@lid`,
          participantAlt: `${from.digits}@s.whatsapp.net`,
          addressingMode: 'lid',
        },
        messageTimestamp: ts(),
        pushName: from.name,
        message: { conversation: text, messageContextInfo: { messageSecret: Uint8Array.from({ length: 32 }, (_, i) => i) } },
      },
    ],
  };
}

/** A channel (newsletter) post: no sender, a server id. */
export function newsletterPost(newsletterJid: string, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [{ key: { remoteJid: newsletterJid, fromMe: false, id, server_id: '117' }, messageTimestamp: ts(), message: { conversation: text } }],
  };
}

/** A status update (status@broadcast). */
export function statusPost(from: Party, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [
      {
        key: { remoteJid: 'status@broadcast', fromMe: false, id, participant: `${from.lid}@lid`, participantAlt: `${from.digits}@s.whatsapp.net` },
        messageTimestamp: ts(),
        pushName: from.name,
        message: { extendedTextMessage: { text } },
      },
    ],
  };
}

/** An image message (LID-addressed), its media fields as WhatsApp sends them. */
export function image(
  from: Party,
  media: { directPath: string; mediaKey: Uint8Array; fileSha256: Uint8Array; fileEncSha256: Uint8Array; fileLength: number },
  id = messageId(),
): BaileysEventMap['messages.upsert'] {
  return {
    type: 'notify',
    messages: [
      {
        key: { remoteJid: `${from.lid}@lid`, remoteJidAlt: `${from.digits}@s.whatsapp.net`, fromMe: false, id, addressingMode: 'lid' },
        messageTimestamp: ts(),
        pushName: from.name,
        message: {
          imageMessage: {
            url: `https://mmg.whatsapp.net${media.directPath}?ccb=11-4&oh=01_Q5Aa&oe=6800&_nc_sid=5e03e0&mms3=true`,
            mimetype: 'image/png',
            caption: 'look',
            fileSha256: media.fileSha256,
            fileLength: Long.fromNumber(media.fileLength, true),
            height: 1,
            width: 1,
            mediaKey: media.mediaKey,
            fileEncSha256: media.fileEncSha256,
            directPath: `${media.directPath}?ccb=11-4&oh=01_Q5Aa&oe=6800&_nc_sid=5e03e0`,
            mediaKeyTimestamp: Long.fromNumber(ts(), false),
            jpegThumbnail: Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0, 0x10),
          },
          messageContextInfo: deviceContext,
        },
      },
    ],
  };
}

/** A message sent from the phone itself (another device of the account): fromMe, type append. */
export function sentFromPhone(to: Party, text: string, id = messageId()): BaileysEventMap['messages.upsert'] {
  return {
    type: 'append',
    messages: [
      {
        key: { remoteJid: `${to.lid}@lid`, remoteJidAlt: `${to.digits}@s.whatsapp.net`, fromMe: true, id },
        messageTimestamp: ts(),
        message: { conversation: text },
      },
    ],
  };
}

/** An edit of a message, as process-message.js reports it. */
export function edit(from: Party, id: string, text: string): BaileysEventMap['messages.update'] {
  return [
    {
      key: { remoteJid: `${from.lid}@lid`, fromMe: false, id },
      update: { message: { editedMessage: { message: { conversation: text } } }, messageTimestamp: Long.fromNumber(Date.now()) },
    },
  ];
}

/** A "delete for everyone" (REVOKE), as process-message.js reports it. */
export function revoke(from: Party, id: string): BaileysEventMap['messages.update'] {
  const key = { remoteJid: `${from.lid}@lid`, fromMe: false, id };
  return [{ key, update: { message: null, messageStubType: 1, key } }];
}

/** A reaction to a message. */
export function reaction(from: Party, target: { remoteJid: string; id: string; fromMe: boolean }, text: string): BaileysEventMap['messages.reaction'] {
  return [
    { key: target, reaction: { key: { remoteJid: `${from.lid}@lid`, fromMe: false, id: messageId() }, text, senderTimestampMs: Long.fromNumber(Date.now()) } },
  ];
}

/** A delivery or read receipt of a message this account sent (1:1): messages.update with a status. */
export function receipt(to: Party, id: string, status: 2 | 3 | 4 | 5): BaileysEventMap['messages.update'] {
  return [{ key: { remoteJid: `${to.lid}@lid`, fromMe: true, id }, update: { status, messageTimestamp: ts() } }];
}

/** A read receipt in a group: message-receipt.update with the reader. */
export function groupRead(reader: Party, groupJid: string, id: string): BaileysEventMap['message-receipt.update'] {
  return [{ key: { remoteJid: groupJid, fromMe: true, id }, receipt: { userJid: `${reader.digits}@s.whatsapp.net`, readTimestamp: ts() } }];
}

/** Votes on a poll this account sent, as Baileys reports them once decrypted. */
export function pollVotes(pollKey: { remoteJid: string; id: string }, votes: { voter: Party; options: string[] }[]): BaileysEventMap['messages.update'] {
  return [
    {
      key: { ...pollKey, fromMe: true },
      update: {
        pollUpdates: votes.map(({ voter, options }) => ({
          pollUpdateMessageKey: { remoteJid: `${voter.lid}@lid`, fromMe: false, id: messageId() },
          vote: { selectedOptions: options.map((o) => createHash('sha256').update(o).digest()) },
          senderTimestampMs: Long.fromNumber(Date.now()),
        })),
      },
    },
  ];
}

/** Group changes: a new subject, a participant added (LID with its phone number). */
export function groupChanges(groupJid: string, author: Party, added: Party): Pick<BaileysEventMap, 'groups.update' | 'group-participants.update'> {
  return {
    'groups.update': [{ id: groupJid, subject: 'Renamed on the phone', author: `${author.lid}@lid` }],
    'group-participants.update': {
      id: groupJid,
      author: `${author.lid}@lid`,
      authorPn: `${author.digits}@s.whatsapp.net`,
      participants: [{ id: `${added.lid}@lid`, phoneNumber: `${added.digits}@s.whatsapp.net`, admin: null }],
      action: 'add',
    },
  };
}

/** What pairing and history sync bring: contacts with both identities, and LID mappings. */
export function history(contacts: Party[]): BaileysEventMap['messaging-history.set'] {
  return {
    chats: [],
    contacts: contacts.map((c) => ({ id: `${c.lid}@lid`, phoneNumber: `${c.digits}@s.whatsapp.net`, notify: c.name })),
    messages: [],
    lidPnMappings: contacts.map((c) => ({ lid: `${c.lid}@lid`, pn: `${c.digits}@s.whatsapp.net` })),
    isLatest: true,
    progress: 100,
    syncType: 0 as never,
  };
}

/** An incoming call offer. */
export function callOffer(from: Party): BaileysEventMap['call'] {
  return [
    {
      chatId: `${from.lid}@lid`,
      from: `${from.lid}@lid`,
      callerPn: `${from.digits}@s.whatsapp.net`,
      id: messageId(),
      date: new Date(),
      isVideo: false,
      isGroup: false,
      status: 'offer',
      offline: false,
    },
  ];
}

export type { WAMessage };
