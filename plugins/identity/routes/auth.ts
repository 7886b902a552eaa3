/** `/auth/*`: password sign-in, sign-out, the active organization; and the first-start setup page. */
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticate, requirePrincipal } from '../../../core/auth.ts';
import type { CoreConfig } from '../../../core/config.ts';
import { WharfError } from '../../../core/errors.ts';
import { sha256Hex } from '../../../core/tokens.ts';
import { validate } from '../../../core/validate.ts';
import type { LoginThrottle } from '../guards.ts';
import { html, page } from '../html.ts';
import type { BuiltinIdentity } from '../service.ts';
import type { SessionManager } from '../sessions.ts';
import { normalizeEmail, type IdentityStore } from '../store.ts';
import type { SessionPrincipal } from '../types.ts';

export interface AuthDeps {
  store: IdentityStore;
  identity: BuiltinIdentity;
  sessions: SessionManager;
  throttle: LoginThrottle;
  core: CoreConfig;
}

const loginBody = z.object({ email: z.string().min(1).max(320), password: z.string().min(1).max(1024) });
const activeOrgBody = z.object({ orgId: z.string().min(1).max(100) });

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
  const activeOrgId = deps.store.orgsOf(user.id)[0]?.id ?? null;
  await deps.sessions.start(ctx, user.id, activeOrgId);
  return { user: { id: user.id, email: user.email, name: user.name }, activeOrgId };
}

export function authRoutes(deps: AuthDeps): Router {
  const router = new Router({ prefix: '/auth' });

  router.post('/login', async (ctx) => {
    const { email, password } = validate(loginBody, ctx.request.body);
    ctx.body = await passwordSignIn(ctx, deps, email, password);
  });

  router.post('/logout', async (ctx) => {
    const { principal } = await authenticate(ctx).catch(() => ({ principal: undefined }));
    deps.sessions.end(ctx, principal?.kind === 'session' ? (principal as SessionPrincipal) : undefined);
    ctx.body = { success: true };
  });

  router.get('/session', async (ctx) => {
    const p = await requirePrincipal(ctx, ['session'], 'dashboard session');
    ctx.body = { user: { id: p.userId, email: p.email, name: p.name }, activeOrgId: p.orgId, orgs: deps.store.orgsOf(p.userId) };
  });

  router.put('/active-org', async (ctx) => {
    const p = await requirePrincipal(ctx, ['session'], 'dashboard session');
    const { orgId } = validate(activeOrgBody, ctx.request.body);
    const org = deps.store.org(orgId);
    if (!org || !deps.store.role(p.userId, org.id)) throw new WharfError('forbidden', 'Not a member of that organization');
    deps.sessions.setActiveOrg(p, org.id);
    ctx.body = { activeOrgId: org.id };
  });

  return router;
}

/** `GET|POST /setup?token=...`: creates the first owner with the one-time link `serve` printed. */
export function setupRoutes(deps: AuthDeps): Router {
  const router = new Router();
  const form = (token: string, error?: string, values: Record<string, string> = {}) =>
    page(
      'Set up Wharf',
      html`<p>Create the first account. It will own a new organization.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="/setup">
<input type="hidden" name="token" value="${token}">
<label for="email">Email</label><input id="email" name="email" type="email" required value="${values.email ?? ''}">
<label for="name">Name</label><input id="name" name="name" value="${values.name ?? ''}">
<label for="password">Password</label><input id="password" name="password" type="password" required>
<label for="org">Organization name</label><input id="org" name="org" required value="${values.org ?? ''}">
<button type="submit">Create account</button>
</form>`,
    );
  const invalid = () => page('Set up Wharf', html`<p class="error">This setup link is invalid, used or expired. Restart <code>wharf serve</code> with no users for a new one, or use <code>wharf admin create-user</code>.</p>`);

  router.get('/setup', (ctx) => {
    const token = typeof ctx.query.token === 'string' ? ctx.query.token : '';
    ctx.type = 'html';
    if (!token || !deps.store.setupTokenValid(sha256Hex(token)) || deps.store.countUsers() > 0) {
      ctx.status = 410;
      ctx.body = invalid();
      return;
    }
    ctx.body = form(token);
  });

  router.post('/setup', async (ctx) => {
    const body = (ctx.request.body ?? {}) as Record<string, unknown>;
    const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
    const token = str('token');
    ctx.type = 'html';
    if (!token || !deps.store.setupTokenValid(sha256Hex(token)) || deps.store.countUsers() > 0) {
      ctx.status = 410;
      ctx.body = invalid();
      return;
    }
    const values = { email: str('email'), name: str('name'), org: str('org') };
    try {
      if (!values.org.trim()) throw new WharfError('bad_request', 'Organization name is required');
      const record = await deps.identity.prepareUser({ email: values.email, password: str('password'), name: values.name });
      // Spending the link, the user and the organization happen together or not at all.
      const { user, org } = deps.store.transaction(() => {
        if (!deps.store.useSetupToken(sha256Hex(token))) throw new WharfError('conflict', 'This setup link was just used');
        const created = deps.store.insertUser(record);
        return { user: created, org: deps.identity.createOrg({ name: values.org, ownerId: created.id }) };
      });
      await deps.sessions.start(ctx, user.id, org.id);
      ctx.body = page('Wharf is ready', html`<p class="ok">Signed in as ${user.email}, owner of ${org.name}.</p><p>Sign in from the command line with <code>wharf login --instance ${deps.core.server.public_url}</code>.</p>`);
    } catch (err) {
      if (!(err instanceof WharfError) || err.status >= 500) throw err;
      ctx.status = err.status;
      ctx.body = form(token, err.message, values);
    }
  });

  return router;
}
