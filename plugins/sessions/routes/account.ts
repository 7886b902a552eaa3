/**
 * Small session-scoped routes (`GET /api/status`, `GET /api/user`, `POST /api/sandbox/receive`)
 * and the public list of event names (`GET /api/webhook-events`).
 */
import type { RouteGroup } from '../../../core/api.ts';
import { z } from 'zod';
import { WharfError } from '../../../core/errors.ts';
import { EVENT_ALIASES, EVENT_NAMES } from '../events.ts';
import { SandboxNetwork } from '../networks/sandbox.ts';
import { requireConnected } from '../service.ts';
import { actingOf, operation, phoneNumber, type RouteDeps, success } from './common.ts';

const receiveBody = z
  .strictObject({
    from: phoneNumber.describe('Sender phone number, E.164.'),
    text: z.string().min(1).max(65_536).describe('The message text.'),
    pushName: z.string().min(1).max(256).optional().describe('Sender display name (default: the number).'),
    chat: z.enum(['personal', 'group', 'newsletter']).default('personal').describe('Chat the message arrives in.'),
    groupJid: z
      .string()
      .regex(/^\d[\d-]{5,40}@g\.us$/, 'must be a group JID such as 120363012345678901@g.us')
      .optional()
      .describe('With chat "group": the group (default: one derived from the sender).'),
  })
  .superRefine((b, ctx) => {
    if (b.groupJid !== undefined && b.chat !== 'group') ctx.addIssue({ code: 'custom', path: ['groupJid'], message: 'only goes with chat "group"' });
  });

export function accountRoutes(deps: RouteDeps): RouteGroup[] {
  const { sessions } = deps;

  const status = deps.api.group({ prefixes: ['/api/status'], envelope: 'messaging' });
  operation(
    deps,
    status,
    {
      method: 'GET',
      path: '/api/status',
      summary: "The connection status of the key's session: {status} (connecting, connected, disconnected, need_scan, logged_out, expired)",
      tag: 'Session',
      credential: 'sessionKey',
      success: { schema: z.object({ status: z.string() }) },
    },
    (ctx) => {
      ctx.body = { status: actingOf(ctx).session.status };
    },
  );

  const user = deps.api.group({ prefixes: ['/api/user'], envelope: 'messaging' });
  operation(
    deps,
    user,
    {
      method: 'GET',
      path: '/api/user',
      summary: "The account behind the key's session (id, lid, name, phone_number)",
      tag: 'Session',
      credential: 'sessionKey',
      errors: { 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const { session, network } = actingOf(ctx);
      requireConnected(session, network);
      ctx.body = { success: true, data: await network.user(session) };
    },
  );

  const events = deps.api.group({ prefixes: ['/api/webhook-events'], envelope: 'messaging' });
  operation(
    deps,
    events,
    {
      method: 'GET',
      path: '/api/webhook-events',
      summary: 'The 22 event names a webhook can subscribe to, and the accepted aliases',
      tag: 'Webhooks',
      credential: 'public',
      success: { schema: success(z.array(z.string())).extend({ aliases: z.record(z.string(), z.string()) }) },
    },
    (ctx) => {
      ctx.body = { success: true, data: EVENT_NAMES, aliases: Object.fromEntries(EVENT_ALIASES) };
    },
  );

  const sandbox = deps.api.group({ prefixes: ['/api/sandbox'], envelope: 'messaging' });
  operation(
    deps,
    sandbox,
    {
      method: 'POST',
      path: '/api/sandbox/receive',
      summary: "Make the key's sandbox session receive an inbound text (personal, group or newsletter chat); answers the message key",
      tag: 'Sandbox',
      credential: 'sessionKey',
      body: receiveBody,
      success: { schema: success(z.object({ key: z.record(z.string(), z.unknown()) })) },
      errors: { 422: 'Invalid body, or the key is not a sandbox session\'s: `{success: false, message, errors}`' },
    },
    (ctx, { body }) => {
      const { session, network } = actingOf(ctx);
      if (session.type !== 'sandbox' || !(network instanceof SandboxNetwork)) {
        throw new WharfError('validation_failed', 'Sandbox receive works only on sandbox sessions.', {
          fields: { session: [`session ${session.id} is a ${session.type} session; use the API key of a sandbox session (POST /api/sandbox-sessions creates one)`] },
        });
      }
      const key = sessions.transaction(() => {
        const received = network.receive(session, body);
        sessions.audit(session, { kind: 'sessionKey', id: String(session.id), userId: null, address: ctx.ip || null }, 'sandbox.receive', { chat: body.chat, from: body.from });
        return received;
      });
      ctx.body = { success: true, data: { key } };
    },
  );

  return [status, user, events, sandbox];
}
