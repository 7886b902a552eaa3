/**
 * What the messaging routes share: the services they call, the session as the API shows it,
 * WasenderAPI-style pagination and list pages, and the field schemas. Each route declares its
 * credential (`sessions.credentials.account` or `.sessionKey`), checked before the body is
 * validated, so a missing credential is a 401 whatever the body; the handler gets what the
 * credential loaded as `input.auth`.
 */
import { z } from 'zod';
import { displayName, once } from '../../../core/validate.ts';
import type { ApiRegistry } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { SessionsConfig } from '../config.ts';
import type { Directory } from '../directory.ts';
import { canonicalEvent, EVENT_ALIASES, EVENT_NAMES, type EventName } from '../events.ts';
import type { SessionAdmin } from '../management.ts';
import type { MediaUrls } from '../media.ts';
import type { Messages } from '../messages.ts';
import { normalizePhone } from '../networks/nodes.ts';
import type { PersonalAccessTokens } from '../personal-access-tokens.ts';
import type { Sessions } from '../service.ts';
import type { SessionRecord } from '../types.ts';

/** The plugin's services, for its routes. */
export interface RouteDeps {
  api: ApiRegistry;
  config: SessionsConfig;
  sessions: Sessions;
  admin: SessionAdmin;
  messages: Messages;
  pats: PersonalAccessTokens;
  media: MediaUrls;
  directory: Directory;
}

/** A 422 naming one field, as the messaging API words it. */
export function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

// Field schemas. Built on first use, like every route schema (`z.lazy`, or core/validate.ts
// `once` where a route takes fields from an object's shape): not when the module loads.

export const phoneNumber = z.lazy(() =>
  z
    .string()
    .max(32)
    .refine((v) => normalizePhone(v) !== null, { message: 'must be a phone number in E.164 format, for example +14155550123' })
    .transform((v) => normalizePhone(v)!),
);

const httpUrl = z.lazy(() =>
  z
    .string()
    .max(2048)
    .refine(
      (v) => {
        try {
          const url = new URL(v);
          return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
        } catch {
          return false;
        }
      },
      { message: 'must be an http or https URL' },
    ),
);

export const mediaUrl = httpUrl;

export const webhookEvents = z.lazy(() =>
  z
    .array(z.string().max(64))
    .max(EVENT_NAMES.length + EVENT_ALIASES.size)
    .superRefine((names, ctx) => {
      names.forEach((name, i) => {
        if (!canonicalEvent(name)) ctx.addIssue({ code: 'custom', path: [i], message: `unknown event "${name}" (GET /api/webhook-events lists them)` });
      });
    })
    .transform((names) => [...new Set(names.map((n) => canonicalEvent(n)!))] as EventName[])
    .describe('Event names to deliver: absent or null means none, [] means all. WasenderAPI spellings (messages-personal.received, ...) are accepted.'),
);

/** Session settings shared by create and update (all optional here). */
export const sessionSettings = once(() => ({
  name: displayName(100).describe('Display name; also the push name sandbox recipients see.'),
  phone_number: phoneNumber.describe('The account number, E.164.'),
  account_protection: z.boolean().describe('Limit sends to one message per interval (default 5 seconds).'),
  log_messages: z.boolean().describe('Keep message content in the message log (needed to resend failed messages).'),
  webhook_url: httpUrl.nullable().describe('Where webhook events are POSTed.'),
  webhook_enabled: z.boolean().describe('When false, no deliveries are made.'),
  webhook_events: webhookEvents.nullable(),
  read_incoming_messages: z.boolean().describe('Mark incoming messages as read automatically.'),
  auto_reject_calls: z.boolean().describe('Reject incoming calls (stored; the sandbox has no calls).'),
  ignore_groups: z.boolean().describe('Drop incoming group messages.'),
  ignore_channels: z.boolean().describe('Drop incoming newsletter (channel) messages.'),
  ignore_broadcasts: z.boolean().describe('Drop incoming broadcast and status messages.'),
  always_online: z.boolean().describe('Show the account as online (stored; the sandbox is always online).'),
  proxy_url: z.string().max(2048).nullable().describe('http, https or socks5 proxy URL with a public domain name.'),
}));

/** `?paginated=true&page&limit`: absent means the whole list. */
export const listQuery = z.lazy(() =>
  z.strictObject({
    paginated: z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .describe('true: answer a page (Laravel paginator) instead of the whole list. Implied by page or limit.'),
    page: z.coerce.number().int().min(1).max(1_000_000).optional().describe('Page number, from 1 (default 1).'),
    limit: z.coerce.number().int().min(1).max(1000).optional().describe('Rows per page (default 100, at most 1000).'),
  }),
);

/** The whole list, or one page of it in Laravel's paginator shape. */
export function listOrPage<T>(rows: T[], query: z.output<typeof listQuery>) {
  const wanted = query.paginated === undefined ? query.page !== undefined || query.limit !== undefined : query.paginated === 'true' || query.paginated === '1';
  if (!wanted) return rows;
  const page = query.page ?? 1;
  const limit = query.limit ?? 100;
  return paginated(rows.slice((page - 1) * limit, page * limit), rows.length, page, limit);
}

export const emptyBody = z.lazy(() => z.strictObject({}));

/** The 409 every operation on a session's network may answer. */
export const NOT_CONNECTED = { 409: 'The session is not connected: `{success: false, error, message}`' };

export const pageQuery = once(() => ({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1).describe('Page number, from 1.'),
  per_page: z.coerce.number().int().min(1).max(100).default(10).describe('Rows per page (at most 100).'),
}));

/** Laravel's paginator shape, which WasenderAPI's log endpoints use. */
export function paginated<T>(rows: T[], total: number, page: number, perPage: number) {
  const from = rows.length ? (page - 1) * perPage + 1 : null;
  return {
    current_page: page,
    data: rows,
    from,
    to: from === null ? null : from + rows.length - 1,
    per_page: perPage,
    total,
    last_page: Math.max(1, Math.ceil(total / perPage)),
  };
}

/** A session as the API shows it; `secrets` adds the webhook secret and proxy URL (single-session reads). */
export function sessionView(session: SessionRecord, secrets: { apiKey: string; webhookSecret?: string; proxyUrl?: string | null }) {
  return {
    id: session.id,
    name: session.name,
    phone_number: session.phoneNumber,
    status: session.status,
    status_reason: session.statusReason,
    type: session.type,
    account_protection: session.accountProtection,
    log_messages: session.logMessages,
    webhook_url: session.webhookUrl,
    webhook_enabled: session.webhookEnabled,
    webhook_events: session.webhookEvents,
    read_incoming_messages: session.readIncomingMessages,
    auto_reject_calls: session.autoRejectCalls,
    ignore_groups: session.ignoreGroups,
    ignore_channels: session.ignoreChannels,
    ignore_broadcasts: session.ignoreBroadcasts,
    always_online: session.alwaysOnline,
    api_key: secrets.apiKey,
    ...(secrets.webhookSecret !== undefined ? { webhook_secret: secrets.webhookSecret } : {}),
    ...(secrets.proxyUrl !== undefined ? { proxy_url: secrets.proxyUrl } : {}),
    created_at: session.createdAt,
    updated_at: session.updatedAt,
  };
}

/** OpenAPI description of a session object. */
export const sessionSchema = z.lazy(() =>
  z.object({
    id: z.int(),
    name: z.string(),
    phone_number: z.string(),
    status: z.enum(['connecting', 'connected', 'disconnected', 'need_scan', 'logged_out', 'expired', 'failed']),
    status_reason: z
      .string()
      .nullable()
      .describe(
        "Why the session has its status (Wharf's addition): the reason of its last status change or reconnect attempt, e.g. why connecting fails; null when none was given. The session log keeps the history.",
      ),
    type: z.enum(['whatsapp', 'sandbox']),
    account_protection: z.boolean(),
    log_messages: z.boolean(),
    webhook_url: z.string().nullable(),
    webhook_enabled: z.boolean(),
    webhook_events: z.array(z.string()).nullable(),
    read_incoming_messages: z.boolean(),
    auto_reject_calls: z.boolean(),
    ignore_groups: z.boolean(),
    ignore_channels: z.boolean(),
    ignore_broadcasts: z.boolean(),
    always_online: z.boolean(),
    api_key: z.string(),
    webhook_secret: z.string().optional(),
    proxy_url: z.string().nullable().optional(),
    created_at: z.string(),
    updated_at: z.string(),
  }),
);

export const success = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });
