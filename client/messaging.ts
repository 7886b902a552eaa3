/**
 * The messaging client commands: `wharf pat create|list|revoke`, `wharf sessions
 * list|create|get|update|delete|connect|disconnect|regenerate-key` and `wharf sandbox receive`. They act
 * as the signed-in user (the OAuth token of `wharf login`); `sandbox receive` reads the session's
 * API key with it and then calls the session-scoped route with that key.
 */
import { print, table, warn } from './output.ts';
import type { Argv } from 'yargs';
import pkg from '../package.json' with { type: 'json' };
import { type Client, ClientError, errorText, readJson } from './http.ts';
import { UnreachableError, UsageError } from './errors.ts';
import { type ClientArgs, clientFor, run } from './command-kit.ts';

interface Token {
  id: number;
  name: string;
  hint: string;
  user_id: string;
  created_by: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  token?: string;
}

interface Session {
  id: number;
  name: string;
  phone_number: string;
  status: string;
  type: string;
  api_key: string;
  webhook_url: string | null;
  webhook_enabled: boolean;
  webhook_events: string[] | null;
  account_protection: boolean;
  log_messages: boolean;
  created_at: string;
  [field: string]: unknown;
}

/** The session's signing mode (not part of the session object the API returns). */
async function signingOf(client: Client, id: string): Promise<string> {
  const { data } = await client.request<Envelope<{ mode: string }>>('GET', `/api/whatsapp-sessions/${id}/webhook-signing`);
  return data.mode;
}

interface Envelope<T> {
  success: true;
  data: T;
}

const when = (iso: string | null) => (iso ? iso.replace(/\.\d{3}Z$/, 'Z') : '-');

function sessionId(value: unknown): string {
  const id = String(value ?? '');
  if (!/^[1-9]\d{0,15}$/.test(id)) throw new ClientError(`session id must be a positive integer: ${id}`);
  return id;
}

/** A request with a session API key (the user's token does not act as a session). */
async function withSessionKey<T>(instance: string, apiKey: string, method: string, path: string, body: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${instance}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json', 'content-type': 'application/json', 'user-agent': `wharf-cli/${pkg.version}` },
      body: JSON.stringify(body),
    });
  } catch (err) {
    throw new UnreachableError(instance, err);
  }
  const parsed = await readJson(res);
  if (!res.ok) throw new ClientError(errorText(parsed, res.status), res.status);
  return parsed as T;
}

/** How `webhook_events` reads: null delivers nothing, [] delivers every event. */
function eventsText(events: string[] | null): string {
  return events === null ? '- (none)' : events.length === 0 ? '[] (all)' : events.join(', ');
}

/** `…a1b2`: the end of a session API key, enough to tell keys apart (as `pat list` shows tokens). */
function keyHint(key: string): string {
  return `…${key.slice(-4)}`;
}

/**
 * A session as the CLI prints it: the API key (which the API returns whole, per the spec) only as
 * `api_key_hint`, unless `reveal` (`--show-secret`). `create` and `regenerate-key` print the
 * key whole: that is when the user needs it.
 */
function masked(s: Session, reveal = false): Record<string, unknown> {
  if (reveal) return s;
  const { api_key, ...rest } = s;
  return { ...rest, api_key_hint: keyHint(api_key) };
}

/** A session in lines; `secret`: the API key whole and the webhook secret. */
function sessionText(s: Session, options: { secret?: boolean } = {}): string {
  return [
    `id: ${s.id}`,
    `name: ${s.name}`,
    `phone_number: ${s.phone_number}`,
    `type: ${s.type}`,
    `status: ${s.status}`,
    `api_key: ${options.secret ? s.api_key : keyHint(s.api_key)}`,
    `webhook_url: ${s.webhook_url ?? '-'}`,
    `webhook_enabled: ${s.webhook_enabled}`,
    `webhook_events: ${eventsText(s.webhook_events)}`,
    ...(typeof s.webhook_signing === 'string' ? [`webhook_signing: ${s.webhook_signing}`] : []),
    ...(options.secret && typeof s.webhook_secret === 'string' ? [`webhook_secret: ${s.webhook_secret}`] : []),
    `account_protection: ${s.account_protection}`,
    `log_messages: ${s.log_messages}`,
    `created_at: ${when(s.created_at)}`,
  ].join('\n');
}

/**
 * Why a session's webhook would deliver nothing, or null when it delivers: the three settings
 * that must all be set, named by the flag that sets each.
 */
function silentWebhook(s: Session): string | null {
  const missing = [
    ...(s.webhook_url ? [] : ['no webhook_url (--webhook-url URL)']),
    ...(s.webhook_enabled ? [] : ['webhook_enabled is false (--webhook-enabled)']),
    ...(s.webhook_events === null ? ['webhook_events subscribes to nothing (--events all, or names)'] : []),
  ];
  return missing.length ? missing.join('; ') : null;
}

/**
 * `--events`: names, separated by commas or given several times; `all` is every event (`[]`),
 * `none` is no event (`null`), as the API spells them.
 */
export function parseEvents(values: readonly string[] | undefined): string[] | null | undefined {
  if (values === undefined) return undefined;
  const names = values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  if (names.length === 1 && names[0] === 'all') return [];
  if (names.length === 1 && names[0] === 'none') return null;
  if (names.includes('all') || names.includes('none')) throw new ClientError('--events: "all" and "none" stand alone, not beside event names');
  if (!names.length) throw new ClientError('--events: give event names (GET /api/webhook-events lists them), all, or none');
  return names;
}

interface WebhookArgs {
  webhookUrl?: string;
  webhookEnabled?: boolean;
  events?: string[];
  signing?: 'secret' | 'hmac';
}

/** The settings of a session the flags name (only those given). */
function settingsOf(args: WebhookArgs & { name?: string; phone?: string; accountProtection?: boolean; logMessages?: boolean }): Record<string, unknown> {
  const events = parseEvents(args.events);
  return {
    ...(args.name !== undefined ? { name: args.name } : {}),
    ...(args.phone !== undefined ? { phone_number: args.phone } : {}),
    // An empty --webhook-url "" removes the URL.
    ...(args.webhookUrl !== undefined ? { webhook_url: args.webhookUrl === '' ? null : args.webhookUrl } : {}),
    ...(args.webhookEnabled !== undefined ? { webhook_enabled: args.webhookEnabled } : {}),
    ...(events !== undefined ? { webhook_events: events } : {}),
    ...(args.accountProtection !== undefined ? { account_protection: args.accountProtection } : {}),
    ...(args.logMessages !== undefined ? { log_messages: args.logMessages } : {}),
  };
}

/** The webhook flags shared by create and update. */
function webhookOptions<T>(c: Argv<T>, create: boolean) {
  return c
    .option('webhook-url', {
      type: 'string',
      describe: create
        ? 'Where webhook events are POSTed; subscribes to every event and enables the webhook unless --events / --no-webhook-enabled say otherwise'
        : 'Where webhook events are POSTed ("" removes it)',
    })
    .option('webhook-enabled', {
      type: 'boolean',
      describe: create ? 'Deliver webhooks (default: on when --webhook-url is given)' : 'Deliver webhooks (--no-webhook-enabled pauses them)',
    })
    .option('events', {
      type: 'string',
      array: true,
      describe: `Events to deliver: names (comma-separated or repeated), all, or none${create ? ' (default with --webhook-url: all)' : ''}`,
    })
    .option('signing', {
      choices: ['secret', 'hmac'] as const,
      describe: 'secret: X-Webhook-Signature is the secret; hmac: HMAC-SHA256 of the body, plus Standard Webhooks headers',
    });
}

interface PatCreateArgs extends ClientArgs {
  name: string;
  expiresAt?: string;
}

interface SessionArgs extends ClientArgs {
  id: string;
}

interface SessionCreateArgs extends ClientArgs, WebhookArgs {
  name: string;
  phone?: string;
  sandbox?: boolean;
  accountProtection?: boolean;
  logMessages?: boolean;
}

interface SessionUpdateArgs extends SessionArgs, WebhookArgs {
  name?: string;
  phone?: string;
  accountProtection?: boolean;
  logMessages?: boolean;
}

interface ShowSecretArgs {
  showSecret?: boolean;
}

interface SessionGetArgs extends SessionArgs, ShowSecretArgs {}

interface ReceiveArgs extends ClientArgs {
  session: string;
  from: string;
  text: string;
  chat: 'personal' | 'group' | 'newsletter';
  pushName?: string;
  groupJid?: string;
}

export function addMessagingCommands(cli: Argv): void {
  cli
    .command('pat', 'Personal access tokens for the messaging API', (y) =>
      y
        .command(
          'create',
          'Mint a personal access token (shown once)',
          (c) =>
            c
              .option('name', { type: 'string', demandOption: true, describe: 'What the token is for' })
              .option('expires-at', { type: 'string', describe: 'When it stops working (ISO 8601); default never' }),
          run<PatCreateArgs>(async (args) => {
            const body = { name: args.name, ...(args.expiresAt ? { expires_at: args.expiresAt } : {}) };
            const { data } = await clientFor(args).request<Envelope<Token>>('POST', '/api/personal-access-tokens', { body });
            print(
              args,
              `Created personal access token ${data.id} "${data.name}"${data.expires_at ? ` (expires ${when(data.expires_at)})` : ''}. It is shown only this once:\n${data.token}`,
              data,
            );
          }),
        )
        .command(
          'list',
          "List the organization's personal access tokens",
          {},
          run<ClientArgs>(async (args) => {
            const { data } = await clientFor(args).request<Envelope<Token[]>>('GET', '/api/personal-access-tokens');
            const rows = data.map((t) => [String(t.id), t.name, t.hint, when(t.created_at), when(t.last_used_at), when(t.expires_at)]);
            print(args, data.length ? table(['ID', 'NAME', 'TOKEN', 'CREATED', 'LAST USED', 'EXPIRES'], rows) : 'No personal access tokens.', data);
          }),
        )
        .command(
          'revoke <id>',
          'Revoke a personal access token; it fails from the next request on',
          (c) => c.positional('id', { type: 'string', demandOption: true, describe: 'Token id (wharf pat list)' }),
          run<SessionArgs>(async (args) => {
            const { data } = await clientFor(args).request<Envelope<{ id: number; revoked: boolean }>>(
              'DELETE',
              `/api/personal-access-tokens/${encodeURIComponent(args.id)}`,
            );
            print(args, `Revoked personal access token ${data.id}`, data);
          }),
        )
        .demandCommand(1, 'name a pat command'),
    )
    .command('sessions', 'Messaging sessions', (y) =>
      y
        .command(
          'list',
          "List the organization's sessions (API keys as a hint, …a1b2)",
          (c) => c.option('show-secret', { type: 'boolean', default: false, describe: 'Print the API keys whole' }),
          run<ClientArgs & ShowSecretArgs>(async (args) => {
            const { data } = await clientFor(args).request<Envelope<Session[]>>('GET', '/api/whatsapp-sessions');
            const rows = data.map((s) => [String(s.id), s.name, s.phone_number, s.type, s.status, args.showSecret ? s.api_key : keyHint(s.api_key)]);
            const json = data.map((s) => masked(s, args.showSecret));
            print(args, data.length ? table(['ID', 'NAME', 'PHONE', 'TYPE', 'STATUS', 'API KEY'], rows) : 'No sessions.', json);
          }),
        )
        .command(
          'create',
          'Create a session (--sandbox: a sandbox session, connected at once)',
          (c) =>
            webhookOptions(
              c
                .option('name', { type: 'string', demandOption: true, describe: 'Display name' })
                .option('phone', { type: 'string', describe: 'Phone number, E.164 (required for WhatsApp sessions; sandbox default +1555...)' })
                .option('sandbox', { type: 'boolean', default: false, describe: 'Create a sandbox session (POST /api/sandbox-sessions)' }),
              true,
            )
              .option('account-protection', { type: 'boolean', describe: 'One send per interval (default off)' })
              .option('log-messages', { type: 'boolean', describe: 'Keep message content in the message log' }),
          run<SessionCreateArgs>(async (args) => {
            const body = settingsOf(args);
            // A URL alone means "deliver here": subscribe to every event and enable, unless told otherwise.
            if (typeof body.webhook_url === 'string') {
              body.webhook_events ??= [];
              body.webhook_enabled ??= true;
            }
            const client = clientFor(args);
            const { data } = await client.request<Envelope<Session>>('POST', args.sandbox ? '/api/sandbox-sessions' : '/api/whatsapp-sessions', { body });
            let signing = '';
            if (args.signing) {
              try {
                await client.request('PUT', `/api/whatsapp-sessions/${data.id}/webhook-signing`, { body: { mode: args.signing } });
              } catch (err) {
                throw new ClientError(
                  `created session ${data.id}, but setting --signing ${args.signing} failed: ${(err as Error).message}; run wharf sessions update ${data.id} --signing ${args.signing}`,
                );
              }
              data.webhook_signing = args.signing;
              signing = `, ${args.signing} signing`;
            }
            const webhook = data.webhook_url
              ? `\nwebhook: ${data.webhook_url} (${data.webhook_enabled ? 'enabled' : 'disabled'}, events: ${eventsText(data.webhook_events)}${signing})`
              : '';
            print(
              args,
              `Created ${data.type} session ${data.id} "${data.name}" (${data.phone_number}, ${data.status})\napi_key: ${data.api_key}${webhook}`,
              data,
            );
          }),
        )
        .command(
          'update <id>',
          "Change a session's settings: name, phone, webhook URL, enabled, events, signing; the others stay as they are",
          (c) =>
            webhookOptions(
              c
                .positional('id', { type: 'string', demandOption: true })
                .option('name', { type: 'string', describe: 'Display name' })
                .option('phone', { type: 'string', describe: 'Phone number, E.164' }),
              false,
            )
              .option('account-protection', { type: 'boolean', describe: 'One send per interval' })
              .option('log-messages', { type: 'boolean', describe: 'Keep message content in the message log' }),
          run<SessionUpdateArgs>(async (args) => {
            const id = sessionId(args.id);
            const body = settingsOf(args);
            if (!Object.keys(body).length && !args.signing) {
              throw new UsageError(
                'nothing to update: give --webhook-url, --webhook-enabled, --events, --signing, --name, --phone, --account-protection or --log-messages',
              );
            }
            const client = clientFor(args);
            let session: Session;
            if (Object.keys(body).length) {
              ({ data: session } = await client.request<Envelope<Session>>('PUT', `/api/whatsapp-sessions/${id}`, { body }));
            } else {
              ({ data: session } = await client.request<Envelope<Session>>('GET', `/api/whatsapp-sessions/${id}`));
            }
            if (args.signing) {
              try {
                await client.request('PUT', `/api/whatsapp-sessions/${id}/webhook-signing`, { body: { mode: args.signing } });
              } catch (err) {
                throw new ClientError(
                  `${Object.keys(body).length ? `updated session ${id}, but ` : ''}setting --signing ${args.signing} failed: ${(err as Error).message}`,
                );
              }
            }
            session.webhook_signing = args.signing ?? (await signingOf(client, id));
            const { webhook_secret: _secret, ...rest } = session;
            print(args, `Updated session ${id}\n${sessionText(session)}`, masked(rest));
            const silent = silentWebhook(session);
            if (silent && !args.json) warn(`wharf: note: session ${id} delivers no webhooks: ${silent}`);
          }),
        )
        .command(
          ['get <id>', 'show <id>'],
          'Show a session, its API key as a hint (…a1b2); --show-secret: the key whole and the webhook secret',
          (c) =>
            c
              .positional('id', { type: 'string', demandOption: true })
              .option('show-secret', { type: 'boolean', default: false, describe: 'Print the API key whole, and the webhook secret' }),
          run<SessionGetArgs>(async (args) => {
            const id = sessionId(args.id);
            const client = clientFor(args);
            const { data } = await client.request<Envelope<Session>>('GET', `/api/whatsapp-sessions/${id}`);
            data.webhook_signing ??= await signingOf(client, id);
            if (!args.showSecret) delete data.webhook_secret;
            print(args, sessionText(data, { secret: args.showSecret }), masked(data, args.showSecret));
          }),
        )
        .command(
          'delete <id>',
          'Delete a session (its API key stops working at once)',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          run<SessionArgs>(async (args) => {
            const id = sessionId(args.id);
            await clientFor(args).request('DELETE', `/api/whatsapp-sessions/${id}`);
            print(args, `Deleted session ${id}`, { id: Number(id), deleted: true });
          }),
        )
        .command(
          'connect <id>',
          'Connect a session (a WhatsApp session prints its pairing QR code)',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          run<SessionArgs>(async (args) => {
            const id = sessionId(args.id);
            const { data } = await clientFor(args).request<Envelope<{ status: string; qrCode?: string; message?: string }>>(
              'POST',
              `/api/whatsapp-sessions/${id}/connect`,
              { body: {} },
            );
            print(args, `Session ${id}: ${data.status}${data.message ? ` (${data.message})` : ''}${data.qrCode ? `\nQR code: ${data.qrCode}` : ''}`, {
              id: Number(id),
              ...data,
            });
          }),
        )
        .command(
          'disconnect <id>',
          'Disconnect a session',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          run<SessionArgs>(async (args) => {
            const id = sessionId(args.id);
            const { data } = await clientFor(args).request<Envelope<{ status: string; message?: string }>>('POST', `/api/whatsapp-sessions/${id}/disconnect`, {
              body: {},
            });
            print(args, `Session ${id}: ${data.status}${data.message ? ` (${data.message})` : ''}`, { id: Number(id), ...data });
          }),
        )
        .command(
          'regenerate-key <id>',
          "Replace a session's API key; the old one stops working at once",
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          run<SessionArgs>(async (args) => {
            const id = sessionId(args.id);
            const res = await clientFor(args).request<{ success: true; api_key: string }>('POST', `/api/whatsapp-sessions/${id}/regenerate-key`, { body: {} });
            print(args, `New API key of session ${id} (the old one no longer works):\n${res.api_key}`, { id: Number(id), api_key: res.api_key });
          }),
        )
        .demandCommand(1, 'name a sessions command'),
    )
    .command('sandbox', 'The sandbox network', (y) =>
      y
        .command(
          'receive',
          'Make a sandbox session receive an inbound text message (a real, signed webhook delivery follows)',
          (c) =>
            c
              .option('session', { type: 'string', demandOption: true, describe: 'Sandbox session id' })
              .option('from', { type: 'string', demandOption: true, describe: 'Sender phone number, E.164' })
              .option('text', { type: 'string', demandOption: true, describe: 'Message text' })
              .option('chat', { choices: ['personal', 'group', 'newsletter'] as const, default: 'personal' as const, describe: 'Chat the message arrives in' })
              .option('push-name', { type: 'string', describe: 'Sender display name' })
              .option('group-jid', { type: 'string', describe: 'With --chat group: the group JID' }),
          run<ReceiveArgs>(async (args) => {
            const id = sessionId(args.session);
            const client = clientFor(args);
            const { data: session } = await client.request<Envelope<Session>>('GET', `/api/whatsapp-sessions/${id}`);
            const body = {
              from: args.from,
              text: args.text,
              chat: args.chat,
              ...(args.pushName !== undefined ? { pushName: args.pushName } : {}),
              ...(args.groupJid !== undefined ? { groupJid: args.groupJid } : {}),
            };
            const { data } = await withSessionKey<Envelope<{ key: { id: string; remoteJid: string } }>>(
              client.instance,
              session.api_key,
              'POST',
              '/api/sandbox/receive',
              body,
            );
            print(args, `Session ${id} received message ${data.key.id} from ${args.from} in a ${args.chat} chat (${data.key.remoteJid})`, {
              session: Number(id),
              key: data.key,
            });
          }),
        )
        .demandCommand(1, 'name a sandbox command'),
    );
}
