/** Signing in to a test app: users and organizations through the identity service, cookies through /auth/login. */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { cleanEnv, root } from './cli.ts';
import type { IdentityService } from '../../plugins/identity/types.ts';
import type { TestApp } from './app.ts';

export interface SignedIn {
  userId: string;
  orgId: string;
  email: string;
  password: string;
  /** The `__session` cookie as a request header value. */
  cookie: string;
  /** Headers for a same-origin dashboard request: cookie and Origin. */
  headers: Record<string, string>;
}

let counter = 0;

export function identityOf(app: TestApp): IdentityService {
  const service = app.running.services.identity;
  if (!service) throw new Error('the identity plugin is not running in this app');
  return service;
}

/** Creates a user owning a new organization (or joining `orgId` with `role`) and signs it in. */
export async function signIn(
  app: TestApp,
  options: { email?: string; password?: string; name?: string; orgName?: string; orgId?: string; role?: 'owner' | 'admin' | 'member' } = {},
): Promise<SignedIn> {
  const identity = identityOf(app);
  const n = ++counter;
  const email = options.email ?? `user${n}-${Date.now()}@example.test`;
  const password = options.password ?? 'correct horse battery staple';
  const user = await identity.createUser({ email, password, name: options.name ?? `User ${n}` });
  let orgId = options.orgId;
  if (orgId) await identity.addMember(orgId, user.id, options.role ?? 'member');
  else orgId = (await identity.createOrg({ name: options.orgName ?? `Org ${n}`, ownerId: user.id })).id;
  const cookie = await login(app, email, password);
  return { userId: user.id, orgId, email, password, cookie, headers: { cookie, origin: app.url } };
}

/** POST /auth/login; returns the `__session=...` cookie pair. */
export async function login(app: TestApp, email: string, password: string): Promise<string> {
  const res = await app.fetch('/auth/login', {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: app.url },
    body: JSON.stringify({ email, password }),
  });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
  const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__session='));
  if (!cookie) throw new Error('login set no __session cookie');
  return cookie.split(';')[0]!;
}

/**
 * Runs `wharf login --instance <app>` (or `wharf login ...args`) with its credentials under
 * `configHome`, and approves (or denies) the code it prints as `user`, the way a person would in
 * the browser.
 */
export function cliLogin(
  app: TestApp,
  user: SignedIn,
  configHome: string,
  approve = true,
  options: { args?: string[]; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/wharf.ts'), 'login', ...(options.args ?? ['--instance', app.url])], {
      env: { ...cleanEnv(), ...options.env, XDG_CONFIG_HOME: configHome },
      cwd: options.cwd ?? root,
    });
    let stdout = '';
    let stderr = '';
    let decided = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', async (d) => {
      stderr += d;
      const code = /confirm the code ([A-Z]{4}-[A-Z]{4})/.exec(stderr)?.[1];
      if (!code || decided) return;
      decided = true;
      const res = await app.request('POST', '/oauth/device/approve', { body: { user_code: code, orgId: user.orgId, approve }, headers: user.headers });
      if (res.status !== 200) reject(new Error(`approve: ${res.status} ${res.text}`));
    });
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
