/** `GET|POST /setup?token=...`: the page that creates the first owner with the one-time link `serve` printed. */
import { z } from 'zod';
import { PUBLIC } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { sha256Hex } from '../../../core/tokens.ts';
import { command, formField, html, page } from '../html.ts';
import { type AuthDeps, TAG as tag } from './auth.ts';
import { createOrgIn } from '../service.ts';

const setupQuery = z.lazy(() => z.object({ token: formField }));
const setupForm = z.lazy(() => z.object({ token: formField, email: formField, name: formField, password: formField, org: formField }));

export function setupRoutes(deps: AuthDeps, passwordMinLength: number): RouteGroup {
  const group = deps.api.group({ prefixes: ['/setup'], envelope: 'plain' });
  const form = (token: string, error?: string, values: Record<string, string> = {}) =>
    page(
      'Set up Wharf',
      html`<p>Create the first account. It will own a new organization.</p>
${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="/setup">
<input type="hidden" name="token" value="${token}">
<label for="email">Email</label><input id="email" name="email" type="email" required value="${values.email ?? ''}">
<label for="name">Name</label><input id="name" name="name" value="${values.name ?? ''}">
<label for="password">Password</label><input id="password" name="password" type="password" required minlength="${passwordMinLength}" autocomplete="new-password" aria-describedby="password-rule">
<p id="password-rule" class="hint">At least ${passwordMinLength} characters.</p>
<label for="org">Organization name</label><input id="org" name="org" required value="${values.org ?? ''}">
<button type="submit">Create account</button>
</form>`,
    );
  const invalid = () =>
    page(
      'Set up Wharf',
      html`<p class="error">This setup link is invalid, used or expired. Restart <code>wharf serve</code> with no users for a new one, or use <code>wharf admin create-user</code>.</p>`,
    );
  const usable = async (token: string) => token !== '' && (await deps.store.setupTokenValid(sha256Hex(token))) && (await deps.store.countUsers()) === 0;

  group.route({
    method: 'GET',
    path: '/setup',
    summary: 'The first-start page (HTML) that creates the first owner; 410 for a used, expired or unknown link',
    tag,
    auth: PUBLIC,
    query: setupQuery,
    success: { contentType: 'text/html' },
    errors: { 410: 'The link is invalid, used or expired (an HTML page)' },
    async handler(ctx, { query }) {
      ctx.type = 'html';
      if (!(await usable(query.token))) {
        ctx.status = 410;
        ctx.body = invalid();
        return;
      }
      ctx.body = form(query.token);
    },
  });

  group.route({
    method: 'POST',
    path: '/setup',
    summary: 'Create the first owner and its organization (HTML form); signs the browser in',
    tag,
    auth: PUBLIC,
    body: setupForm,
    bodyTypes: ['application/x-www-form-urlencoded'],
    success: { contentType: 'text/html' },
    errors: { 400: 'A field is missing or refused (the form again, with the reason)', 410: 'The link is invalid, used or expired (an HTML page)' },
    async handler(ctx, { body }) {
      const { token } = body;
      ctx.type = 'html';
      if (!(await usable(token))) {
        ctx.status = 410;
        ctx.body = invalid();
        return;
      }
      const values = { email: body.email, name: body.name, org: body.org };
      try {
        if (!values.org.trim()) throw new WharfError('bad_request', 'Organization name is required');
        const record = await deps.identity.prepareUser({ email: values.email, password: body.password, name: values.name });
        // Spending the link, the user and the organization happen together or not at all.
        const { user, org } = await deps.store.transaction(async (tx) => {
          if (!(await tx.useSetupToken(sha256Hex(token)))) throw new WharfError('conflict', 'This setup link was just used');
          const created = await tx.insertUser(record);
          return { user: created, org: await createOrgIn(tx, { name: values.org, ownerId: created.id }) };
        });
        await deps.loginSessions.start(ctx, user.id, org.id);
        ctx.body = page(
          'Wharf is ready',
          html`<p class="ok">Signed in as ${user.email}, owner of ${org.name}.</p><p><a href="/">Open the dashboard</a> to create an app, its API token and upload files.</p><p>Sign in from the command line, in the folder where you ran ${command('npm start')}, with ${command(`npx wharf login --instance ${deps.core.server.public_url}`)} (with the single binary, ${command(`./wharf login --instance ${deps.core.server.public_url}`)}).</p>`,
        );
      } catch (err) {
        if (!(err instanceof WharfError) || err.status >= 500) throw err;
        ctx.status = err.status;
        ctx.body = form(token, err.message, values);
      }
    },
  });

  return group;
}
