/**
 * The 22 event names of the messaging gateway (the spec's spelling) and WasenderAPI's aliases,
 * accepted when subscribing and stored in the canonical spelling.
 */

export const EVENT_NAMES = [
  'messages.received',
  'messages.upsert',
  'message.sent',
  'messages.update',
  'messages.delete',
  'messages.reaction',
  'message-receipt.update',
  'messages-personal',
  'messages-group',
  'messages-newsletter',
  'session.status',
  'qrcode.updated',
  'chats.upsert',
  'chats.update',
  'chats.delete',
  'groups.upsert',
  'groups.update',
  'group-participants.update',
  'contacts.upsert',
  'contacts.update',
  'poll.results',
  'call.received',
] as const;

export type EventName = (typeof EVENT_NAMES)[number];

/** WasenderAPI's spellings of the filtered views (its SDK's `WasenderWebhookEventType`). */
export const EVENT_ALIASES: ReadonlyMap<string, EventName> = new Map([
  ['messages-personal.received', 'messages-personal'],
  ['messages-group.received', 'messages-group'],
  ['messages-newsletter.received', 'messages-newsletter'],
]);

const CANONICAL: ReadonlySet<string> = new Set(EVENT_NAMES);

/** The canonical name of an event name or alias; undefined when it is neither. */
export function canonicalEvent(name: string): EventName | undefined {
  if (CANONICAL.has(name)) return name as EventName;
  return EVENT_ALIASES.get(name);
}

/** The filtered view of messages.received for a chat kind. */
export const VIEW_OF_CHAT = Object.freeze({
  personal: 'messages-personal',
  group: 'messages-group',
  newsletter: 'messages-newsletter',
} as const satisfies Record<string, EventName>);
