/**
 * The send-message loop (`POST /api/send-message`, a text from one sandbox session to another,
 * delivered and logged) with the database on PostgreSQL against the same on SQLite (issue 15):
 * two `wharf serve` in one run (bench/messaging.ts's server and setup), rounds interleaved.
 * PostgreSQL is a fresh database on the test server (test/pg/postgres.sh, or POSTGRES_URL).
 * Reports 2xx req/s, p99, the server's CPU time per request and the share of answers refused
 * (503: conflicting writes), with one connection and with 50, and PostgreSQL / SQLite ratios.
 * Usage: node bench/run.ts messaging-pg
 */
import { freshDatabase } from '../test/helpers/postgres.ts';
import { benchCookie, type EngineCase, engineTable } from './lib.ts';
import { sendSetup, startMessagingServer } from './messaging.ts';

export async function run(options: { rounds?: number; seconds?: number; connections?: number[] } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const connections = options.connections ?? [1, 50];
  const url = await freshDatabase();
  const servers = [
    { engine: 'SQLite', ...(await startMessagingServer('messaging-sqlite')) },
    // One server on its database: the embedded store may keep objects on its own disk.
    { engine: 'PostgreSQL', ...(await startMessagingServer('messaging-pg', { WHARF_DATABASE__URL: url, WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true' })) },
  ];
  try {
    const cases: EngineCase[] = [];
    for (const { engine, server, dataDir } of servers) {
      const { keyHeaders, recipient, script } = await sendSetup(server.url, await benchCookie(server.url), dataDir);
      cases.push({
        name: `wharf serve (source) on ${engine}, POST /api/send-message to a sandbox session`,
        url: `${server.url}/api/send-message`,
        headers: keyHeaders,
        script: script(recipient.phone_number),
        pid: server.child.pid!,
      });
    }
    // One connection (no concurrent writer), then 50 sending at once from the one session: on
    // PostgreSQL their transactions conflict, and a request refused 8 times is answered 503.
    const tables = connections.map(
      (c) =>
        `#### ${c} connection${c === 1 ? '' : 's'}\n\n${engineTable(cases as [EngineCase, EngineCase], { rounds, seconds, connections: c, ratioLabel: 'PostgreSQL / SQLite', allowErrors: true })}`,
    );
    return [
      tables.join('\n\n'),
      '',
      '(from source, each server pinned to the same core, rate_limit disabled, webhooks enabled with no webhook URL set, the sender logging its messages)',
    ].join('\n');
  } finally {
    for (const s of servers) await s.stop();
  }
}
