/** `POST /api/send-presence-update` (session API key): show composing, recording, available, unavailable or paused in a chat. */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { recipientOf } from '../networks/nodes.ts';
import { NOT_CONNECTED, type RouteDeps, success } from './common.ts';

const presenceBody = z.lazy(() =>
  z.strictObject({
    jid: z
      .string()
      .min(1)
      .max(128)
      .refine((v) => recipientOf(v) !== null, { message: 'must be a phone number in E.164 format, a phone JID, a LID or a group JID' })
      .describe('The chat: E.164, a phone JID, a LID or a group JID.'),
    type: z.enum(['composing', 'recording', 'available', 'unavailable', 'paused']).describe('What to show.'),
    delayMs: z.int().min(0).max(60_000).optional().describe('How long to hold the presence before it lapses, in milliseconds.'),
  }),
);

export function presenceRoutes(deps: RouteDeps): RouteGroup {
  const { sessions } = deps;
  const group = deps.api.group({ prefixes: ['/api/send-presence-update'], envelope: 'messaging' });
  group.route({
    method: 'POST',
    path: '/api/send-presence-update',
    summary: 'Show a presence in a chat: composing, recording, available, unavailable or paused',
    tag: 'Presence',
    auth: sessions.credentials.sessionKey,
    body: presenceBody,
    success: { schema: z.lazy(() => success(z.object({ jid: z.string(), type: z.string(), delayMs: z.int().optional() }))) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, body }) {
      const { session, network } = sessions.connected(auth);
      const chat = recipientOf(body.jid)!;
      await network.sendPresence(session, chat.jid, body.type, body.delayMs);
      ctx.body = { success: true, data: { jid: chat.jid, type: body.type, ...(body.delayMs !== undefined ? { delayMs: body.delayMs } : {}) } };
    },
  });
  return group;
}
