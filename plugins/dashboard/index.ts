/**
 * The dashboard plugin: the web UI served by the binary at `/` (sign-in at `/login`). The page
 * is a small Preact application (`ui/`), bundled by esbuild into one hashed script and one
 * stylesheet that the binary carries; it talks to the public HTTP API only, with the same routes,
 * credentials, envelopes and cross-site rules as any other client.
 */
import { definePlugin } from '../../core/plugin.ts';
import { lazyAssets } from './assets.ts';
import { dashboardConfig } from './config.ts';
import { dashboardRoutes } from './routes.ts';

export default definePlugin({
  name: 'dashboard',
  description: 'The web dashboard at / (sign-in at /login): apps, tokens, files, sessions, webhooks, deliveries, organizations.',
  config: dashboardConfig,
  // No tables of its own: it runs on either database.
  engines: ['sqlite', 'postgres'],
  setup({ api, config }) {
    const { oidc } = config;
    const settings = { clientId: oidc.client_id ?? null, scope: oidc.scope, resource: oidc.resource ?? null, token: oidc.token, cookie: oidc.cookie };
    return { routes: [dashboardRoutes(api, lazyAssets(), settings)] };
  },
});
