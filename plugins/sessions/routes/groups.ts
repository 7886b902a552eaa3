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
import type { RouteGroup } from '../../../core/api.ts';
import type { Context } from 'koa';
import { z } from 'zod';
import { WharfError } from '../../../core/errors.ts';
import { participantJid } from '../networks/nodes.ts';
import type { GroupMetadata, GroupParticipant, NetworkAdapter } from '../networks/types.ts';
import { requireConnected } from '../service.ts';
import type { SessionRecord } from '../types.ts';
import { keyActor, listOrPage, listQuery } from './contacts.ts';
import { actingOf, operation, type RouteDeps, success } from './common.ts';

const GROUP_JID = /^\d[\d-]{5,40}@g\.us$/;
const INVITE_LINK = /^(?:https?:\/\/)?chat\.whatsapp\.com\/(?:invite\/)?/i;
const INVITE_CODE = /^[A-Za-z0-9_-]{4,128}$/;

function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

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

const participantList = z
  .array(z.string().max(64))
  .min(1)
  .max(1024)
  .superRefine((list, ctx) => {
    list.forEach((p, i) => {
      if (!participantJid(p)) ctx.addIssue({ code: 'custom', path: [i], message: 'must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)' });
    });
  })
  .describe('Phone numbers (E.164) or phone JIDs.');

const createBody = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('The group subject.'),
  participants: participantList.optional().describe('Members besides this account: phone numbers (E.164) or phone JIDs.'),
});
const participantsBody = z.strictObject({ participants: participantList });
const updateParticipantsBody = z.strictObject({ action: z.enum(['promote', 'demote']).describe('Make admins, or plain members again.'), participants: participantList });
const settingsBody = z
  .strictObject({
    subject: z.string().trim().min(1).max(100).optional().describe('New subject.'),
    description: z.string().max(2048).optional().describe('New description.'),
    announce: z.boolean().optional().describe('Only admins may send messages.'),
    restrict: z.boolean().optional().describe('Only admins may edit the group info.'),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one of subject, description, announce, restrict', path: ['body'] });
const acceptBody = z.strictObject({
  code: z
    .string()
    .min(1)
    .max(256)
    .refine((v) => inviteCode(v) !== null, { message: 'must be an invite code or a https://chat.whatsapp.com/ link' })
    .describe('The invite code, or the invite link.'),
});
const emptyBody = z.strictObject({});

export function participantView(p: GroupParticipant) {
  return { id: p.id, lid: p.lid, admin: p.admin, isAdmin: p.admin !== null, isSuperAdmin: p.admin === 'superadmin' };
}

export function groupView(g: GroupMetadata) {
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

const participantSchema = z.object({ id: z.string(), lid: z.string().nullable(), admin: z.enum(['admin', 'superadmin']).nullable(), isAdmin: z.boolean(), isSuperAdmin: z.boolean() });
const groupSchema = z.object({
  id: z.string(),
  subject: z.string(),
  desc: z.string().nullable(),
  owner: z.string().nullable(),
  creation: z.int(),
  announce: z.boolean(),
  restrict: z.boolean(),
  size: z.int(),
  participants: z.array(participantSchema),
});
const resultSchema = success(z.array(z.object({ id: z.string(), status: z.int(), message: z.string() })));

export function groupRoutes(deps: RouteDeps): RouteGroup {
  const { sessions } = deps;
  const router = deps.api.group({ prefixes: ['/api/groups'], envelope: 'messaging' });
  const tag = 'Groups';
  const connected = (ctx: Context): { session: SessionRecord; network: NetworkAdapter } => {
    const { session, network } = actingOf(ctx);
    requireConnected(session, network);
    return { session, network };
  };
  const conflict409 = { 409: 'The session is not connected: `{success: false, error, message}`' };
  const notFound = { 404: 'No such group, or this account is not a member: `{success: false, error, message}`', ...conflict409 };

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups',
      summary: 'The groups this account is a member of: {id, name, imgUrl} (?paginated=true&page&limit for a Laravel paginator)',
      tag,
      credential: 'sessionKey',
      query: listQuery,
      success: { schema: success(z.array(z.object({ id: z.string(), name: z.string(), imgUrl: z.string().nullable() }))) },
      errors: conflict409,
    },
    async (ctx, { query }) => {
      const { session, network } = connected(ctx);
      const groups = (await network.groups(session)).map((g) => ({ id: g.id, name: g.subject, imgUrl: null }));
      ctx.body = { success: true, data: listOrPage(groups, query) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: '/api/groups',
      summary: 'Create a group with this account as its super admin; members get groups.upsert',
      tag,
      credential: 'sessionKey',
      body: createBody,
      success: { status: 201, schema: success(groupSchema) },
      errors: conflict409,
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const group = await network.createGroup(session, body.name, body.participants ?? []);
      sessions.audit(session, keyActor(ctx, session), 'group.created', { jid: group.id, participants: group.size - 1 });
      ctx.status = 201;
      ctx.body = { success: true, data: groupView(group) };
    },
  );

  // Before the `/:jid/...` routes, which the literal `invite` would match too.
  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups/invite/:code',
      summary: 'What an invite code leads to (the group, without its participant list)',
      tag,
      credential: 'sessionKey',
      success: { schema: success(groupSchema.omit({ participants: true })) },
      errors: { 404: 'No such invite: `{success: false, error, message}`', ...conflict409 },
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const code = inviteCode(ctx.params.code ?? '');
      if (!code) throw invalid('code', 'code must be an invite code');
      const { participants: _hidden, ...info } = groupView(await network.groupInviteInfo(session, code));
      ctx.body = { success: true, data: info };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: '/api/groups/invite/accept',
      summary: 'Join a group by its invite code (or link); members get group-participants.update',
      tag,
      credential: 'sessionKey',
      body: acceptBody,
      success: { schema: success(z.object({ groupJid: z.string() })) },
      errors: { 404: 'No such invite: `{success: false, error, message}`', ...conflict409 },
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const groupJid = await network.acceptGroupInvite(session, inviteCode(body.code)!);
      sessions.audit(session, keyActor(ctx, session), 'group.invite_accepted', { jid: groupJid });
      ctx.body = { success: true, data: { groupJid } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups/:jid/metadata',
      summary: "A group's metadata: subject, description, owner, settings, participants",
      tag,
      credential: 'sessionKey',
      success: { schema: success(groupSchema) },
      errors: notFound,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      ctx.body = { success: true, data: groupView(await network.groupMetadata(session, groupParam(ctx.params.jid))) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups/:jid/participants',
      summary: "A group's participants, with their admin role",
      tag,
      credential: 'sessionKey',
      success: { schema: success(z.array(participantSchema)) },
      errors: notFound,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      ctx.body = { success: true, data: (await network.groupMetadata(session, groupParam(ctx.params.jid))).participants.map(participantView) };
    },
  );

  for (const action of ['add', 'remove'] as const) {
    operation(
      deps,
      router,
      {
        method: 'POST',
        path: `/api/groups/:jid/participants/${action}`,
        summary: `${action === 'add' ? 'Add participants to' : 'Remove participants from'} a group (admins only): a status per participant (200 done, 403 not allowed, 404 not a member, 409 already one)`,
        tag,
        credential: 'sessionKey',
        body: participantsBody,
        success: { schema: resultSchema },
        errors: notFound,
      },
      async (ctx, { body }) => {
        const { session, network } = connected(ctx);
        const jid = groupParam(ctx.params.jid);
        const results = await network.updateParticipants(session, jid, action, body.participants);
        const done = results.filter((r) => r.status === 200).map((r) => r.id);
        if (done.length) sessions.audit(session, keyActor(ctx, session), `group.participants_${action === 'add' ? 'added' : 'removed'}`, { jid, participants: done });
        ctx.body = { success: true, data: results };
      },
    );
  }

  operation(
    deps,
    router,
    {
      method: 'PUT',
      path: '/api/groups/:jid/participants/update',
      summary: 'Promote participants to admins, or demote them (admins only): a status per participant',
      tag,
      credential: 'sessionKey',
      body: updateParticipantsBody,
      success: { schema: resultSchema },
      errors: notFound,
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const jid = groupParam(ctx.params.jid);
      const results = await network.updateParticipants(session, jid, body.action, body.participants);
      const done = results.filter((r) => r.status === 200).map((r) => r.id);
      if (done.length) sessions.audit(session, keyActor(ctx, session), `group.participants_${body.action}d`, { jid, participants: done });
      ctx.body = { success: true, data: results };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'PUT',
      path: '/api/groups/:jid/settings',
      summary: "Change a group's subject, description, announce (admins-only messages) or restrict (admins-only info); members get groups.update",
      tag,
      credential: 'sessionKey',
      body: settingsBody,
      success: { schema: success(z.object({ subject: z.string(), description: z.string().nullable(), announce: z.boolean(), restrict: z.boolean() })) },
      errors: notFound,
    },
    async (ctx, { body }) => {
      const { session, network } = connected(ctx);
      const jid = groupParam(ctx.params.jid);
      const group = await network.updateGroupSettings(session, jid, body);
      sessions.audit(session, keyActor(ctx, session), 'group.settings_updated', { jid, fields: Object.keys(body) });
      ctx.body = { success: true, data: { subject: group.subject, description: group.desc, announce: group.announce, restrict: group.restrict } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: '/api/groups/:jid/leave',
      summary: 'Leave a group; members get group-participants.update',
      tag,
      credential: 'sessionKey',
      body: emptyBody,
      success: { schema: success(z.object({ groupJid: z.string(), left: z.literal(true) })) },
      errors: notFound,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const jid = groupParam(ctx.params.jid);
      await network.leaveGroup(session, jid);
      sessions.audit(session, keyActor(ctx, session), 'group.left', { jid });
      ctx.body = { success: true, data: { groupJid: jid, left: true } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups/:jid/invite-link',
      summary: "A group's invite code and link (admins only)",
      tag,
      credential: 'sessionKey',
      success: { schema: success(z.object({ inviteCode: z.string(), inviteLink: z.string() })) },
      errors: notFound,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      const code = await network.groupInviteCode(session, groupParam(ctx.params.jid));
      ctx.body = { success: true, data: { inviteCode: code, inviteLink: `https://chat.whatsapp.com/${code}` } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: '/api/groups/:jid/picture',
      summary: "A group's picture URL (null when it has none)",
      tag,
      credential: 'sessionKey',
      success: { schema: success(z.object({ imgUrl: z.string().nullable() })) },
      errors: notFound,
    },
    async (ctx) => {
      const { session, network } = connected(ctx);
      ctx.body = { success: true, data: { imgUrl: await network.groupPicture(session, groupParam(ctx.params.jid)) } };
    },
  );

  return router;
}
