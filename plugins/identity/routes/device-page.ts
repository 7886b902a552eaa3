/**
 * `GET|POST /device`: the approval page of the device flow (RFC 8628 §3.3), rendered on the
 * server and working without JavaScript. Not signed in: a sign-in form (the same password
 * sign-in, throttle and cookie as `/auth/login`) that comes back to the same code. Signed in:
 * the code (to enter or confirm), the user's organizations, Approve and Deny; then a result page.
 * The cross-site guard covers `POST /device`, and the page refuses to be framed.
 */
import { z } from 'zod';
import { PUBLIC } from '../../../core/api.ts';
import type { Context } from 'koa';
import { authenticate } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import type { DeviceFlow } from '../device.ts';
import { formField, html, page, type Html } from '../html.ts';
import type { RouteGroup } from '../../../core/api.ts';
import type { OrgWithRole, DashboardPrincipal } from '../types.ts';
import { passwordSignIn, type AuthDeps, TAG as tag } from './auth.ts';

export interface DevicePageDeps extends AuthDeps {
  flow: DeviceFlow;
}

const TITLE = 'Sign in a device';

/** The signed-in dashboard user, or undefined (no cookie, an expired or revoked one). */
async function sessionOf(ctx: Context): Promise<DashboardPrincipal | undefined> {
  try {
    const { principal } = await authenticate(ctx);
    return principal?.kind === 'session' ? (principal as DashboardPrincipal) : undefined;
  } catch (err) {
    if (err instanceof WharfError && err.status < 500) return undefined;
    throw err;
  }
}

function errorLine(error: string | undefined): Html | string {
  return error ? html`<p class="error" role="alert">${error}</p>` : '';
}

function signInForm(code: string, error?: string, email = ''): string {
  return page(
    TITLE,
    html`<p>Sign in to approve the command-line sign-in${code ? html` with code <code>${code}</code>` : ''}.</p>
${errorLine(error)}
<form method="post" action="/device">
<input type="hidden" name="action" value="signin">
<input type="hidden" name="user_code" value="${code}">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${email}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
    { home: true },
  );
}

function approveForm(user: DashboardPrincipal, orgs: readonly OrgWithRole[], code: string, error?: string, orgId?: string): string {
  const selected = orgId ?? user.orgId;
  const options = orgs.map((o) => html`<option value="${o.id}"${o.id === selected ? html` selected` : ''}>${o.name} (${o.slug})</option>`);
  return page(
    TITLE,
    html`<p>Signed in as <strong>${user.email ?? user.name ?? user.userId}</strong>.</p>
${errorLine(error)}
<form method="post" action="/device">
<label for="user_code">Code shown on your device</label>
<input id="user_code" name="user_code" required autocomplete="off" autocapitalize="characters" spellcheck="false" value="${code}">
<p>Approve only if this is the code your terminal shows and you started the sign-in yourself.</p>
${
  orgs.length
    ? html`<label for="orgId">Organization the device acts in</label>
<select id="orgId" name="orgId">${options}</select>
<button type="submit" name="action" value="approve">Approve</button>`
    : html`<p class="error">You are not a member of any organization, so you can only deny.</p>`
}
<button type="submit" name="action" value="deny">Deny</button>
</form>
<form method="post" action="/device">
<input type="hidden" name="action" value="signout">
<input type="hidden" name="user_code" value="${code}">
<p>Not ${user.email ?? 'you'}? <button type="submit">Sign out</button></p>
</form>`,
    { home: true },
  );
}

const pageQuery = z.lazy(() => z.object({ user_code: formField }));
const pageForm = z.lazy(() => z.object({ action: formField, user_code: formField, email: formField, password: formField, orgId: formField }));

export function devicePageRoutes(deps: DevicePageDeps): RouteGroup {
  const group = deps.api.group({ prefixes: ['/device'], envelope: 'plain' });

  group.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    ctx.set('Referrer-Policy', 'no-referrer');
    await next();
  });

  /** Renders `render()` with the error's status (and Retry-After), or rethrows a server error. */
  function refused(ctx: Context, err: unknown, render: (message: string) => string): void {
    if (!(err instanceof WharfError) || err.status >= 500) throw err;
    ctx.status = err.status;
    if (err.retryAfter !== undefined) ctx.set('Retry-After', String(err.retryAfter));
    ctx.type = 'html';
    ctx.body = render(err.message);
  }

  group.route({
    method: 'GET',
    path: '/device',
    summary: 'The device approval page (HTML, works without JavaScript): sign in, confirm the code, pick the organization, approve or deny',
    tag,
    auth: PUBLIC,
    query: pageQuery,
    success: { contentType: 'text/html' },
    handler: getPage,
  });
  async function getPage(ctx: Context, { query }: { query: z.output<typeof pageQuery> }) {
    const code = query.user_code.trim().slice(0, 64);
    ctx.type = 'html';
    const user = await sessionOf(ctx);
    // Whether a code exists is told only to a signed-in user.
    if (!user) {
      ctx.body = signInForm(code);
      return;
    }
    const orgs = await deps.store.orgsOf(user.userId);
    if (!code) {
      ctx.body = approveForm(user, orgs, '');
      return;
    }
    try {
      const { userCode } = await deps.flow.pending(code, user.userId);
      ctx.body = approveForm(user, orgs, userCode);
    } catch (err) {
      refused(ctx, err, (message) => approveForm(user, orgs, code, message));
    }
  }

  group.route({
    method: 'POST',
    path: '/device',
    summary: 'The device approval form (HTML): action signin (email, password), approve or deny (user_code, orgId), signout',
    tag,
    auth: PUBLIC,
    body: pageForm,
    bodyTypes: ['application/x-www-form-urlencoded'],
    success: { contentType: 'text/html' },
    errors: { 303: 'Signed in: back to the page with the code', 400: 'The form again, with the reason (HTML)', 401: 'Not signed in (the sign-in form, HTML)' },
    handler: postPage,
  });
  async function postPage(ctx: Context, { body }: { body: z.output<typeof pageForm> }) {
    const str = (key: keyof typeof body, max: number) => body[key].trim().slice(0, max);
    const action = str('action', 16);
    const code = str('user_code', 64);
    ctx.type = 'html';

    if (action === 'signin') {
      const email = str('email', 320);
      const { password } = body;
      try {
        if (!email || !password) throw new WharfError('bad_request', 'Enter your email and password');
        if (password.length > 1024) throw new WharfError('unauthorized', 'Invalid email or password');
        await passwordSignIn(ctx, deps, email, password);
      } catch (err) {
        refused(ctx, err, (message) => signInForm(code, message, email));
        return;
      }
      // Post/redirect/get: the browser comes back to the same code with its new cookie.
      ctx.status = 303;
      ctx.redirect(code ? `/device?user_code=${encodeURIComponent(code)}` : '/device');
      return;
    }

    const user = await sessionOf(ctx);
    if (action === 'signout') {
      await deps.loginSessions.end(ctx, user);
      ctx.body = signInForm(code);
      return;
    }
    if (!user) {
      ctx.status = 401;
      ctx.body = signInForm(code, 'Sign in first; your session may have ended');
      return;
    }
    const orgs = await deps.store.orgsOf(user.userId);
    const orgId = str('orgId', 100) || undefined;
    if (action !== 'approve' && action !== 'deny') {
      ctx.status = 400;
      ctx.body = approveForm(user, orgs, code, 'Choose Approve or Deny', orgId);
      return;
    }
    try {
      const decision = await deps.flow.decide({ userCode: code, userId: user.userId, orgId, approve: action === 'approve' });
      ctx.body =
        decision.status === 'approved'
          ? page(
              'Device approved',
              html`<p class="ok">Approved: the device is signed in as ${user.email ?? user.name ?? user.userId} in ${decision.org.name}.</p>
<p>You can close this window and return to your terminal.</p>`,
              { home: true },
            )
          : page(
              'Request denied',
              html`<p class="ok">Denied: the device was not signed in.</p>
<p>You can close this window.</p>`,
              { home: true },
            );
    } catch (err) {
      refused(ctx, err, (message) => approveForm(user, orgs, code, message, orgId));
    }
  }

  return group;
}
