/**
 * The account's contacts (session API key), `/api/contacts`: list, save, read, picture, block,
 * unblock. Each change is written to the session's audit log.
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import { participantJid } from '../networks/nodes.ts';
import type { Contact } from '../networks/types.ts';
import { emptyBody, invalid, listOrPage, listQuery, NOT_CONNECTED, type RouteDeps, success } from './common.ts';

const LID = /^(\d{6,20})@lid$/;

/** A contact named in a path: E.164 (with or without +), a phone JID or a LID JID; 422 otherwise. */
function contactParam(value: string | undefined, field = 'jid'): string {
  const v = (value ?? '').trim();
  if (participantJid(v) || LID.test(v)) return v;
  throw invalid(field, `${field} must be a phone number in E.164 format, a phone JID (…@s.whatsapp.net) or a LID (…@lid)`);
}

/** A contact as WasenderAPI and Baileys show one. */
function contactView(c: Contact) {
  return {
    id: c.id,
    lid: c.lid,
    phoneNumber: c.id,
    name: c.name,
    notify: c.notify,
    verifiedName: null,
    imgUrl: c.imgUrl,
    status: c.status,
    blocked: c.blocked,
  };
}

const contactSchema = z.lazy(() =>
  z.object({
    id: z.string(),
    lid: z.string().nullable(),
    phoneNumber: z.string(),
    name: z.string().nullable(),
    notify: z.string().nullable(),
    verifiedName: z.string().nullable(),
    imgUrl: z.string().nullable(),
    status: z.string().nullable(),
    blocked: z.boolean(),
  }),
);

const saveBody = z.lazy(() =>
  z.strictObject({
    jid: z
      .string()
      .min(1)
      .max(64)
      .refine((v) => participantJid(v) !== null, { message: 'must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)' })
      .describe('The contact: E.164 or a phone JID.'),
    fullName: z.string().trim().min(1).max(256).describe('The name to save.'),
    saveOnPrimaryAddressbook: z.boolean().optional().describe("Also save it in the phone's address book (WhatsApp sessions; the sandbox keeps one book)."),
  }),
);

export function contactRoutes(deps: RouteDeps): RouteGroup {
  const { sessions, directory } = deps;
  const group = deps.api.group({ prefixes: ['/api/contacts'], envelope: 'messaging' });
  const auth = sessions.credentials.sessionKey;
  const tag = 'Contacts';

  group.route({
    method: 'GET',
    path: '/api/contacts',
    summary: "The account's contacts (?paginated=true&page&limit for a Laravel paginator)",
    tag,
    auth,
    query: listQuery,
    success: { schema: z.lazy(() => success(z.array(contactSchema))) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, query }) {
      const { session, network } = sessions.connected(auth);
      ctx.body = { success: true, data: listOrPage((await network.contacts(session)).map(contactView), query) };
    },
  });

  group.route({
    method: 'PUT',
    path: '/api/contacts',
    summary: 'Save a contact (create or rename); emits contacts.upsert or contacts.update',
    tag,
    auth,
    body: saveBody,
    success: { schema: z.lazy(() => success(contactSchema)) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, body }) {
      const contact = await directory.saveContact(sessions.connected(auth), { jid: body.jid, fullName: body.fullName });
      ctx.body = { success: true, data: contactView(contact) };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/contacts/:jid',
    summary: 'One contact, by E.164 number, phone JID or LID',
    tag,
    auth,
    success: { schema: z.lazy(() => success(contactSchema)) },
    errors: { 404: 'Not among the contacts: `{success: false, error, message}`', ...NOT_CONNECTED },
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const contact = await network.contact(session, contactParam(params.jid));
      if (!contact) throw new WharfError('not_found', 'Contact not found');
      ctx.body = { success: true, data: contactView(contact) };
    },
  });

  for (const path of ['/api/contacts/:jid/picture', '/api/contacts/:jid/profile-picture']) {
    group.route({
      method: 'GET',
      path,
      summary: `A contact's profile picture URL (null when none is set or visible)${path.endsWith('profile-picture') ? ' (Laravel SDK spelling)' : ''}`,
      tag,
      auth,
      success: { schema: z.lazy(() => success(z.object({ imgUrl: z.string().nullable() }))) },
      errors: NOT_CONNECTED,
      async handler(ctx, { auth, params }) {
        const { session, network } = sessions.connected(auth);
        ctx.body = { success: true, data: { imgUrl: await network.profilePicture(session, contactParam(params.jid)) } };
      },
    });
  }

  for (const action of ['block', 'unblock'] as const) {
    group.route({
      method: 'POST',
      path: `/api/contacts/:jid/${action}`,
      summary: action === 'block' ? 'Block a contact: its messages are no longer delivered to this account' : 'Unblock a contact',
      tag,
      auth,
      body: emptyBody,
      success: { schema: z.lazy(() => success(z.object({ message: z.string(), jid: z.string() }))) },
      errors: NOT_CONNECTED,
      async handler(ctx, { auth, params }) {
        const connected = sessions.connected(auth);
        const jid = contactParam(params.jid);
        await directory.setBlocked(connected, jid, action === 'block');
        ctx.body = { success: true, data: { message: action === 'block' ? 'Contact blocked' : 'Contact unblocked', jid } };
      },
    });
  }

  return group;
}
