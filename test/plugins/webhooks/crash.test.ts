/**
 * Crash safety, with the real command: `wharf serve` as a child process, deliveries queued and in
 * flight to a slow receiver, `kill -9`, a restart on the same data dir, and every event reaches
 * the receiver (at least once; duplicates carry the same webhook-id).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../helpers/app.ts';
import { type Served, serve, wharfAsync } from '../../helpers/cli.ts';
import { answer, eventually, Receiver } from './helpers.ts';

const CONFIG = `[plugins.identity]
scrypt_cost = 1024

[plugins.storage]
enabled = false

[plugins.tokens]
enabled = false

[plugins.rate_limit]
enabled = false

[plugins.webhooks]
allow_private_networks = true
timeout_ms = 30000
retry_schedule_seconds = [0.05, 0.1, 0.1, 0.1]
retry_jitter = 0
concurrency_per_session = 4
shutdown_wait_ms = 0
`;

const servers: Served[] = [];
let receiver: Receiver | undefined;
afterAll(async () => {
  for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) await s.stop('SIGKILL');
  await receiver?.close();
});

async function json(url: string, method: string, body: unknown, headers: Record<string, string>): Promise<any> {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(parsed)}`);
  return parsed;
}

describe('after kill -9', () => {
  it('sends every delivery that was queued or in flight when the process died', async () => {
    const dir = tempDir();
    const dataDir = path.join(dir, 'data');
    const configFile = path.join(dir, 'wharf.toml');
    fs.writeFileSync(configFile, CONFIG);
    const args = ['--config', configFile, '--data-dir', dataDir];
    const created = await wharfAsync(['admin', 'create-user', '--email', 'crash@example.test', '--password', 'crash test password', '--org', 'Crash', ...args]);
    expect(created.status).toBe(0);

    // Slow: each request is answered after 400 ms, so some finish, some are in flight, most wait.
    const answered = new Set<string>();
    receiver = await Receiver.start((req, res, received) => {
      res.on('finish', () => answered.add(received.json.data.key.id));
      setTimeout(() => answer(200)(req, res, received), 400);
    });
    const first = await serve(args);
    servers.push(first);
    const login = await fetch(`${first.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: first.url },
      body: JSON.stringify({ email: 'crash@example.test', password: 'crash test password' }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const pat = (await json(`${first.url}/api/personal-access-tokens`, 'POST', { name: 'crash' }, { cookie, origin: first.url })).data.token as string;
    const auth = { authorization: `Bearer ${pat}` };
    const session = (
      await json(
        `${first.url}/api/sandbox-sessions`,
        'POST',
        { name: 'Crash', webhook_url: receiver.url('/crash'), webhook_enabled: true, webhook_events: ['messages.received'] },
        auth,
      )
    ).data;

    const keys: string[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await json(
        `${first.url}/api/sandbox/receive`,
        'POST',
        { from: `+1415555${String(2000 + i)}`, text: `message ${i}` },
        { authorization: `Bearer ${session.api_key}` },
      );
      keys.push(r.data.key.id);
    }
    // Some answered, four in flight (the per-session limit), the rest queued.
    await eventually(() => receiver!.requests.length >= 6, 10_000, 'deliveries under way');
    expect(await first.stop('SIGKILL')).toBeNull();
    expect(first.child.signalCode).toBe('SIGKILL');
    const beforeRestart = new Set(receiver.requests.map((r) => r.json.data.key.id as string));
    expect(beforeRestart.size).toBeLessThan(keys.length);
    // Received but never acknowledged: in flight when the process died.
    const inFlight = [...beforeRestart].filter((k) => !answered.has(k));
    expect(inFlight.length).toBeGreaterThan(0);
    const countBefore = receiver.requests.length;

    receiver.behaviour = answer(200);
    const second = await serve(args);
    servers.push(second);
    await eventually(() => new Set(receiver!.requests.map((r) => r.json.data.key.id)).size === keys.length, 20_000, 'every event at the receiver');
    const seen = new Set(receiver.requests.map((r) => r.json.data.key.id as string));
    expect([...seen].sort()).toEqual([...keys].sort());
    // The ones in flight were sent again after the restart.
    const resent = new Set(receiver.requests.slice(countBefore).map((r) => r.json.data.key.id as string));
    for (const k of inFlight) expect(resent.has(k)).toBe(true);
    // Every record ends delivered, one per event; a duplicate (an attempt cut by the kill) has the same webhook-id.
    const list = await eventually(
      async () => {
        const body = await json(`${second.url}/api/dispatches?session_id=${session.id}&per_page=100`, 'GET', undefined, auth);
        return body.data.data.every((d: any) => d.status === 'delivered') ? body.data : null;
      },
      10_000,
      'every record delivered',
    );
    expect(list.total).toBe(keys.length);
    const idOfKey = new Map<string, Set<string>>();
    for (const r of receiver.requests) {
      const set = idOfKey.get(r.json.data.key.id) ?? new Set();
      set.add(String(r.headers['webhook-id']));
      idOfKey.set(r.json.data.key.id, set);
    }
    for (const ids of idOfKey.values()) expect(ids.size).toBe(1);
    expect(await second.stop('SIGTERM')).toBe(0);
  });
});
