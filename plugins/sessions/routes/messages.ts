/**
 * A session's messages (session API key): `/api/messages/{msgId}/info`, edit (`PUT`), delete,
 * `.../resend`, and `POST /api/messages/read`, `POST /api/messages/react`.
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import type { MessageKey } from '../networks/types.ts';
import { NOT_CONNECTED, type RouteDeps } from './common.ts';
import { sendResult } from './send-message.ts';

/** Accepts a key as webhooks deliver it (extra fields such as remoteJidAlt are fine). */
const keySchema = z.lazy(() =>
  z.looseObject({
    id: z.string().min(1).max(128),
    remoteJid: z.string().min(1).max(128),
    fromMe: z.boolean().optional(),
  }),
);

const readBody = z.lazy(() => z.strictObject({ key: keySchema.describe('The key of a received message, as the webhook delivered it.') }));
const reactBody = z.lazy(() =>
  z
    .strictObject({
      key: keySchema.optional().describe('The key of the message to react to (received messages have only a key).'),
      msgId: z.int().positive().optional().describe('Or the msgId of a message this session sent.'),
      reaction: z.string().max(32).describe('An emoji; an empty string removes the reaction.'),
    })
    .superRefine((b, ctx) => {
      if ((b.key === undefined) === (b.msgId === undefined)) ctx.addIssue({ code: 'custom', path: ['key'], message: 'give exactly one of key and msgId' });
    }),
);
const editBody = z.lazy(() => z.strictObject({ text: z.string().min(1).max(65_536).describe('The new text.') }));

const NO_MESSAGE = { 404: 'No such message: `{success: false, error, message}`' };

export function messageRoutes(deps: RouteDeps): RouteGroup {
  const { sessions, messages } = deps;
  const group = deps.api.group({ prefixes: ['/api/messages'], envelope: 'messaging' });
  const auth = sessions.credentials.sessionKey;
  const tag = 'Messages';

  group.route({
    method: 'GET',
    path: '/api/messages/:msgId/info',
    summary: 'Information on a message this session sent: key, message, timestamp, numeric status (0 error … 5 played)',
    tag,
    auth,
    errors: { 404: 'No such message in this session: `{success: false, error, message}`' },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: await messages.info(auth.session, params.msgId) };
    },
  });

  group.route({
    method: 'PUT',
    path: '/api/messages/:msgId',
    summary: 'Edit the text of a message this session sent',
    tag,
    auth,
    body: editBody,
    success: { schema: sendResult },
    errors: { ...NO_MESSAGE, ...NOT_CONNECTED },
    async handler(ctx, { auth, params, body }) {
      ctx.body = { success: true, data: await messages.edit(sessions.connected(auth), params.msgId, body.text) };
    },
  });

  group.route({
    method: 'DELETE',
    path: '/api/messages/:msgId',
    summary: 'Delete a message this session sent, for everyone',
    tag,
    auth,
    errors: { ...NO_MESSAGE, ...NOT_CONNECTED },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: { msgId: await messages.remove(sessions.connected(auth), params.msgId) } };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/messages/:msgId/resend',
    summary: 'Send a failed message again (needs log_messages, which keeps its content)',
    tag,
    auth,
    success: { schema: sendResult },
    errors: { ...NO_MESSAGE, ...NOT_CONNECTED, 429: 'Account protection: `{message, retry_after}`' },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: await messages.resend(sessions.connected(auth), params.msgId) };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/messages/read',
    summary: 'Mark a received message as read (its sender gets a read receipt)',
    tag,
    auth,
    body: readBody,
    errors: { ...NO_MESSAGE, ...NOT_CONNECTED },
    async handler(ctx, { auth, body }) {
      await messages.read(sessions.connected(auth), body.key as MessageKey);
      ctx.body = { success: true, data: { key: body.key, status: 'read' } };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/messages/react',
    summary: 'React to a message with an emoji (by key, or by msgId for own messages)',
    tag,
    auth,
    body: reactBody,
    errors: { ...NO_MESSAGE, ...NOT_CONNECTED },
    async handler(ctx, { auth, body }) {
      const { key, target } = await messages.react(sessions.connected(auth), { key: body.key as MessageKey | undefined, msgId: body.msgId }, body.reaction);
      ctx.body = { success: true, data: { key, reaction: body.reaction, target } };
    },
  });

  return group;
}
