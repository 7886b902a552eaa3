/**
 * Dispatch records (account-level credential: a personal access token or a signed-in user):
 * `GET /api/dispatches` (filters, Laravel paginator), `GET /api/dispatches/{id}` with every
 * attempt, `POST /api/dispatches/{id}/redeliver`. Everything is scoped to the caller's
 * organization: another organization's dispatch is a 404 like a missing one.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import type { ApiRegistry } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { once } from '../../../core/validate.ts';
import type { SessionsService } from '../../sessions/types.ts';
import type { WebhookDispatcher } from '../dispatcher.ts';
import type { AttemptRow, DispatchRow, WebhooksStore } from '../store.ts';

export interface RouteDeps {
  api: ApiRegistry;
  sessions: SessionsService;
  store: WebhooksStore;
  dispatcher: WebhookDispatcher;
  maxAttempts: number;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const time = z.lazy(() =>
  z
    .string()
    .max(40)
    .refine((v) => parseTime(v) !== null, { message: 'must be an ISO 8601 time or Unix milliseconds' })
    .transform((v) => parseTime(v)!),
);

function parseTime(value: string): number | null {
  if (/^\d{1,16}$/.test(value)) return Number(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value)) return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

/** The filters of `GET /api/dispatches`; event names as the sessions plugin spells them (aliases accepted). */
function listQuery(canonicalEvent: SessionsService['canonicalEvent']) {
  return z.strictObject({
    page: z.coerce.number().int().min(1).max(1_000_000).default(1).describe('Page number, from 1.'),
    per_page: z.coerce.number().int().min(1).max(100).default(20).describe('Records per page (at most 100).'),
    session_id: z.coerce.number().int().min(1).optional().describe('Only dispatches of this session.'),
    status: z.enum(['pending', 'delivered', 'abandoned']).optional().describe('Only dispatches in this status.'),
    event: z
      .string()
      .max(64)
      .refine((v) => canonicalEvent(v) !== undefined, { message: 'unknown event (GET /api/webhook-events lists them)' })
      .transform((v) => canonicalEvent(v)!)
      .optional()
      .describe('Only dispatches of this event (aliases accepted).'),
    from: time.optional().describe('Only dispatches created at or after this time (ISO 8601 or Unix ms).'),
    to: time.optional().describe('Only dispatches created before this time (ISO 8601 or Unix ms).'),
  });
}

const emptyBody = z.lazy(() => z.strictObject({}));

const dispatchSchema = once(() =>
  z.object({
    id: z.int(),
    event_id: z.int().describe('The recorded event; the same on a redelivery.'),
    webhook_id: z.string().describe('The webhook-id header: stable across retries and redeliveries of one event.'),
    session_id: z.int(),
    event: z.string(),
    url: z.string().describe('Where the latest attempt went (where the first will go, while none was made).'),
    status: z.enum(['pending', 'delivered', 'abandoned']),
    in_flight: z.boolean().describe('An attempt is being made right now.'),
    attempt_count: z.int(),
    max_attempts: z.int(),
    last_status_code: z.int().nullable(),
    last_error: z.string().nullable(),
    next_attempt_at: z.string().nullable().describe('ISO 8601, while pending.'),
    redelivery_of: z.int().nullable().describe('The dispatch this one redelivers, if any.'),
    created_at: z.string(),
    updated_at: z.string(),
    finished_at: z.string().nullable(),
  }),
);

const attemptSchema = z.lazy(() =>
  z.object({
    number: z.int(),
    started_at: z.string(),
    duration_ms: z.int(),
    status_code: z.int().nullable(),
    error: z.string().nullable(),
    response: z.string().nullable().describe("The first KiB of the receiver's answer body."),
  }),
);

const paginatedSchema = z.lazy(() =>
  z.object({
    current_page: z.int(),
    data: z.array(dispatchSchema()),
    from: z.int().nullable(),
    to: z.int().nullable(),
    per_page: z.int(),
    total: z.int(),
    last_page: z.int(),
  }),
);

const notFound = { 404: 'No such dispatch in this organization: `{success: false, error, message}`' };

export function dispatchRoutes(deps: RouteDeps): RouteGroup {
  const { api, sessions, store, dispatcher, maxAttempts } = deps;
  const group = api.group({ prefixes: ['/api/dispatches'], envelope: 'messaging' });
  const tag = 'Webhooks';
  const account = sessions.credentials.account;
  type Org = { orgId: string };

  const view = (row: DispatchRow) => ({
    id: row.id,
    event_id: row.event_id,
    webhook_id: row.webhook_id,
    session_id: row.session_id,
    event: row.event,
    url: row.url,
    status: row.status,
    in_flight: dispatcher.inFlight(row.id, row.session_id),
    attempt_count: row.attempt_count,
    max_attempts: maxAttempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    redelivery_of: row.redelivery_of,
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
    finished_at: iso(row.finished_at),
  });
  const attemptView = (a: AttemptRow) => ({
    number: a.number,
    started_at: iso(a.started_at)!,
    duration_ms: a.duration_ms,
    status_code: a.status_code,
    error: a.error,
    response: a.response,
  });
  const dispatchOf = async (ctx: Context, { orgId }: Org): Promise<DispatchRow> => {
    const idText = String(ctx.params.id ?? '');
    const row = /^[1-9]\d{0,15}$/.test(idText) ? await store.get(Number(idText), orgId) : undefined;
    if (!row) throw new WharfError('not_found', 'Dispatch not found');
    return row;
  };

  group.route({
    method: 'GET',
    path: '/api/dispatches',
    tag,
    auth: account,
    summary: "Webhook dispatch records of the organization's sessions, newest first: status, attempts, last answer, next attempt (Laravel paginator)",
    query: z.lazy(() => listQuery((name) => sessions.canonicalEvent(name))),
    success: { schema: z.lazy(() => z.object({ success: z.literal(true), data: paginatedSchema })) },
    async handler(ctx, { query, auth }) {
      const { page, per_page: perPage } = query;
      const { rows, total } = await store.list(
        { orgId: auth.orgId, sessionId: query.session_id, status: query.status, event: query.event, from: query.from, to: query.to },
        page,
        perPage,
      );
      const from = rows.length ? (page - 1) * perPage + 1 : null;
      ctx.body = {
        success: true,
        data: {
          current_page: page,
          data: rows.map(view),
          from,
          to: from === null ? null : from + rows.length - 1,
          per_page: perPage,
          total,
          last_page: Math.max(1, Math.ceil(total / perPage)),
        },
      };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/dispatches/:id',
    tag,
    auth: account,
    summary: 'One dispatch record with every attempt (status code, duration, error, first KiB of the answer) and the payload sent',
    success: {
      schema: z.lazy(() => z.object({ success: z.literal(true), data: dispatchSchema().extend({ attempts: z.array(attemptSchema), payload: z.unknown() }) })),
    },
    errors: notFound,
    async handler(ctx, { auth }) {
      const row = await dispatchOf(ctx, auth);
      const body = await store.body(row.id);
      ctx.body = {
        success: true,
        data: { ...view(row), attempts: (await store.attempts(row.id)).map(attemptView), payload: body === undefined ? null : JSON.parse(body) },
      };
    },
  });

  group.route({
    method: 'POST',
    path: '/api/dispatches/:id/redeliver',
    tag,
    auth: account,
    summary:
      "Deliver a finished dispatch's event again: a new dispatch (a new series of attempts) with the same event id and webhook-id, to the session's current webhook URL",
    body: emptyBody,
    success: { status: 202, schema: z.lazy(() => z.object({ success: z.literal(true), data: dispatchSchema() })) },
    errors: {
      ...notFound,
      409: 'The dispatch is still pending, or its session was deleted or has no enabled webhook: `{success: false, error, message}`',
    },
    async handler(ctx, { auth }) {
      const row = await dispatchOf(ctx, auth);
      if (row.status === 'pending')
        throw new WharfError(
          'conflict',
          `Dispatch ${row.id} is still pending (attempt ${row.attempt_count} of ${maxAttempts} made); redeliver it once it is delivered or abandoned`,
        );
      const session = await sessions.get(row.session_id);
      if (!session || session.orgId !== row.org_id) throw new WharfError('conflict', `Session ${row.session_id} was deleted: nothing to deliver to`);
      if (!session.webhookUrl) throw new WharfError('conflict', `Session ${session.id} has no webhook_url`);
      if (!session.webhookEnabled) throw new WharfError('conflict', `Session ${session.id} has its webhook disabled (webhook_enabled is false)`);
      const body = (await store.body(row.id))!;
      const id = await store.enqueue(
        {
          orgId: row.org_id,
          sessionId: row.session_id,
          eventId: row.event_id,
          webhookId: row.webhook_id,
          event: row.event,
          url: session.webhookUrl,
          body,
          redeliveryOf: row.id,
        },
        Date.now(),
      );
      dispatcher.markDue(row.session_id, Date.now());
      ctx.status = 202;
      ctx.body = { success: true, data: view((await store.get(id, row.org_id))!) };
    },
  });

  return group;
}
