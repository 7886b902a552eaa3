/**
 * Session management (account-level credential): `/api/whatsapp-sessions` and its alias
 * `/api/messaging-sessions` (the same handlers on both), and `POST /api/sandbox-sessions`.
 */
import { randomUUID } from 'node:crypto';
import type { RouteGroup } from '../../../core/api.ts';
import type { Context } from 'koa';
import { z } from 'zod';
import { type FieldErrors, WharfError } from '../../../core/errors.ts';
import { newSessionKey, newWebhookSecret } from '../credentials.ts';
import type { Account } from '../service.ts';
import { requireConnected } from '../service.ts';
import type { SessionChanges } from '../store.ts';
import type { SessionRecord, SessionType } from '../types.ts';
import {
  accountOf,
  operation,
  pageQuery,
  paginated,
  type RouteDeps,
  sessionSchema,
  sessionSettings,
  sessionView,
  success,
} from './common.ts';

const settings = z.object(sessionSettings).partial();

const createBody = z.strictObject({
  ...settings.shape,
  name: sessionSettings.name,
  type: z.enum(['whatsapp', 'sandbox']).optional().describe('Network of the session (default whatsapp).'),
});

const sandboxBody = z.strictObject({
  ...settings.shape,
  name: sessionSettings.name,
  phone_number: sessionSettings.phone_number.optional().describe('Sandbox number, E.164 (default: +1555 followed by the session id).'),
});

const updateBody = z.strictObject(settings.shape);
const emptyBody = z.strictObject({});
const connectBody = z.strictObject({
  qr_as_image: z.boolean().optional().describe('Ask for the QR code as an image (WasenderAPI SDK spelling).'),
  qrAsImage: z.boolean().optional().describe('Same, Laravel SDK spelling.'),
});
const proxyBody = z.strictObject({ proxy_url: sessionSettings.proxy_url });
const signingBody = z.strictObject({ mode: z.enum(['secret', 'hmac']).describe('secret: X-Webhook-Signature carries the secret; hmac: the hex HMAC-SHA256 of the body.') });
const messageLogQuery = z.strictObject({
  ...pageQuery,
  status: z.enum(['in_progress', 'sent', 'delivered', 'read', 'played', 'failed']).optional().describe('Only messages in this status.'),
});
const pageOnly = z.strictObject(pageQuery);

type CreateInput = z.output<typeof settings> & { name: string };

function invalid(fields: FieldErrors): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields });
}

function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown })?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** Checks that need I/O or other rows (proxy, webhook URL, phone number in use): 422 naming each field. */
async function checkSettings(deps: RouteDeps, orgId: string, input: Partial<CreateInput>, sessionId: number | null): Promise<void> {
  const fields: FieldErrors = {};
  if (input.proxy_url) {
    const problem = await deps.checkProxy(input.proxy_url);
    if (problem) fields.proxy_url = [problem];
  }
  if (input.webhook_url) {
    const problem = await deps.sessions.checkWebhookUrl(input.webhook_url);
    if (problem) fields.webhook_url = [problem];
  }
  if (input.phone_number) {
    const other = deps.sessions.store.sessionByPhone(orgId, input.phone_number);
    if (other && other.id !== sessionId) fields.phone_number = [`phone_number is already used by session ${other.id} of this organization`];
  }
  if (Object.keys(fields).length) throw invalid(fields);
}

function changesOf(input: Partial<CreateInput>): SessionChanges {
  const { proxy_url: _proxy, ...rest } = input;
  return rest;
}

/** Creates a session (and, for a sandbox, connects it) in one transaction: all or nothing. */
export async function createSession(deps: RouteDeps, account: Account, input: CreateInput, type: SessionType): Promise<SessionRecord> {
  const { sessions } = deps;
  const { store } = sessions;
  if (type === 'whatsapp' && !input.phone_number) throw invalid({ phone_number: ['phone_number is required'] });
  await checkSettings(deps, account.orgId, input, null);
  const key = newSessionKey();
  const now = new Date().toISOString();
  try {
    return sessions.transaction(() => {
      const id = store.insertSession(
        {
          ...changesOf(input),
          orgId: account.orgId,
          type,
          status: 'disconnected',
          name: input.name,
          phoneNumber: input.phone_number ?? `pending:${randomUUID()}`,
        },
        { apiKey: key.key, apiKeyHash: key.hash, webhookSecret: newWebhookSecret() },
        now,
      );
      if (!input.phone_number) {
        let phone = `+1555${String(id).padStart(7, '0')}`;
        for (let n = 1; store.sessionByPhone(account.orgId, phone); n++) phone = `+1555${String(id).padStart(7, '0')}${n}`;
        store.updateSession(id, { phone_number: phone }, now);
      }
      if (input.proxy_url) store.setProxyUrl(id, input.proxy_url, now);
      const created = store.session(id)!;
      sessions.audit(created, account.actor, 'session.created', { type, fields: Object.keys(input).filter((k) => k !== 'proxy_url') });
      // A sandbox session is connected from birth; the network reports it like any connection.
      if (type === 'sandbox') sessions.host.setStatus(id, 'connected', 'sandbox session created');
      return store.session(id)!;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw invalid({ phone_number: ['phone_number is already used by another session of this organization'] });
    throw err;
  }
}

function detail(deps: RouteDeps, session: SessionRecord) {
  const secrets = deps.sessions.store.secrets(session.id);
  return sessionView(session, secrets);
}

/** The session routes under `prefix` (mounted twice: WasenderAPI's path and the spec's). */
export function sessionRoutes(deps: RouteDeps, prefix: string): RouteGroup {
  const router = deps.api.group({ prefixes: [prefix], envelope: 'messaging' });
  const { sessions } = deps;
  const { store } = sessions;
  const tag = 'Sessions';
  const alias = prefix === '/api/whatsapp-sessions' ? '' : ' (alias of /api/whatsapp-sessions)';
  const sessionFor = (ctx: Context) => sessions.sessionOf(accountOf(ctx), ctx.params.id);

  operation(
    deps,
    router,
    { method: 'GET', path: prefix, summary: `List the organization's sessions${alias}`, tag, credential: 'account', success: { schema: success(z.array(sessionSchema)) } },
    (ctx) => {
      const { orgId } = accountOf(ctx);
      ctx.body = { success: true, data: store.sessionsOfOrg(orgId).map((s) => sessionView(s, { apiKey: store.secrets(s.id).apiKey })) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: prefix,
      summary: `Create a session${alias}`,
      tag,
      credential: 'account',
      body: createBody,
      success: { status: 201, schema: success(sessionSchema) },
    },
    async (ctx, { body }) => {
      const { type, ...input } = body;
      const session = await createSession(deps, accountOf(ctx), input, type ?? 'whatsapp');
      ctx.status = 201;
      ctx.body = { success: true, data: detail(deps, session) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: `${prefix}/:id`,
      summary: `Read a session, with its API key and webhook secret${alias}`,
      tag,
      credential: 'account',
      success: { schema: success(sessionSchema) },
      errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    },
    (ctx) => {
      ctx.body = { success: true, data: detail(deps, sessionFor(ctx)) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'PUT',
      path: `${prefix}/:id`,
      summary: `Update a session's settings${alias}`,
      tag,
      credential: 'account',
      body: updateBody,
      success: { schema: success(sessionSchema) },
      errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    },
    async (ctx, { body }) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      if (Object.keys(body).length === 0) throw invalid({ body: ['send at least one field to update'] });
      await checkSettings(deps, account.orgId, body, session.id);
      const now = new Date().toISOString();
      try {
        sessions.transaction(() => {
          store.updateSession(session.id, changesOf(body), now);
          if (body.proxy_url !== undefined) store.setProxyUrl(session.id, body.proxy_url, now);
          sessions.audit(session, account.actor, 'session.updated', { fields: Object.keys(body) });
        });
      } catch (err) {
        if (isUniqueViolation(err)) throw invalid({ phone_number: ['phone_number is already used by another session of this organization'] });
        throw err;
      }
      ctx.body = { success: true, data: detail(deps, store.session(session.id)!) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'DELETE',
      path: `${prefix}/:id`,
      summary: `Delete a session (its key stops working at once)${alias}`,
      tag,
      credential: 'account',
      success: { schema: success(z.null()) },
      errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      await sessions.network(session)?.forget(session);
      sessions.transaction(() => {
        sessions.emit(session.id, 'session.status', { status: 'disconnected', reason: 'session deleted' });
        sessions.audit(session, account.actor, 'session.deleted', { name: session.name, phone_number: session.phoneNumber });
        store.deleteSession(session.id);
      });
      ctx.body = { success: true, data: null };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: `${prefix}/:id/connect`,
      summary: `Connect a session (WhatsApp pairing starts with a QR code; sandbox sessions are always connected)${alias}`,
      tag,
      credential: 'account',
      body: connectBody,
      errors: { 404: 'No such session: `{success: false, error, message}`', 409: 'No network adapter for this session type yet: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      const network = sessions.network(session);
      if (!network) requireConnected(session, network);
      const result = await network!.connect(session);
      sessions.audit(session, account.actor, 'session.connect', { status: result.status });
      ctx.body = { success: true, data: result };
    },
  );

  for (const path of [`${prefix}/:id/qrcode`, `${prefix}/:id/qr-code`]) {
    operation(
      deps,
      router,
      {
        method: 'GET',
        path,
        summary: `The pairing QR code of a session${path.endsWith('qr-code') ? ' (Laravel SDK spelling)' : ''}${alias}`,
        tag,
        credential: 'account',
        errors: { 404: 'No such session: `{success: false, error, message}`', 409: 'No QR code to give (connected, sandbox, or no adapter): `{success: false, error, message}`' },
      },
      async (ctx) => {
        const session = sessionFor(ctx);
        const network = sessions.network(session);
        if (!network) requireConnected(session, network);
        ctx.body = { success: true, data: { qrCode: await network!.qrCode(session) } };
      },
    );
  }

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: `${prefix}/:id/disconnect`,
      summary: `Disconnect a session${alias}`,
      tag,
      credential: 'account',
      body: emptyBody,
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      const network = sessions.network(session);
      const result = network ? await network.disconnect(session) : { status: session.status, message: 'Session is not connected' };
      sessions.audit(session, account.actor, 'session.disconnect', { status: result.status });
      ctx.body = { success: true, data: result };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: `${prefix}/:id/restart`,
      summary: `Soft-restart a connected session${alias}`,
      tag,
      credential: 'account',
      body: emptyBody,
      errors: { 404: 'No such session: `{success: false, error, message}`', 409: 'The session is not connected: `{success: false, error, message}`' },
    },
    async (ctx) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      const network = sessions.network(session);
      requireConnected(session, network);
      const result = await network.restart(session);
      sessions.transaction(() => {
        sessions.sessionLog(session.id, 'session_restarted', result.status);
        sessions.audit(session, account.actor, 'session.restart', { status: result.status });
      });
      ctx.body = { success: true, data: result };
    },
  );

  for (const path of [`${prefix}/:id/regenerate-key`, `${prefix}/:id/regenerate-api-key`]) {
    operation(
      deps,
      router,
      {
        method: 'POST',
        path,
        summary: `Replace a session's API key; the old one stops working at once${path.endsWith('api-key') ? ' (Laravel SDK spelling)' : ''}${alias}`,
        tag,
        credential: 'account',
        body: emptyBody,
        success: { schema: z.object({ success: z.literal(true), api_key: z.string() }) },
        errors: { 404: 'No such session: `{success: false, error, message}`' },
      },
      (ctx) => {
        const account = accountOf(ctx);
        const session = sessionFor(ctx);
        const key = newSessionKey();
        sessions.transaction(() => {
          store.setApiKey(session.id, key.key, key.hash, new Date().toISOString());
          sessions.audit(session, account.actor, 'session.api_key_regenerated');
        });
        ctx.body = { success: true, api_key: key.key };
      },
    );
  }

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: `${prefix}/:id/message-logs`,
      summary: `The message log of a session, newest first (Laravel paginator)${alias}`,
      tag,
      credential: 'account',
      query: messageLogQuery,
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx, { query }) => {
      const session = sessionFor(ctx);
      const { rows, total } = store.messageLogs(session.id, { status: query.status, page: query.page, perPage: query.per_page });
      const data = rows.map((r) => ({
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
      ctx.body = { success: true, data: paginated(data, total, query.page, query.per_page) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: `${prefix}/:id/session-logs`,
      summary: `Connection history of a session, newest first${alias}`,
      tag,
      credential: 'account',
      query: pageOnly,
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx, { query }) => {
      const session = sessionFor(ctx);
      const { rows, total } = store.statusLogs(session.id, query.page, query.per_page);
      const data = rows.map((r) => ({ id: r.id, whatsapp_session_id: r.session_id, event_type: r.event_type, status: r.status, reason: r.reason, occurred_at: r.occurred_at }));
      ctx.body = { success: true, data: paginated(data, total, query.page, query.per_page) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: `${prefix}/:id/audit-logs`,
      summary: `Who (which token or user) did what to a session, and when; newest first${alias}`,
      tag,
      credential: 'account',
      query: pageOnly,
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx, { query }) => {
      const session = sessionFor(ctx);
      const { rows, total } = store.auditLogs(session.id, session.orgId, query.page, query.per_page);
      const data = rows.map((r) => ({
        id: r.id,
        whatsapp_session_id: r.session_id,
        action: r.action,
        actor: { kind: r.actor_kind, id: r.actor_id, user_id: r.user_id },
        details: r.details === null ? null : JSON.parse(r.details),
        ip: r.address,
        created_at: r.created_at,
      }));
      ctx.body = { success: true, data: paginated(data, total, query.page, query.per_page) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'PUT',
      path: `${prefix}/:id/proxy`,
      summary: `Set or clear a session's proxy (http, https or socks5; public domain names only unless allow_private_networks)${alias}`,
      tag,
      credential: 'account',
      body: proxyBody,
      success: { schema: success(sessionSchema) },
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    async (ctx, { body }) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      await checkSettings(deps, account.orgId, body, session.id);
      sessions.transaction(() => {
        store.setProxyUrl(session.id, body.proxy_url, new Date().toISOString());
        sessions.audit(session, account.actor, 'session.proxy_updated', { proxy: body.proxy_url === null ? 'cleared' : 'set' });
      });
      ctx.body = { success: true, data: detail(deps, store.session(session.id)!) };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'GET',
      path: `${prefix}/:id/webhook-signing`,
      summary: `How webhook deliveries of a session are signed${alias}`,
      tag,
      credential: 'account',
      success: { schema: success(z.object({ mode: z.enum(['secret', 'hmac']) })) },
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx) => {
      ctx.body = { success: true, data: { mode: sessionFor(ctx).webhookSigning } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'PUT',
      path: `${prefix}/:id/webhook-signing`,
      summary: `Switch webhook signing between the plain secret and HMAC-SHA256${alias}`,
      tag,
      credential: 'account',
      body: signingBody,
      success: { schema: success(z.object({ mode: z.enum(['secret', 'hmac']) })) },
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx, { body }) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      sessions.transaction(() => {
        store.updateSession(session.id, { webhook_signing: body.mode }, new Date().toISOString());
        sessions.audit(session, account.actor, 'session.webhook_signing_updated', { mode: body.mode });
      });
      ctx.body = { success: true, data: { mode: body.mode } };
    },
  );

  operation(
    deps,
    router,
    {
      method: 'POST',
      path: `${prefix}/:id/rotate-webhook-secret`,
      summary: `Replace a session's webhook secret; with the webhooks plugin, the old one keeps signing deliveries (beside the new) for a grace period${alias}`,
      tag,
      credential: 'account',
      body: emptyBody,
      success: {
        schema: success(
          z.object({
            webhook_secret: z.string(),
            previous_secret_valid_until: z.string().nullable().describe('ISO 8601: until when deliveries also carry the old signature; null when it is dropped at once.'),
          }),
        ),
      },
      errors: { 404: 'No such session: `{success: false, error, message}`' },
    },
    (ctx) => {
      const account = accountOf(ctx);
      const session = sessionFor(ctx);
      const rotated = sessions.rotateWebhookSecret(session, account.actor, newWebhookSecret());
      ctx.body = { success: true, data: { webhook_secret: rotated.secret, previous_secret_valid_until: rotated.previousValidUntil?.toISOString() ?? null } };
    },
  );

  return router;
}

/** `POST /api/sandbox-sessions`: a sandbox session, connected at once, its number generated unless given. */
export function sandboxSessionRoutes(deps: RouteDeps): RouteGroup {
  const router = deps.api.group({ prefixes: ['/api/sandbox-sessions'], envelope: 'messaging' });
  operation(
    deps,
    router,
    {
      method: 'POST',
      path: '/api/sandbox-sessions',
      summary: 'Create a sandbox session (always connected; sends between sandbox sessions arrive as inbound messages)',
      tag: 'Sandbox',
      credential: 'account',
      body: sandboxBody,
      success: { status: 201, schema: success(sessionSchema) },
    },
    async (ctx, { body }) => {
      const session = await createSession(deps, accountOf(ctx), body, 'sandbox');
      ctx.status = 201;
      ctx.body = { success: true, data: detail(deps, session) };
    },
  );
  return router;
}
