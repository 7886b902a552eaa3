/**
 * The account's directory (session API key): contacts (`/api/contacts...`: list, save, read,
 * picture, block, unblock), presence (`POST /api/send-presence-update`), and the number
 * lookups (`/api/on-whatsapp/{phone}`, `/api/lid-from-pn/{pn}`, `/api/pn-from-lid/{lid}`).
 */
import type { RouteGroup } from '../../../core/api.ts';
import type { Context } from 'koa';
import { z } from 'zod';
import { WharfError } from '../../../core/errors.ts';
import { digitsOf, normalizePhone, participantJid, recipientOf } from '../networks/nodes.ts';
import type { Contact, NetworkAdapter } from '../networks/types.ts';
import type { Actor } from '../store.ts';
import { requireConnected } from '../service.ts';
import type { SessionRecord } from '../types.ts';
import { actingOf, operation, paginated, type RouteDeps, success } from './common.ts';

const LID = /^(\d{6,20})@lid$/;

function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

/** A contact named in a path: E.164 (with or without +), a phone JID or a LID JID; 422 otherwise. */
export function contactParam(value: string | undefined, field = 'jid'): string {
  const v = (value ?? '').trim();
  if (participantJid(v) || LID.test(v)) return v;
  throw invalid(field, `${field} must be a phone number in E.164 format, a phone JID (…@s.whatsapp.net) or a LID (…@lid)`);
}

/** The actor of a session-scoped operation, for the audit log. */
export function keyActor(ctx: Context, session: SessionRecord): Actor {
  return { kind: 'sessionKey', id: String(session.id), userId: null, address: ctx.ip || null };
}

/** `?paginated=true&page&limit`: absent means the whole list. */
export const listQuery = z.strictObject({
  paginated: z.enum(['true', 'false', '1', '0']).optional().describe('true: answer a page (Laravel paginator) instead of the whole list. Implied by page or limit.'),
  page: z.coerce.number().int().min(1).max(1_000_000).optional().describe('Page number, from 1 (default 1).'),
  limit: z.coerce.number().int().min(1).max(1000).optional().describe('Rows per page (default 100, at most 1000).'),
});

/** The whole list, or one page of it in Laravel's paginator shape. */
export function listOrPage<T>(rows: T[], query: z.output<typeof listQuery>) {
  const wanted = query.paginated === undefined ? query.page !== undefined || query.limit !== undefined : query.paginated === 'true' || query.paginated === '1';
  if (!wanted) return rows;
  const page = query.page ?? 1;
  const limit = query.limit ?? 100;
  return paginated(rows.slice((page - 1) * limit, page * limit), rows.length, page, limit);
}

/** A contact as WasenderAPI and Baileys show one. */
export function contactView(c: Contact) {
  return { id: c.id, lid: c.lid, phoneNumber: c.id, name: c.name, notify: c.notify, verifiedName: null, imgUrl: c.imgUrl, status: c.status, blocked: c.blocked };
}

const contactSchema = z.object({
  id: z.string(),
  lid: z.string().nullable(),
  phoneNumber: z.string(),
  name: z.string().nullable(),
  notify: z.string().nullable(),
  verifiedName: z.string().nullable(),
  imgUrl: z.string().nullable(),
  status: z.string().nullable(),
  blocked: z.boolean(),
});

const saveBody = z.strictObject({
  jid: z
    .string()
    .min(1)
    .max(64)
    .refine((v) => participantJid(v) !== null, { message: 'must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)' })
    .describe('The contact: E.164 or a phone JID.'),
  fullName: z.string().trim().min(1).max(256).describe('The name to save.'),
  saveOnPrimaryAddressbook: z.boolean().optional().describe("Also save it in the phone's address book (WhatsApp sessions; the sandbox keeps one book)."),
});

const emptyBody = z.strictObject({});

const presenceBody = z.strictObject({
  jid: z
    .string()
    .min(1)
    .max(128)
    .refine((v) => recipientOf(v) !== null, { message: 'must be a phone number in E.164 format, a phone JID, a LID or a group JID' })
    .describe('The chat: E.164, a phone JID, a LID or a group JID.'),
  type: z.enum(['composing', 'recording', 'available', 'unavailable', 'paused']).describe('What to show.'),
  delayMs: z.int().min(0).max(60_000).optional().describe('How long to hold the presence before it lapses, in milliseconds.'),
});

export function contactRoutes(deps: RouteDeps): { contacts: RouteGroup; presence: RouteGroup; lookups: RouteGroup } {
  const { sessions } = deps;
  const contacts = deps.api.group({ prefixes: ['/api/contacts'], envelope: 'messaging' });
  const presence = deps.api.group({ prefixes: ['/api/send-presence-update'], envelope: 'messaging' });
  const lookups = deps.api.group({ prefixes: ['/api/on-whatsapp', '/api/lid-from-pn', '/api/pn-from-lid'], envelope: 'messaging' });
  const tag = 'Contacts';
  const connected = (ctx: Context): { session: SessionRecord; network: NetworkAdapter } => {
    const { session, network } = actingOf(ctx);
    requireConnected(session, network);
    return { session, network };
  };
  const conflict409 = { 409: 'The session is not connected: `{success: false, error, message}`' };

  operation(
    deps,
    contacts,
    {
      method: 'GET',
      path: '/api/contacts',
      summary: "The account's contacts (?paginated=true&page&limit for a Laravel paginator)",
      tag,
      credential: 'sessionKey',
      query: listQuery,
      success: { schema: success(z.array(contactSchema)) },
      errors: conflict409,
    },
    async (ctx, { query }) => {
      const { session, network } = connected(ctx);
      ctx.body = { success: true, data: listOrPage((await network.contacts(session)).map(contactView), query) };
    },
  );

  operation(
    deps,
    contacts,
    {
      method: 'PUT',
      path: '/api/contacts',
      summary: 'Save a contact (create or rename); emits contacts.upsert or contacts.update',
      tag,
      credential: 'sessionKey',
      body: saveBody,
      success: { schema: success(contactSchema) },
      errors: conflict409,
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const contact = await network.upsertContact(session, { jid: body.jid, fullName: body.fullName });
      sessions.audit(session, keyActor(ctx, session), 'contact.saved', { jid: contact.id });
      ctx.body = { success: true, data: contactView(contact) };
    },
  );

  operation(
    deps,
    contacts,
    {
      method: 'GET',
      path: '/api/contacts/:jid',
      summary: 'One contact, by E.164 number, phone JID or LID',
      tag,
      credential: 'sessionKey',
      success: { schema: success(contactSchema) },
      errors: { 404: 'Not among the contacts: `{success: false, error, message}`', ...conflict409 },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const contact = await network.contact(session, contactParam(ctx.params.jid));
      if (!contact) throw new WharfError('not_found', 'Contact not found');
      ctx.body = { success: true, data: contactView(contact) };
    },
  );

  for (const path of ['/api/contacts/:jid/picture', '/api/contacts/:jid/profile-picture']) {
    operation(
      deps,
      contacts,
      {
        method: 'GET',
        path,
        summary: `A contact's profile picture URL (null when none is set or visible)${path.endsWith('profile-picture') ? ' (Laravel SDK spelling)' : ''}`,
        tag,
        credential: 'sessionKey',
        success: { schema: success(z.object({ imgUrl: z.string().nullable() })) },
        errors: conflict409,
      },
      async (ctx) => {
        const { session, network } = connected(ctx);
        ctx.body = { success: true, data: { imgUrl: await network.profilePicture(session, contactParam(ctx.params.jid)) } };
      },
    );
  }

  for (const action of ['block', 'unblock'] as const) {
    operation(
      deps,
      contacts,
      {
        method: 'POST',
        path: `/api/contacts/:jid/${action}`,
        summary: action === 'block' ? 'Block a contact: its messages are no longer delivered to this account' : 'Unblock a contact',
        tag,
        credential: 'sessionKey',
        body: emptyBody,
        success: { schema: success(z.object({ message: z.string(), jid: z.string() })) },
        errors: conflict409,
      },
      async (ctx) => {
        const { session, network } = connected(ctx);
        const jid = contactParam(ctx.params.jid);
        await network.setBlocked(session, jid, action === 'block');
        sessions.audit(session, keyActor(ctx, session), `contact.${action}ed`, { jid });
        ctx.body = { success: true, data: { message: action === 'block' ? 'Contact blocked' : 'Contact unblocked', jid } };
      },
    );
  }

  operation(
    deps,
    presence,
    {
      method: 'POST',
      path: '/api/send-presence-update',
      summary: 'Show a presence in a chat: composing, recording, available, unavailable or paused',
      tag: 'Presence',
      credential: 'sessionKey',
      body: presenceBody,
      success: { schema: success(z.object({ jid: z.string(), type: z.string(), delayMs: z.int().optional() })) },
      errors: conflict409,
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const chat = recipientOf(body.jid)!;
      await network.sendPresence(session, chat.jid, body.type, body.delayMs);
      ctx.body = { success: true, data: { jid: chat.jid, type: body.type, ...(body.delayMs !== undefined ? { delayMs: body.delayMs } : {}) } };
    },
  );

  operation(
    deps,
    lookups,
    {
      method: 'GET',
      path: '/api/on-whatsapp/:phone',
      summary: 'Whether a phone number has an account on the network, with its JID and LID',
      tag: 'Lookups',
      credential: 'sessionKey',
      success: { schema: success(z.object({ phone: z.string(), exists: z.boolean(), jid: z.string(), lid: z.string().nullable() })) },
      errors: conflict409,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const phone = normalizePhone(ctx.params.phone ?? '');
      if (!phone) throw invalid('phone', 'phone must be a phone number in E.164 format, for example +14155550123');
      const found = await network.onWhatsApp(session, phone);
      ctx.body = { success: true, data: { phone, exists: found.exists, jid: found.jid, lid: found.lid } };
    },
  );

  operation(
    deps,
    lookups,
    {
      method: 'GET',
      path: '/api/lid-from-pn/:pn',
      summary: 'The LID (…@lid) of a phone number',
      tag: 'Lookups',
      credential: 'sessionKey',
      success: { schema: success(z.object({ pn: z.string(), lid: z.string() })) },
      errors: { 404: 'No LID known for it: `{success: false, error, message}`', ...conflict409 },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const pn = participantJid(ctx.params.pn ?? '');
      if (!pn) throw invalid('pn', 'pn must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)');
      const lid = await network.lidFromPn(session, pn);
      if (!lid) throw new WharfError('not_found', 'No LID is known for this phone number');
      ctx.body = { success: true, data: { pn, lid } };
    },
  );

  operation(
    deps,
    lookups,
    {
      method: 'GET',
      path: '/api/pn-from-lid/:lid',
      summary: 'The phone number JID (…@s.whatsapp.net) behind a LID',
      tag: 'Lookups',
      credential: 'sessionKey',
      success: { schema: success(z.object({ lid: z.string(), pn: z.string(), phone: z.string() })) },
      errors: { 404: 'No phone number known for it: `{success: false, error, message}`', ...conflict409 },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const match = /^(\d{6,20})(?:@lid)?$/.exec((ctx.params.lid ?? '').trim());
      if (!match) throw invalid('lid', 'lid must be a LID such as 123456789012345@lid');
      const lid = `${match[1]}@lid`;
      const pn = await network.pnFromLid(session, lid);
      if (!pn) throw new WharfError('not_found', 'No phone number is known for this LID');
      ctx.body = { success: true, data: { lid, pn, phone: `+${digitsOf(pn)}` } };
    },
  );

  return { contacts, presence, lookups };
}

