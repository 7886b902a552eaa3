/**
 * The messaging client commands: `wharf pat create|list|revoke`, `wharf sessions
 * list|create|get|delete|connect|disconnect|regenerate-key` and `wharf sandbox receive`. They act
 * as the signed-in user (the OAuth token of `wharf login`); `sandbox receive` reads the session's
 * API key with it and then calls the session-scoped route with that key.
 */
import type { Argv } from 'yargs';
import pkg from '../package.json' with { type: 'json' };
import { ClientError, errorText, readJson } from './http.ts';
import { type ClientArgs, clientFor, run } from './commands.ts';

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

interface Envelope<T> {
  success: true;
  data: T;
}

function print(args: ClientArgs, text: string, json: unknown): void {
  process.stdout.write(args.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
}

/** Left-aligned columns, two spaces apart. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
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
    throw new ClientError(`cannot reach ${instance}: ${(err as Error).message}`);
  }
  const parsed = await readJson(res);
  if (!res.ok) throw new ClientError(errorText(parsed, res.status), res.status);
  return parsed as T;
}

function sessionText(s: Session): string {
  return [
    `id: ${s.id}`,
    `name: ${s.name}`,
    `phone_number: ${s.phone_number}`,
    `type: ${s.type}`,
    `status: ${s.status}`,
    `api_key: ${s.api_key}`,
    `webhook_url: ${s.webhook_url ?? '-'}`,
    `webhook_enabled: ${s.webhook_enabled}`,
    `webhook_events: ${s.webhook_events === null ? '- (none)' : s.webhook_events.length === 0 ? '[] (all)' : s.webhook_events.join(', ')}`,
    `account_protection: ${s.account_protection}`,
    `log_messages: ${s.log_messages}`,
    `created_at: ${when(s.created_at)}`,
  ].join('\n');
}

interface PatCreateArgs extends ClientArgs {
  name: string;
  expiresAt?: string;
}

interface SessionArgs extends ClientArgs {
  id: string;
}

interface SessionCreateArgs extends ClientArgs {
  name: string;
  phone?: string;
  sandbox?: boolean;
  webhookUrl?: string;
  accountProtection?: boolean;
  logMessages?: boolean;
}

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
          "List the organization's sessions",
          {},
          run<ClientArgs>(async (args) => {
            const { data } = await clientFor(args).request<Envelope<Session[]>>('GET', '/api/whatsapp-sessions');
            const rows = data.map((s) => [String(s.id), s.name, s.phone_number, s.type, s.status]);
            print(args, data.length ? table(['ID', 'NAME', 'PHONE', 'TYPE', 'STATUS'], rows) : 'No sessions.', data);
          }),
        )
        .command(
          'create',
          'Create a session (--sandbox: a sandbox session, connected at once)',
          (c) =>
            c
              .option('name', { type: 'string', demandOption: true, describe: 'Display name' })
              .option('phone', { type: 'string', describe: 'Phone number, E.164 (required for WhatsApp sessions; sandbox default +1555...)' })
              .option('sandbox', { type: 'boolean', default: false, describe: 'Create a sandbox session (POST /api/sandbox-sessions)' })
              .option('webhook-url', { type: 'string', describe: 'Where webhook events are POSTed' })
              .option('account-protection', { type: 'boolean', describe: 'One send per interval (default off)' })
              .option('log-messages', { type: 'boolean', describe: 'Keep message content in the message log' }),
          run<SessionCreateArgs>(async (args) => {
            const body = {
              name: args.name,
              ...(args.phone !== undefined ? { phone_number: args.phone } : {}),
              ...(args.webhookUrl !== undefined ? { webhook_url: args.webhookUrl } : {}),
              ...(args.accountProtection !== undefined ? { account_protection: args.accountProtection } : {}),
              ...(args.logMessages !== undefined ? { log_messages: args.logMessages } : {}),
            };
            const { data } = await clientFor(args).request<Envelope<Session>>('POST', args.sandbox ? '/api/sandbox-sessions' : '/api/whatsapp-sessions', {
              body,
            });
            print(args, `Created ${data.type} session ${data.id} "${data.name}" (${data.phone_number}, ${data.status})\napi_key: ${data.api_key}`, data);
          }),
        )
        .command(
          'get <id>',
          'Show a session, with its API key',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          run<SessionArgs>(async (args) => {
            const { data } = await clientFor(args).request<Envelope<Session>>('GET', `/api/whatsapp-sessions/${sessionId(args.id)}`);
            print(args, sessionText(data), data);
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
