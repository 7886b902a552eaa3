/**
 * Session management (account-level credential): `/api/whatsapp-sessions` and its alias
 * `/api/messaging-sessions` (the same handlers on both).
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { once } from '../../../core/validate.ts';
import type { SessionDetail } from '../management.ts';
import type { Page } from '../store.ts';
import { emptyBody, pageQuery, paginated, type RouteDeps, sessionSchema, sessionSettings, sessionView, success } from './common.ts';

/** Every setting, optional: what create and update share. */
export const settings = once(() => z.object(sessionSettings()).partial());

// Built on a route's first request (see common.ts).
const createBody = z.lazy(() =>
  z.strictObject({
    ...settings().shape,
    name: sessionSettings().name,
    type: z.enum(['whatsapp', 'sandbox']).optional().describe('Network of the session (default whatsapp).'),
  }),
);
const updateBody = z.lazy(() => z.strictObject(settings().shape));
const connectBody = z.lazy(() =>
  z.strictObject({
    qr_as_image: z.boolean().optional().describe('Ask for the QR code as an image (WasenderAPI SDK spelling); the answer carries qrImage either way.'),
    qrAsImage: z.boolean().optional().describe('Same, Laravel SDK spelling.'),
    phone_number: sessionSettings()
      .phone_number.optional()
      .describe("Pair by a code typed on the phone instead of a QR code: the account's number, E.164; the answer carries the 8-character pairingCode."),
  }),
);
const proxyBody = z.lazy(() => z.strictObject({ proxy_url: sessionSettings().proxy_url }));
const signingMode = once(() => z.object({ mode: z.enum(['secret', 'hmac']) }));
const signingBody = z.lazy(() =>
  z.strictObject({
    mode: signingMode().shape.mode.describe('secret: X-Webhook-Signature carries the secret; hmac: the hex HMAC-SHA256 of the body.'),
  }),
);
const messageLogQuery = z.lazy(() =>
  z.strictObject({
    ...pageQuery(),
    status: z.enum(['in_progress', 'sent', 'delivered', 'read', 'played', 'failed']).optional().describe('Only messages in this status.'),
  }),
);
const pageOnly = z.lazy(() => z.strictObject(pageQuery()));

const NO_SESSION = 'No such session: `{success: false, error, message}`';

/** A page of a session's log in Laravel's paginator shape, each row as `view` shows it. */
function page<R, V>(query: { page: number; per_page: number }, { rows, total }: Page<R>, view: (row: R) => V) {
  return { success: true, data: paginated(rows.map(view), total, query.page, query.per_page) };
}

/** A session with its API key, webhook secret and proxy URL, as single-session answers show it. */
export function detailView(detail: SessionDetail) {
  return sessionView(detail.session, detail);
}

/** The session routes under `prefix` (mounted twice: WasenderAPI's path and the spec's). */
export function whatsappSessionRoutes(deps: RouteDeps, prefix: string): RouteGroup {
  const { sessions, admin } = deps;
  const group = deps.api.group({ prefixes: [prefix], envelope: 'messaging' });
  const auth = sessions.credentials.account;
  const tag = 'Sessions';
  const alias = prefix === '/api/whatsapp-sessions' ? '' : ' (alias of /api/whatsapp-sessions)';

  group.route({
    method: 'GET',
    path: prefix,
    summary: `List the organization's sessions${alias}`,
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.array(sessionSchema))) },
    async handler(ctx, { auth }) {
      ctx.body = { success: true, data: (await admin.list(auth)).map(({ session, apiKey }) => sessionView(session, { apiKey })) };
    },
  });

  group.route({
    method: 'POST',
    path: prefix,
    summary: `Create a session${alias}`,
    tag,
    auth,
    body: createBody,
    success: { status: 201, schema: z.lazy(() => success(sessionSchema)) },
    async handler(ctx, { auth, body }) {
      const { type, ...input } = body;
      ctx.status = 201;
      ctx.body = { success: true, data: detailView(await admin.create(auth, input, type ?? 'whatsapp')) };
    },
  });

  group.route({
    method: 'GET',
    path: `${prefix}/:id`,
    summary: `Read a session, with its API key and webhook secret${alias}`,
    tag,
    auth,
    success: { schema: z.lazy(() => success(sessionSchema)) },
    errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: detailView(await admin.detail(await sessions.sessionOf(auth, params.id))) };
    },
  });

  group.route({
    method: 'PUT',
    path: `${prefix}/:id`,
    summary: `Update a session's settings${alias}`,
    tag,
    auth,
    body: updateBody,
    success: { schema: z.lazy(() => success(sessionSchema)) },
    errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    async handler(ctx, { auth, params, body }) {
      ctx.body = { success: true, data: detailView(await admin.update(auth, await sessions.sessionOf(auth, params.id), body)) };
    },
  });

  group.route({
    method: 'DELETE',
    path: `${prefix}/:id`,
    summary: `Delete a session (its key stops working at once)${alias}`,
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.null())) },
    errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    async handler(ctx, { auth, params }) {
      await admin.remove(auth, await sessions.sessionOf(auth, params.id));
      ctx.body = { success: true, data: null };
    },
  });

  group.route({
    method: 'POST',
    path: `${prefix}/:id/connect`,
    summary: `Connect a session: WhatsApp pairing answers need_scan with a QR code (qrCode, qrImage), or with a pairingCode when phone_number is given; a paired session reconnects; sandbox sessions are always connected${alias}`,
    tag,
    auth,
    body: connectBody,
    errors: { 404: NO_SESSION, 409: 'No network adapter for this session type: `{success: false, error, message}`' },
    async handler(ctx, { auth, params, body }) {
      const request = body.phone_number ? { phoneNumber: body.phone_number } : {};
      ctx.body = { success: true, data: await admin.connect(auth, await sessions.sessionOf(auth, params.id), request) };
    },
  });

  for (const path of [`${prefix}/:id/qrcode`, `${prefix}/:id/qr-code`]) {
    group.route({
      method: 'GET',
      path,
      summary: `The current pairing QR code of a session (qrCode, and qrImage: a data URL), rotated as WhatsApp issues new ones${path.endsWith('qr-code') ? ' (Laravel SDK spelling)' : ''}${alias}`,
      tag,
      auth,
      success: { schema: z.lazy(() => success(z.object({ qrCode: z.string(), qrImage: z.string() }))) },
      errors: { 404: NO_SESSION, 409: 'No QR code to give (not pairing, connected, sandbox, or no adapter): `{success: false, error, message}`' },
      async handler(ctx, { auth, params }) {
        ctx.body = { success: true, data: await admin.qrCode(await sessions.sessionOf(auth, params.id)) };
      },
    });
  }

  group.route({
    method: 'POST',
    path: `${prefix}/:id/disconnect`,
    summary: `Disconnect a session${alias}`,
    tag,
    auth,
    body: emptyBody,
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: await admin.disconnect(auth, await sessions.sessionOf(auth, params.id)) };
    },
  });

  group.route({
    method: 'POST',
    path: `${prefix}/:id/restart`,
    summary: `Soft-restart a connected session${alias}`,
    tag,
    auth,
    body: emptyBody,
    errors: { 404: NO_SESSION, 409: 'The session is not connected: `{success: false, error, message}`' },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: await admin.restart(auth, await sessions.sessionOf(auth, params.id)) };
    },
  });

  for (const path of [`${prefix}/:id/regenerate-key`, `${prefix}/:id/regenerate-api-key`]) {
    group.route({
      method: 'POST',
      path,
      summary: `Replace a session's API key; the old one stops working at once${path.endsWith('api-key') ? ' (Laravel SDK spelling)' : ''}${alias}`,
      tag,
      auth,
      body: emptyBody,
      success: { schema: z.lazy(() => z.object({ success: z.literal(true), api_key: z.string() })) },
      errors: { 404: NO_SESSION },
      async handler(ctx, { auth, params }) {
        ctx.body = { success: true, api_key: await admin.regenerateKey(auth, await sessions.sessionOf(auth, params.id)) };
      },
    });
  }

  group.route({
    method: 'GET',
    path: `${prefix}/:id/message-logs`,
    summary: `The message log of a session, newest first (Laravel paginator)${alias}`,
    tag,
    auth,
    query: messageLogQuery,
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params, query }) {
      const session = await sessions.sessionOf(auth, params.id);
      ctx.body = page(query, await admin.messageLogs(session, { status: query.status, page: query.page, perPage: query.per_page }), (r) => ({
        id: r.id,
        whatsapp_session_id: r.session_id,
        to: r.recipient,
        jid: r.jid,
        type: r.type,
        status: r.status,
        key: JSON.parse(r.remote_key),
        content: r.request === null ? null : JSON.parse(r.request),
        message: r.message === null ? null : JSON.parse(r.message),
        error: r.error,
        attempts: r.attempts,
        deleted_at: r.deleted_at,
        created_at: r.created_at,
        updated_at: r.updated_at,
      }));
    },
  });

  group.route({
    method: 'GET',
    path: `${prefix}/:id/session-logs`,
    summary: `Connection history of a session, newest first${alias}`,
    tag,
    auth,
    query: pageOnly,
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params, query }) {
      const logs = await admin.statusLogs(await sessions.sessionOf(auth, params.id), query.page, query.per_page);
      ctx.body = page(query, logs, (r) => ({
        id: r.id,
        whatsapp_session_id: r.session_id,
        event_type: r.event_type,
        status: r.status,
        reason: r.reason,
        occurred_at: r.occurred_at,
      }));
    },
  });

  group.route({
    method: 'GET',
    path: `${prefix}/:id/audit-logs`,
    summary: `Who (which token or user) did what to a session, and when; newest first${alias}`,
    tag,
    auth,
    query: pageOnly,
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params, query }) {
      ctx.body = page(query, await admin.auditLogs(await sessions.sessionOf(auth, params.id), query.page, query.per_page), (r) => ({
        id: r.id,
        whatsapp_session_id: r.session_id,
        action: r.action,
        actor: { kind: r.actor_kind, id: r.actor_id, user_id: r.user_id },
        details: r.details === null ? null : JSON.parse(r.details),
        ip: r.address,
        created_at: r.created_at,
      }));
    },
  });

  group.route({
    method: 'PUT',
    path: `${prefix}/:id/proxy`,
    summary: `Set or clear a session's proxy (http, https or socks5; public domain names only unless allow_private_networks)${alias}`,
    tag,
    auth,
    body: proxyBody,
    success: { schema: z.lazy(() => success(sessionSchema)) },
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params, body }) {
      ctx.body = { success: true, data: detailView(await admin.setProxy(auth, await sessions.sessionOf(auth, params.id), body.proxy_url)) };
    },
  });

  group.route({
    method: 'GET',
    path: `${prefix}/:id/webhook-signing`,
    summary: `How webhook deliveries of a session are signed${alias}`,
    tag,
    auth,
    success: { schema: z.lazy(() => success(signingMode())) },
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params }) {
      ctx.body = { success: true, data: { mode: (await sessions.sessionOf(auth, params.id)).webhookSigning } };
    },
  });

  group.route({
    method: 'PUT',
    path: `${prefix}/:id/webhook-signing`,
    summary: `Switch webhook signing between the plain secret and HMAC-SHA256${alias}`,
    tag,
    auth,
    body: signingBody,
    success: { schema: z.lazy(() => success(signingMode())) },
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params, body }) {
      await admin.setSigning(auth, await sessions.sessionOf(auth, params.id), body.mode);
      ctx.body = { success: true, data: { mode: body.mode } };
    },
  });

  group.route({
    method: 'POST',
    path: `${prefix}/:id/rotate-webhook-secret`,
    summary: `Replace a session's webhook secret; with the webhooks plugin, the old one keeps signing deliveries (beside the new) for a grace period${alias}`,
    tag,
    auth,
    body: emptyBody,
    success: {
      schema: z.lazy(() =>
        success(
          z.object({
            webhook_secret: z.string(),
            previous_secret_valid_until: z
              .string()
              .nullable()
              .describe('ISO 8601: until when deliveries also carry the old signature; null when it is dropped at once.'),
          }),
        ),
      ),
    },
    errors: { 404: NO_SESSION },
    async handler(ctx, { auth, params }) {
      const rotated = await admin.rotateWebhookSecret(auth, await sessions.sessionOf(auth, params.id));
      ctx.body = { success: true, data: { webhook_secret: rotated.secret, previous_secret_valid_until: rotated.previousValidUntil?.toISOString() ?? null } };
    },
  });

  return group;
}
