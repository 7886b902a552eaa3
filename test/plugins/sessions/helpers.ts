/** Messaging tests: an app with identity and sessions, signed-in users, PATs, sessions, events. */
import identity from '../../../plugins/identity/index.ts';
import sessions from '../../../plugins/sessions/index.ts';
import type { SessionEvent } from '../../../plugins/sessions/types.ts';
import { startApp, type TestApp } from '../../helpers/app.ts';
import { type SignedIn, signIn } from '../../helpers/identity.ts';

export type Res = Awaited<ReturnType<TestApp['request']>>;

export const BASE_TOML = '[plugins.identity]\nscrypt_cost = 1024\ndevice_poll_interval_seconds = 1\n';

export function startMessagingApp(extra = ''): Promise<TestApp> {
  return startApp(`${BASE_TOML}${extra}`, { plugins: [identity, sessions] });
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
export function eventsOf(app: TestApp, sessionId: number, afterId = 0): SessionEvent[] {
  return app.running.services.sessions!.events(sessionId, { afterId });
}

export function lastEventId(app: TestApp, sessionId: number): number {
  return eventsOf(app, sessionId).at(-1)?.id ?? 0;
}
