import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchCookie, createBenchUser, node, type RequestCase, requestTable, root, startServer } from './lib.ts';

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

export async function run(options: { rounds?: number; seconds?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 3;
  const seconds = options.seconds ?? 5;
  const wharf = path.join(root, 'bin/wharf.ts');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-messaging-'));
  createBenchUser([node, [wharf]], dataDir);
  const server = await startServer({
    name: 'wharf',
    argsFor: (port) => [node, [wharf, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir]],
    env: { WHARF_PLUGINS__RATE_LIMIT__ENABLED: 'false', WHARF_LOG__LEVEL: 'warn' },
  });
  try {
    const cookie = await benchCookie(server.url);
    const pat = (await api(`${server.url}/api/personal-access-tokens`, 'POST', { cookie, origin: server.url }, { name: 'bench' })).data.token as string;
    const patHeaders = { authorization: `Bearer ${pat}` };
    const sender = (await api(`${server.url}/api/sandbox-sessions`, 'POST', patHeaders, { name: 'Sender', account_protection: false, log_messages: true }))
      .data;
    const recipient = (await api(`${server.url}/api/sandbox-sessions`, 'POST', patHeaders, { name: 'Recipient' })).data;
    const keyHeaders = { authorization: `Bearer ${sender.api_key}` };

    const script = (to: string) => {
      const file = path.join(dataDir, `send-${to.replace(/\D/g, '')}.lua`);
      fs.writeFileSync(
        file,
        `wrk.method = "POST"\nwrk.body = '${JSON.stringify({ to, text: 'benchmark message' })}'\nwrk.headers["Content-Type"] = "application/json"\n`,
      );
      return file;
    };
    const toSandbox = script(recipient.phone_number);
    const toOutside = script('+14155550100');
    const probe = await api(`${server.url}/api/send-message`, 'POST', keyHeaders, { to: recipient.phone_number, text: 'probe' });
    if (probe.data.status !== 'delivered') throw new Error(`probe send: ${JSON.stringify(probe)}`);

    const cases: RequestCase[] = [
      { name: 'GET /healthz (no credential)', url: '/healthz', headers: {} },
      { name: 'GET /api/status, session API key', url: '/api/status', headers: keyHeaders },
      { name: 'GET /api/personal-access-tokens, personal access token', url: '/api/personal-access-tokens', headers: patHeaders },
      { name: 'POST /api/send-message, text to another sandbox session (delivered)', url: '/api/send-message', headers: keyHeaders, script: toSandbox },
      { name: 'POST /api/send-message, text to an outside number (sent)', url: '/api/send-message', headers: keyHeaders, script: toOutside },
    ];
    const sent = (await api(`${server.url}/api/whatsapp-sessions/${sender.id}/message-logs?per_page=1`, 'GET', patHeaders)).data.total as number;
    const lines = [requestTable(server.url, cases, { rounds, seconds, ratioLabel: '/healthz' })];
    lines.push(
      '',
      `(${rounds} rounds of ${seconds} s per request, interleaved; wrk -t1 -c50; from source, rate_limit disabled, webhooks enabled with no webhook URL set; ${sent} messages logged by the end)`,
    );
    return lines.join('\n');
  } finally {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
