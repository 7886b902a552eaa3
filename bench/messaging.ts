import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchCookie, createBenchUser, node, type RequestCase, requestTable, root, type Server, startServer } from './lib.ts';

async function api(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<any> {
  const init = {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
  // A kept-alive connection from before a long wrk run may have been closed by the server: one retry.
  const res = await fetch(url, init).catch(() => fetch(url, init));
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** A `wharf serve` from source on a new data dir with the benchmark owner, rate_limit off, `env` added (a database URL, say); `stop` removes the data dir. */
export async function startMessagingServer(tag: string, env: Record<string, string> = {}): Promise<{ server: Server; dataDir: string; stop(): Promise<void> }> {
  const wharf = path.join(root, 'bin/wharf.ts');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-bench-${tag}-`));
  // The embedded store on a port of its own, so that two servers can run side by side.
  const all = { WHARF_PLUGINS__RATE_LIMIT__ENABLED: 'false', WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', WHARF_LOG__LEVEL: 'warn', ...env };
  createBenchUser([node, [wharf]], dataDir, [], all);
  const server = await startServer({
    name: 'wharf',
    argsFor: (port) => [node, [wharf, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
    env: all,
  });
  return {
    server,
    dataDir,
    async stop() {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface SendSetup {
  patHeaders: Record<string, string>;
  /** The sender session's API key (the send-message credential). */
  keyHeaders: Record<string, string>;
  sender: { id: string; api_key: string };
  recipient: { phone_number: string };
  /** A wrk script sending a text to `to`, written in `dir`. */
  script(to: string): string;
}

/**
 * Through the dashboard `cookie` at `url`: a personal access token, a sender and a recipient
 * sandbox session, and a probe send that must come back delivered.
 */
export async function sendSetup(url: string, cookie: string, dir: string, origin = url): Promise<SendSetup> {
  const pat = (await api(`${url}/api/personal-access-tokens`, 'POST', { cookie, origin }, { name: `bench-${Date.now()}` })).data.token as string;
  const patHeaders = { authorization: `Bearer ${pat}` };
  const sender = (await api(`${url}/api/sandbox-sessions`, 'POST', patHeaders, { name: 'Sender', account_protection: false, log_messages: true })).data;
  const recipient = (await api(`${url}/api/sandbox-sessions`, 'POST', patHeaders, { name: 'Recipient' })).data;
  const keyHeaders = { authorization: `Bearer ${sender.api_key}` };
  const probe = await api(`${url}/api/send-message`, 'POST', keyHeaders, { to: recipient.phone_number, text: 'probe' });
  if (probe.data.status !== 'delivered') throw new Error(`probe send: ${JSON.stringify(probe)}`);
  const script = (to: string) => {
    const file = path.join(dir, `send-${sender.id}-${to.replace(/\D/g, '')}.lua`);
    fs.writeFileSync(
      file,
      `wrk.method = "POST"\nwrk.body = '${JSON.stringify({ to, text: 'benchmark message' })}'\nwrk.headers["Content-Type"] = "application/json"\n`,
    );
    return file;
  };
  return { patHeaders, keyHeaders, sender, recipient, script };
}

export async function run(options: { rounds?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const { server, dataDir, stop } = await startMessagingServer('messaging');
  try {
    const cookie = await benchCookie(server.url);
    const { patHeaders, keyHeaders, sender, recipient, script } = await sendSetup(server.url, cookie, dataDir);
    const toSandbox = script(recipient.phone_number);
    const toOutside = script('+14155550100');

    const cases: RequestCase[] = [
      { name: 'GET /healthz (no credential)', url: '/healthz', headers: {} },
      { name: 'GET /api/status, session API key', url: '/api/status', headers: keyHeaders },
      { name: 'GET /api/personal-access-tokens, personal access token', url: '/api/personal-access-tokens', headers: patHeaders },
      { name: 'POST /api/send-message, text to another sandbox session (delivered)', url: '/api/send-message', headers: keyHeaders, script: toSandbox },
      { name: 'POST /api/send-message, text to an outside number (sent)', url: '/api/send-message', headers: keyHeaders, script: toOutside },
    ];
    const lines = [requestTable(server.url, cases, { rounds, seconds, ratioLabel: '/healthz' })];
    // Counted after the load ("by the end"): the sender logs every message.
    const sent = (await api(`${server.url}/api/whatsapp-sessions/${sender.id}/message-logs?per_page=1`, 'GET', patHeaders)).data.total as number;
    lines.push(
      '',
      `(${rounds} rounds of ${seconds} s per request, interleaved; wrk -t1 -c50; from source, rate_limit disabled, webhooks enabled with no webhook URL set; ${sent} messages logged by the end)`,
    );
    return lines.join('\n');
  } finally {
    await stop();
  }
}
