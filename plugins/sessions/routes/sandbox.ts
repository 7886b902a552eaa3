/**
 * The sandbox network's own routes: `POST /api/sandbox-sessions` (account-level credential: a
 * sandbox session, connected at once, its number generated unless given) and
 * `POST /api/sandbox/receive` (session API key: the key's session receives an inbound text).
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { phoneNumber, type RouteDeps, sessionSchema, sessionSettings, success } from './common.ts';
import { detailView, settings } from './whatsapp-sessions.ts';

// Built on a route's first request (see common.ts).
const sandboxBody = z.lazy(() =>
  z.strictObject({
    ...settings().shape,
    name: sessionSettings().name,
    phone_number: sessionSettings().phone_number.optional().describe('Sandbox number, E.164 (default: +1555 followed by the session id).'),
  }),
);

const receiveBody = z.lazy(() =>
  z
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
    }),
);

export function sandboxRoutes(deps: RouteDeps): RouteGroup[] {
  const { sessions, admin, messages } = deps;

  const sandboxSessions = deps.api.group({ prefixes: ['/api/sandbox-sessions'], envelope: 'messaging' });
  sandboxSessions.route({
    method: 'POST',
    path: '/api/sandbox-sessions',
    summary: 'Create a sandbox session (always connected; sends between sandbox sessions arrive as inbound messages)',
    tag: 'Sandbox',
    auth: sessions.credentials.account,
    body: sandboxBody,
    success: { status: 201, schema: z.lazy(() => success(sessionSchema)) },
    async handler(ctx, { auth, body }) {
      ctx.status = 201;
      ctx.body = { success: true, data: detailView(await admin.create(auth, body, 'sandbox')) };
    },
  });

  const sandbox = deps.api.group({ prefixes: ['/api/sandbox'], envelope: 'messaging' });
  sandbox.route({
    method: 'POST',
    path: '/api/sandbox/receive',
    summary: "Make the key's sandbox session receive an inbound text (personal, group or newsletter chat); answers the message key",
    tag: 'Sandbox',
    auth: sessions.credentials.sessionKey,
    body: receiveBody,
    success: { schema: z.lazy(() => success(z.object({ key: z.record(z.string(), z.unknown()) }))) },
    errors: { 422: "Invalid body, or the key is not a sandbox session's: `{success: false, message, errors}`" },
    async handler(ctx, { auth, body }) {
      ctx.body = { success: true, data: { key: await messages.receive(auth, body) } };
    },
  });

  return [sandboxSessions, sandbox];
}
