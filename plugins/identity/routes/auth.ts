/** `/auth/*`: password sign-in, sign-out, the session and its active organization. */
import type { Context } from 'koa';
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from '../../../core/api.ts';
import { authenticate } from '../../../core/auth.ts';
import type { CoreConfig } from '../../../core/config.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { dashboardSession } from '../credentials.ts';
import type { LoginThrottle } from '../guards.ts';
import type { BuiltinIdentity } from '../service.ts';
import type { LoginSessions } from '../login-sessions.ts';
import { normalizeEmail, type IdentityStore } from '../store.ts';
import type { DashboardPrincipal } from '../types.ts';

export interface AuthDeps {
  api: ApiRegistry;
  store: IdentityStore;
  identity: BuiltinIdentity;
  loginSessions: LoginSessions;
  throttle: LoginThrottle;
  core: CoreConfig;
}

export const TAG = 'Identity';

const loginBody = z.lazy(() => z.object({ email: z.string().min(1).max(320), password: z.string().min(1).max(1024) }));
const activeOrgBody = z.lazy(() => z.object({ orgId: z.string().min(1).max(100).describe('An organization id or slug the user is a member of') }));
const userView = z.lazy(() => z.object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() }));

/** Signs in with email and password: the throttle, the check, then a new login session and cookie. */
export async function passwordSignIn(ctx: Context, deps: AuthDeps, email: string, password: string) {
  const account = normalizeEmail(email);
  const address = ctx.ip || 'unknown';
  await deps.throttle.check(account, address);
  const user = await deps.identity.authenticate(email, password);
  if (!user) {
    await deps.throttle.failed(account, address);
    throw new WharfError('unauthorized', 'Invalid email or password');
  }
  await deps.throttle.succeeded(account);
  const activeOrgId = (await deps.store.orgsOf(user.id))[0]?.id ?? null;
  await deps.loginSessions.start(ctx, user.id, activeOrgId);
  return { user: { id: user.id, email: user.email, name: user.name }, activeOrgId };
}

export function authRoutes(deps: AuthDeps): RouteGroup {
  const group = deps.api.group({ prefixes: ['/auth'], envelope: 'plain' });
  const tag = TAG;

  group.route({
    method: 'POST',
    path: '/auth/login',
    summary: 'Sign in with email and password: sets the __session cookie',
    tag,
    auth: PUBLIC,
    body: loginBody,
    bodyTypes: ['application/x-www-form-urlencoded'],
    success: { schema: z.lazy(() => z.object({ user: userView, activeOrgId: z.string().nullable() })) },
    errors: { 401: 'Invalid email or password: `{error}`', 429: 'Too many failed sign-ins: `{message, retry_after}`' },
    async handler(ctx, { body }) {
      ctx.body = await passwordSignIn(ctx, deps, body.email, body.password);
    },
  });

  group.route({
    method: 'POST',
    path: '/auth/logout',
    summary: 'Sign out: ends the login session (if any) and clears the cookie',
    tag,
    auth: PUBLIC,
    success: { schema: z.lazy(() => z.object({ success: z.literal(true) })) },
    async handler(ctx) {
      const { principal } = await authenticate(ctx).catch(() => ({ principal: undefined }));
      await deps.loginSessions.end(ctx, principal?.kind === 'session' ? (principal as DashboardPrincipal) : undefined);
      ctx.body = { success: true };
    },
  });

  group.route({
    method: 'GET',
    path: '/auth/session',
    summary: 'The signed-in user, the active organization and the organizations',
    tag,
    auth: dashboardSession,
    async handler(ctx, { auth: p }) {
      ctx.body = { user: { id: p.userId, email: p.email, name: p.name }, activeOrgId: p.orgId, orgs: await deps.store.orgsOf(p.userId) };
    },
  });

  group.route({
    method: 'PUT',
    path: '/auth/active-org',
    summary: 'Switch the organization the dashboard session acts in',
    tag,
    auth: dashboardSession,
    body: activeOrgBody,
    success: { schema: z.lazy(() => z.object({ activeOrgId: z.string() })) },
    errors: { 403: 'Not a member of that organization: `{error}`' },
    async handler(ctx, { body, auth: p }) {
      const org = await deps.store.org(body.orgId);
      if (!org || !(await deps.store.role(p.userId, org.id))) throw new WharfError('forbidden', 'Not a member of that organization');
      await deps.loginSessions.setActiveOrg(p, org.id);
      ctx.body = { activeOrgId: org.id };
    },
  });

  return group;
}
