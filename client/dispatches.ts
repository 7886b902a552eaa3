/**
 * `wharf dispatches list|get|redeliver`: the webhook dispatch records of the organization's
 * sessions, as the signed-in user.
 */
import { print, table } from './output.ts';
import type { Argv } from 'yargs';
import { type ClientArgs, clientFor, run } from './command-kit.ts';
import { ClientError } from './http.ts';

interface Dispatch {
  id: number;
  event_id: number;
  webhook_id: string;
  session_id: number;
  event: string;
  url: string;
  status: 'pending' | 'delivered' | 'abandoned';
  attempt_count: number;
  max_attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  created_at: string;
  attempts?: { number: number; status_code: number | null; duration_ms: number; error: string | null }[];
}

interface Page<T> {
  success: true;
  data: { data: T[]; current_page: number; last_page: number; total: number };
}

interface ListArgs extends ClientArgs {
  session?: number;
  status?: string;
  event?: string;
  page?: number;
}

interface IdArgs extends ClientArgs {
  id: string;
}

function dispatchId(value: string): string {
  if (!/^[1-9]\d{0,15}$/.test(value)) throw new ClientError(`dispatch id must be a positive integer: ${value}`);
  return value;
}

const outcome = (d: Dispatch) => (d.last_status_code ? String(d.last_status_code) : d.last_error ? d.last_error.slice(0, 40) : '-');

export function addDispatchCommands(cli: Argv): void {
  cli.command('dispatches', 'Webhook dispatch records', (y) =>
    y
      .command(
        'list',
        'List dispatch records, newest first',
        (c) =>
          c
            .option('session', { type: 'number', describe: 'Only this session id' })
            .option('status', { choices: ['pending', 'delivered', 'abandoned'] as const, describe: 'Only this status' })
            .option('event', { type: 'string', describe: 'Only this event name' })
            .option('page', { type: 'number', default: 1 }),
        run<ListArgs>(async (args) => {
          const query = new URLSearchParams({ page: String(args.page ?? 1) });
          if (args.session !== undefined) query.set('session_id', String(args.session));
          if (args.status) query.set('status', args.status);
          if (args.event) query.set('event', args.event);
          const { data } = await clientFor(args).request<Page<Dispatch>>('GET', `/api/dispatches?${query}`);
          const rows = data.data.map((d) => [
            String(d.id),
            String(d.session_id),
            d.event,
            d.status,
            `${d.attempt_count}/${d.max_attempts}`,
            outcome(d),
            d.created_at,
          ]);
          print(
            args,
            rows.length
              ? `${table(['ID', 'SESSION', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'CREATED'], rows)}\npage ${data.current_page} of ${data.last_page} (${data.total} records)`
              : 'No dispatch records.',
            data,
          );
        }),
      )
      .command(
        'get <id>',
        'Show one dispatch record with its attempts',
        (c) => c.positional('id', { type: 'string', demandOption: true }),
        run<IdArgs>(async (args) => {
          const { data } = await clientFor(args).request<{ data: Dispatch }>('GET', `/api/dispatches/${dispatchId(args.id)}`);
          const attempts = (data.attempts ?? []).map((a) => [
            String(a.number),
            a.status_code === null ? '-' : String(a.status_code),
            `${a.duration_ms} ms`,
            a.error ?? '',
          ]);
          print(
            args,
            `dispatch ${data.id}: ${data.event} of session ${data.session_id} to ${data.url}\nstatus ${data.status}, ${data.attempt_count} of ${data.max_attempts} attempts${data.next_attempt_at ? `, next at ${data.next_attempt_at}` : ''}\nwebhook-id ${data.webhook_id}${attempts.length ? `\n${table(['#', 'STATUS', 'DURATION', 'ERROR'], attempts)}` : ''}`,
            data,
          );
        }),
      )
      .command(
        'redeliver <id>',
        'Deliver a finished dispatch again (same event and webhook-id)',
        (c) => c.positional('id', { type: 'string', demandOption: true }),
        run<IdArgs>(async (args) => {
          const { data } = await clientFor(args).request<{ data: Dispatch }>('POST', `/api/dispatches/${dispatchId(args.id)}/redeliver`, { body: {} });
          print(args, `Redelivering as dispatch ${data.id} (${data.status})`, data);
        }),
      )
      .demandCommand(1, 'name a dispatches command'),
  );
}
