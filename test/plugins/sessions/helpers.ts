/** Messaging tests: an app with identity and sessions, signed-in users, PATs, sessions, events. */
import identity from '../../../plugins/identity/index.ts';
import sessions from '../../../plugins/sessions/index.ts';
import type { SessionEvent } from '../../../plugins/sessions/types.ts';
import { type StartOptions, startApp, type TestApp } from '../../helpers/app.ts';
import { type SignedIn, signIn } from '../../helpers/identity.ts';

export type Res = Awaited<ReturnType<TestApp['request']>>;

export const BASE_TOML = '[plugins.identity]\nscrypt_cost = 1024\ndevice_poll_interval_seconds = 1\n';

export function startMessagingApp(extra = '', options: StartOptions = {}): Promise<TestApp> {
  return startApp(`${BASE_TOML}${extra}`, { plugins: [identity, sessions], ...options });
}

/** A signed-in user with a PAT in its organization. */
export interface Tenant extends SignedIn {
  pat: string;
}

export async function tenant(app: TestApp, options: Parameters<typeof signIn>[1] = {}): Promise<Tenant> {
  const user = await signIn(app, options);
  const res = await app.request('POST', '/api/personal-access-tokens', { body: { name: 'tests' }, headers: user.headers });
  if (res.status !== 201) throw new Error(`PAT mint failed: ${res.status} ${res.text}`);
  return { ...user, pat: res.body.data.token };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Calls with a bearer token. */
export function call(
  app: TestApp,
  token: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Res> {
  return app.request(method, path, { ...(body === undefined ? {} : { body }), headers: { ...(token ? bearer(token) : {}), ...headers } });
}

export interface SessionInfo {
  id: number;
  apiKey: string;
  phone: string;
  body: Record<string, any>;
}

export async function sandboxSession(app: TestApp, pat: string, body: Record<string, unknown> = {}): Promise<SessionInfo> {
  const res = await call(app, pat, 'POST', '/api/sandbox-sessions', { name: 'Sandbox', ...body });
  if (res.status !== 201) throw new Error(`sandbox session failed: ${res.status} ${res.text}`);
  return { id: res.body.data.id, apiKey: res.body.data.api_key, phone: res.body.data.phone_number, body: res.body.data };
}

export async function whatsappSession(app: TestApp, pat: string, body: Record<string, unknown> = {}): Promise<SessionInfo> {
  const phone = body.phone_number ?? `+4420${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`;
  const res = await call(app, pat, 'POST', '/api/whatsapp-sessions', {
    name: 'WhatsApp',
    phone_number: phone,
    account_protection: false,
    log_messages: true,
    ...body,
  });
  if (res.status !== 201) throw new Error(`whatsapp session failed: ${res.status} ${res.text}`);
  return { id: res.body.data.id, apiKey: res.body.data.api_key, phone: res.body.data.phone_number, body: res.body.data };
}

/** Events recorded for a session after `afterId`, as the service holds them. */
export function eventsOf(app: TestApp, sessionId: number, afterId = 0): Promise<SessionEvent[]> {
  return app.running.services.sessions!.events(sessionId, { afterId });
}

export async function lastEventId(app: TestApp, sessionId: number): Promise<number> {
  return (await eventsOf(app, sessionId)).at(-1)?.id ?? 0;
}

/** Polls `probe` until it returns a truthy value; rejects after `timeoutMs`. */
export async function until<T>(probe: () => T | Promise<T>, what = 'condition', timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The status of a session, as its row says. */
export async function statusOf(app: TestApp, sessionId: number): Promise<string | undefined> {
  return (await app.running.services.sessions!.get(sessionId))?.status;
}

/** Settings that make a whatsapp session's reconnects quick in tests. */
export const WHATSAPP_TEST_TOML = `[plugins.sessions.whatsapp]
reconnect_initial_delay_ms = 50
reconnect_max_delay_ms = 400
connect_timeout_ms = 5000
send_timeout_ms = 5000
`;

/** What pairs a whatsapp session in tests: the fake network's scan (test/helpers/fake-whatsapp.ts). */
export interface Pairing {
  scan(sessionId: number, phone: string, name?: string): void;
}

/** A whatsapp session paired through the fake network and connected. */
export async function connectedWhatsApp(app: TestApp, pat: string, network: Pairing, body: Record<string, unknown> = {}): Promise<SessionInfo> {
  const session = await whatsappSession(app, pat, body);
  const res = await call(app, pat, 'POST', `/api/whatsapp-sessions/${session.id}/connect`, {});
  if (res.status !== 200 || res.body.data.status !== 'need_scan') throw new Error(`connect failed: ${res.status} ${res.text}`);
  network.scan(session.id, session.phone, String(body.name ?? 'WhatsApp'));
  await until(async () => (await statusOf(app, session.id)) === 'connected', `session ${session.id} connected`);
  return session;
}
