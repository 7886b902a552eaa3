/**
 * Between Baileys' objects and what the gateway records and serves: JIDs (phone-number, LID,
 * group, newsletter), message nodes as JSON (bytes as base64, 64-bit numbers as strings, enums by
 * name: protobuf's JSON form, what `JSON.stringify` gives for a decoded message) and back, and
 * message keys with the fields WasenderAPI's webhooks carry for LID addressing.
 *
 * A node coming back (`/api/decrypt-media`) is rebuilt with protobuf's `fromObject`, which reads
 * base64 strings as bytes; the other shapes a JSON round trip gives bytes (`{type: 'Buffer',
 * data}`, an array of numbers, an object keyed "0", "1", ...) are turned back into bytes first, so a
 * `mediaKey` arrives as the same 32 bytes whichever way the caller serialized it.
 */
import type { proto, WAMessageKey } from 'baileys';
import type { ChatKind, MessageKey, MessageNode } from '../types.ts';
import type { WhatsAppRuntime } from './load.ts';

export const PN_SERVER = 's.whatsapp.net';
export const LID_SERVER = 'lid';

/** The user part of a JID, without its device: `4915112345678:3@s.whatsapp.net` -> `4915112345678`. */
export function userOf(jid: string): string {
  const at = jid.indexOf('@');
  const user = at < 0 ? jid : jid.slice(0, at);
  return user.split(':')[0]!.split('_')[0]!;
}

export function serverOf(jid: string): string {
  const at = jid.indexOf('@');
  return at < 0 ? '' : jid.slice(at + 1);
}

export const isLid = (jid: string | null | undefined): jid is string => !!jid && serverOf(jid) === LID_SERVER;
export const isPn = (jid: string | null | undefined): jid is string => !!jid && (serverOf(jid) === PN_SERVER || serverOf(jid) === 'c.us');
export const isGroup = (jid: string | null | undefined): boolean => !!jid && serverOf(jid) === 'g.us';
export const isNewsletter = (jid: string | null | undefined): boolean => !!jid && serverOf(jid) === 'newsletter';
export const isBroadcast = (jid: string | null | undefined): boolean => !!jid && serverOf(jid) === 'broadcast';

/** A user JID without its device (`user@s.whatsapp.net`, `user@lid`); other JIDs as they are. */
export function normalizeJid(jid: string): string {
  const server = serverOf(jid);
  if (server === 'c.us') return `${userOf(jid)}@${PN_SERVER}`;
  if (server === PN_SERVER || server === LID_SERVER) return `${userOf(jid)}@${server}`;
  return jid;
}

export function chatOf(remoteJid: string): ChatKind {
  if (isGroup(remoteJid)) return 'group';
  if (isNewsletter(remoteJid)) return 'newsletter';
  if (isBroadcast(remoteJid)) return 'broadcast';
  return 'personal';
}

/** A Long, a number or a numeric string as a number (Unix seconds, lengths); 0 when absent. */
export function toNumber(value: unknown): number {
  if (value === null || value === undefined) return 0;
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return Number(value) || 0;
  if (typeof value === 'object' && 'toNumber' in value && typeof (value as { toNumber: unknown }).toNumber === 'function') {
    return (value as { toNumber(): number }).toNumber();
  }
  return Number(value) || 0;
}

/**
 * Any value Baileys hands over (contacts, chats, groups, calls) made safe for JSON: bytes as
 * base64, Longs and bigints as numbers or strings, Dates as ISO strings, no functions; nested
 * no deeper than `maxDepth`.
 */
export function jsonSafe(value: unknown, maxDepth = 12): unknown {
  if (value === null || value === undefined) return value ?? null;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  if (typeof value !== 'object') return value;
  if (maxDepth <= 0) return null;
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (value instanceof Date) return value.toISOString();
  if ('low' in value && 'high' in value && 'unsigned' in value) return toNumber(value);
  if (Array.isArray(value)) return value.map((v) => jsonSafe(v, maxDepth - 1) ?? null);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const safe = jsonSafe(v, maxDepth - 1);
    if (safe !== undefined) out[k] = safe;
  }
  return out;
}

/** A message node as JSON: protobuf's JSON form (bytes base64, 64-bit numbers as strings, enums by name). */
export function jsonOfMessage(runtime: Pick<WhatsAppRuntime, 'proto'>, message: proto.IMessage): MessageNode {
  return runtime.proto.Message.fromObject(message).toJSON() as MessageNode;
}

/** Bytes in whatever shape a JSON round trip left them, or undefined when `value` is not bytes. */
function bytesOf(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.length > 0 && value.every((b) => Number.isInteger(b) && b >= 0 && b <= 255) ? Uint8Array.from(value) : undefined;
  if (!value || typeof value !== 'object') return undefined;
  const record = value as Record<string, unknown>;
  // Node's Buffer#toJSON and Baileys' BufferJSON.
  if (record.type === 'Buffer' && Object.keys(record).length === 2) {
    if (typeof record.data === 'string') return Buffer.from(record.data, 'base64');
    return bytesOf(record.data);
  }
  // A Uint8Array through JSON.stringify: {"0": 12, "1": 200, ...}.
  const keys = Object.keys(record);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) {
    const values = keys.map((k) => record[k]);
    if (values.every((b) => Number.isInteger(b) && (b as number) >= 0 && (b as number) <= 255)) return Uint8Array.from(values as number[]);
  }
  return undefined;
}

/** Turns every serialized byte array inside a parsed JSON value back into bytes. */
function revive(value: unknown, depth = 0): unknown {
  if (depth > 32 || value === null || typeof value !== 'object') return value;
  const bytes = Array.isArray(value) ? undefined : bytesOf(value);
  if (bytes) return bytes;
  if (Array.isArray(value)) return value.map((v) => revive(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = revive(v, depth + 1);
  return out;
}

/** A message node from JSON (a webhook's `message`, as a caller passes it back), as protobuf. */
export function messageOfJson(runtime: Pick<WhatsAppRuntime, 'proto'>, node: MessageNode): proto.Message {
  return runtime.proto.Message.fromObject(revive(node) as Record<string, unknown>);
}

/** Where the adapter learns which LID is which phone number. */
export interface LidDirectory {
  pnOfLid(lid: string): Promise<string | undefined>;
  lidOfPn(pn: string): Promise<string | undefined>;
}

/**
 * A key as the gateway records it: id, remoteJid, remoteJidAlt (the phone-number JID of a
 * LID-addressed chat, or the LID of a phone-addressed one, when known), fromMe; for groups the
 * participant and participantAlt; and WasenderAPI's sender fields: senderPn, cleanedSenderPn
 * (digits only), senderLid, addressingMode.
 */
export async function keyOf(key: WAMessageKey, lids: LidDirectory): Promise<MessageKey> {
  const remoteJid = key.remoteJid ?? '';
  const out: MessageKey = { id: key.id ?? '', remoteJid, fromMe: key.fromMe === true };
  const chat = chatOf(remoteJid);
  if (chat === 'personal') {
    const alt =
      key.remoteJidAlt ??
      (isLid(remoteJid) ? await lids.pnOfLid(normalizeJid(remoteJid)) : isPn(remoteJid) ? await lids.lidOfPn(normalizeJid(remoteJid)) : undefined);
    if (alt) out.remoteJidAlt = alt;
  }
  if (key.participant) out.participant = key.participant;
  if (chat === 'group' && key.participant) {
    const alt =
      key.participantAlt ?? (isLid(key.participant) ? await lids.pnOfLid(normalizeJid(key.participant)) : await lids.lidOfPn(normalizeJid(key.participant)));
    if (alt) out.participantAlt = alt;
  }
  if (chat === 'personal' || chat === 'group') {
    const sender = chat === 'group' ? key.participant : remoteJid;
    const senderAlt = chat === 'group' ? out.participantAlt : out.remoteJidAlt;
    if (sender) {
      const pn = isPn(sender) ? normalizeJid(sender) : isPn(senderAlt) ? normalizeJid(senderAlt) : undefined;
      const lid = isLid(sender) ? normalizeJid(sender) : isLid(senderAlt) ? normalizeJid(senderAlt) : undefined;
      if (!out.fromMe) {
        if (pn) {
          out.senderPn = pn;
          out.cleanedSenderPn = userOf(pn);
        }
        if (lid) out.senderLid = lid;
      }
      out.addressingMode = key.addressingMode ?? (isLid(sender) ? 'lid' : 'pn');
    }
  }
  return out;
}

/** Pairs of (LID, phone number) a key reveals. */
export function lidPairsOf(key: WAMessageKey): { lid: string; pn: string }[] {
  const pairs: { lid: string; pn: string }[] = [];
  const pair = (a: string | null | undefined, b: string | null | undefined) => {
    if (isLid(a) && isPn(b)) pairs.push({ lid: normalizeJid(a), pn: normalizeJid(b) });
    else if (isPn(a) && isLid(b)) pairs.push({ lid: normalizeJid(b), pn: normalizeJid(a) });
  };
  pair(key.remoteJid, key.remoteJidAlt);
  pair(key.participant, key.participantAlt);
  return pairs;
}
