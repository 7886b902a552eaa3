/**
 * Groups (session API key): list and create, metadata and participants, adding, removing,
 * promoting and demoting participants, settings, leaving, invite links and invites. The network
 * emits groups.upsert, groups.update and group-participants.update to every member session;
 * each change is also written to the acting session's audit log.
 *
 * A group the account is not a member of answers 404 like one that does not exist (WhatsApp
 * does not show it either); the spec gives 403 and 409 other meanings (wrong credential kind,
 * session not connected), which clients act on. Admin-only changes by a non-admin answer 422,
 * except participant changes, which answer 200 with a per-participant 403 as WhatsApp does.
 */
import { z } from 'zod';
import { displayName, once } from '../../../core/validate.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { participantJid } from '../networks/nodes.ts';
import type { GroupMetadata, GroupParticipant } from '../networks/types.ts';
import { emptyBody, invalid, listOrPage, listQuery, NOT_CONNECTED, type RouteDeps, success } from './common.ts';

const GROUP_JID = /^\d[\d-]{5,40}@g\.us$/;
const INVITE_LINK = /^(?:https?:\/\/)?chat\.whatsapp\.com\/(?:invite\/)?/i;
const INVITE_CODE = /^[A-Za-z0-9_-]{4,128}$/;

function groupParam(value: string | undefined): string {
  const v = (value ?? '').trim();
  if (!GROUP_JID.test(v)) throw invalid('jid', 'jid must be a group JID such as 120363012345678901@g.us');
  return v;
}

/** An invite code, or a chat.whatsapp.com link holding one. */
function inviteCode(value: string): string | null {
  const code = value.trim().replace(INVITE_LINK, '');
  return INVITE_CODE.test(code) ? code : null;
}

const participantList = z.lazy(() =>
  z
    .array(z.string().max(64))
    .min(1)
    .max(1024)
    .superRefine((list, ctx) => {
      list.forEach((p, i) => {
        if (!participantJid(p))
          ctx.addIssue({ code: 'custom', path: [i], message: 'must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)' });
      });
    })
    .describe('Phone numbers (E.164) or phone JIDs.'),
);

const createBody = z.lazy(() =>
  z.strictObject({
    name: displayName(100).describe('The group subject.'),
    participants: participantList.optional().describe('Members besides this account: phone numbers (E.164) or phone JIDs.'),
  }),
);
const participantsBody = z.lazy(() => z.strictObject({ participants: participantList }));
const updateParticipantsBody = z.lazy(() =>
  z.strictObject({
    action: z.enum(['promote', 'demote']).describe('Make admins, or plain members again.'),
    participants: participantList,
  }),
);
const settingsBody = z.lazy(() =>
  z
    .strictObject({
      subject: z.string().trim().min(1).max(100).optional().describe('New subject.'),
      description: z.string().max(2048).optional().describe('New description.'),
      announce: z.boolean().optional().describe('Only admins may send messages.'),
      restrict: z.boolean().optional().describe('Only admins may edit the group info.'),
    })
    .refine((b) => Object.keys(b).length > 0, { message: 'send at least one of subject, description, announce, restrict', path: ['body'] }),
);
const acceptBody = z.lazy(() =>
  z.strictObject({
    code: z
      .string()
      .min(1)
      .max(256)
      .refine((v) => inviteCode(v) !== null, { message: 'must be an invite code or a https://chat.whatsapp.com/ link' })
      .describe('The invite code, or the invite link.'),
  }),
);

function participantView(p: GroupParticipant) {
  return { id: p.id, lid: p.lid, admin: p.admin, isAdmin: p.admin !== null, isSuperAdmin: p.admin === 'superadmin' };
}

function groupView(g: GroupMetadata) {
  return {
    id: g.id,
    subject: g.subject,
    desc: g.desc,
    owner: g.owner,
    creation: g.creation,
    announce: g.announce,
    restrict: g.restrict,
    size: g.size,
    participants: g.participants.map(participantView),
  };
}

const participantSchema = z.lazy(() =>
  z.object({
    id: z.string(),
    lid: z.string().nullable(),
    admin: z.enum(['admin', 'superadmin']).nullable(),
    isAdmin: z.boolean(),
    isSuperAdmin: z.boolean(),
  }),
);
const groupSchema = once(() =>
  z.object({
    id: z.string(),
    subject: z.string(),
    desc: z.string().nullable(),
    owner: z.string().nullable(),
    creation: z.int(),
    announce: z.boolean(),
    restrict: z.boolean(),
    size: z.int(),
    participants: z.array(participantSchema),
  }),
);
const resultSchema = z.lazy(() => success(z.array(z.object({ id: z.string(), status: z.int(), message: z.string() }))));

export function groupRoutes(deps: RouteDeps): RouteGroup {
  const { sessions, directory } = deps;
  const routes = deps.api.group({ prefixes: ['/api/groups'], envelope: 'messaging' });
  const auth = sessions.credentials.sessionKey;
  const tag = 'Groups';
  const notFound = { 404: 'No such group, or this account is not a member: `{success: false, error, message}`', ...NOT_CONNECTED };

  routes.route({
    method: 'GET',
    path: '/api/groups',
    summary: 'The groups this account is a member of: {id, name, imgUrl} (?paginated=true&page&limit for a Laravel paginator)',
    tag,
    auth,
    query: listQuery,
    success: { schema: z.lazy(() => success(z.array(z.object({ id: z.string(), name: z.string(), imgUrl: z.string().nullable() })))) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, query }) {
      const { session, network } = sessions.connected(auth);
      const groups = (await network.groups(session)).map((g) => ({ id: g.id, name: g.subject, imgUrl: null }));
      ctx.body = { success: true, data: listOrPage(groups, query) };
    },
  });

  routes.route({
    method: 'POST',
    path: '/api/groups',
    summary: 'Create a group with this account as its super admin; members get groups.upsert',
    tag,
    auth,
    body: createBody,
    success: { status: 201, schema: z.lazy(() => success(groupSchema())) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, body }) {
      const group = await directory.createGroup(sessions.connected(auth), body.name, body.participants ?? []);
      ctx.status = 201;
      ctx.body = { success: true, data: groupView(group) };
    },
  });

  // Before the `/:jid/...` routes, which the literal `invite` would match too.
  routes.route({
    method: 'GET',
    path: '/api/groups/invite/:code',
    summary: 'What an invite code leads to (the group, without its participant list)',
    tag,
    auth,
    success: { schema: z.lazy(() => success(groupSchema().omit({ participants: true }))) },
    errors: { 404: 'No such invite: `{success: false, error, message}`', ...NOT_CONNECTED },
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const code = inviteCode(params.code ?? '');
      if (!code) throw invalid('code', 'code must be an invite code');
      const { participants: _hidden, ...info } = groupView(await network.groupInviteInfo(session, code));
      ctx.body = { success: true, data: info };
    },
  });

  routes.route({
    method: 'POST',
    path: '/api/groups/invite/accept',
    summary: 'Join a group by its invite code (or link); members get group-participants.update',
    tag,
    auth,
    body: acceptBody,
    success: { schema: z.lazy(() => success(z.object({ groupJid: z.string() }))) },
    errors: { 404: 'No such invite: `{success: false, error, message}`', ...NOT_CONNECTED },
    async handler(ctx, { auth, body }) {
      const groupJid = await directory.acceptInvite(sessions.connected(auth), inviteCode(body.code)!);
      ctx.body = { success: true, data: { groupJid } };
    },
  });

  routes.route({
    method: 'GET',
    path: '/api/groups/:jid/metadata',
    summary: "A group's metadata: subject, description, owner, settings, participants",
    tag,
    auth,
    success: { schema: z.lazy(() => success(groupSchema())) },
    errors: notFound,
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      ctx.body = { success: true, data: groupView(await network.groupMetadata(session, groupParam(params.jid))) };
    },
  });

  routes.route({
    method: 'GET',
    path: '/api/groups/:jid/participants',
    summary: "A group's participants, with their admin role",
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.array(participantSchema))) },
    errors: notFound,
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      ctx.body = { success: true, data: (await network.groupMetadata(session, groupParam(params.jid))).participants.map(participantView) };
    },
  });

  // Adding and removing (POST .../add, .../remove) and promoting or demoting (PUT .../update, the
  // action in the body): a status per participant; what was done is audited.
  const participantChanges = [
    { method: 'POST', action: 'add', summary: 'Add participants to a group' },
    { method: 'POST', action: 'remove', summary: 'Remove participants from a group' },
    { method: 'PUT', action: 'update', summary: 'Promote participants to admins, or demote them' },
  ] as const;
  for (const change of participantChanges) {
    routes.route({
      method: change.method,
      path: `/api/groups/:jid/participants/${change.action}`,
      summary:
        change.action === 'update'
          ? `${change.summary} (admins only): a status per participant`
          : `${change.summary} (admins only): a status per participant (200 done, 403 not allowed, 404 not a member, 409 already one)`,
      tag,
      auth,
      body: change.action === 'update' ? updateParticipantsBody : participantsBody,
      success: { schema: resultSchema },
      errors: notFound,
      async handler(ctx, { auth, body, params }) {
        const connected = sessions.connected(auth);
        const { participants, action } = body as { participants: string[]; action?: 'promote' | 'demote' };
        const done = await directory.changeParticipants(connected, groupParam(params.jid), action ?? (change.action as 'add' | 'remove'), participants);
        ctx.body = { success: true, data: done };
      },
    });
  }

  routes.route({
    method: 'PUT',
    path: '/api/groups/:jid/settings',
    summary: "Change a group's subject, description, announce (admins-only messages) or restrict (admins-only info); members get groups.update",
    tag,
    auth,
    body: settingsBody,
    success: {
      schema: z.lazy(() => success(z.object({ subject: z.string(), description: z.string().nullable(), announce: z.boolean(), restrict: z.boolean() }))),
    },
    errors: notFound,
    async handler(ctx, { auth, body, params }) {
      const connected = sessions.connected(auth);
      const group = await directory.updateGroupSettings(connected, groupParam(params.jid), body);
      ctx.body = { success: true, data: { subject: group.subject, description: group.desc, announce: group.announce, restrict: group.restrict } };
    },
  });

  routes.route({
    method: 'POST',
    path: '/api/groups/:jid/leave',
    summary: 'Leave a group; members get group-participants.update',
    tag,
    auth,
    body: emptyBody,
    success: { schema: z.lazy(() => success(z.object({ groupJid: z.string(), left: z.literal(true) }))) },
    errors: notFound,
    async handler(ctx, { auth, params }) {
      const connected = sessions.connected(auth);
      const jid = groupParam(params.jid);
      await directory.leaveGroup(connected, jid);
      ctx.body = { success: true, data: { groupJid: jid, left: true } };
    },
  });

  routes.route({
    method: 'GET',
    path: '/api/groups/:jid/invite-link',
    summary: "A group's invite code and link (admins only)",
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.object({ inviteCode: z.string(), inviteLink: z.string() }))) },
    errors: notFound,
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const code = await network.groupInviteCode(session, groupParam(params.jid));
      ctx.body = { success: true, data: { inviteCode: code, inviteLink: `https://chat.whatsapp.com/${code}` } };
    },
  });

  routes.route({
    method: 'GET',
    path: '/api/groups/:jid/picture',
    summary: "A group's picture URL (null when it has none)",
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.object({ imgUrl: z.string().nullable() }))) },
    errors: notFound,
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      ctx.body = { success: true, data: { imgUrl: await network.groupPicture(session, groupParam(params.jid)) } };
    },
  });

  return routes;
}
