/**
 * The tokens plugin: app API tokens (`svc_live_...`). Only a token's SHA-256 is stored. A token
 * is a credential for its app: the plugin registers a bearer resolver producing the storage
 * plugin's `appToken` principal, so storage's file routes and `GET /api/cli/me` accept it, and
 * answers `POST /api/tokens/validate` with the store's public connection details.
 */
import { definePlugin } from '../../core/plugin.ts';
import { sha256Hex } from '../../core/tokens.ts';
import type { AppTokenPrincipal } from '../storage/types.ts';
import { tokensConfig } from './config.ts';
import { migrations } from './migrations.ts';
import { TOKEN_PREFIX, tokenRoutes } from './routes/tokens.ts';
import { TokensStore } from './store.ts';
import { LastUsed } from './usage.ts';

export default definePlugin({
  name: 'tokens',
  description: 'App API tokens (svc_live_...): create, list, revoke, validate; Bearer credentials for the file API.',
  dependsOn: ['storage'],
  config: tokensConfig,
  engines: ['sqlite', 'postgres'],
  migrations,
  setup({ config, data, auth, api, log, use }) {
    const storage = use('storage');
    const store = new TokensStore(data);
    const usage = new LastUsed(store, config.last_used_flush_ms, log);

    // Inside storage's deletion transaction: the tokens go with the app, or neither does.
    storage.onAppDeleted((appId, tx) => new TokensStore(tx).deleteOfApp(appId));

    auth.register({
      name: 'tokens:app-token',
      source: { bearer: (token) => token.startsWith(TOKEN_PREFIX) },
      async resolve(token) {
        const found = await store.byHash(sha256Hex(token));
        const app = found && (await storage.getApp(found.appId));
        if (!found || !app) return null;
        await usage.touch(found.id);
        return { kind: 'appToken', appId: app.id, orgId: app.orgId } satisfies AppTokenPrincipal;
      },
      describe(principal) {
        return { kind: 'appToken', appId: (principal as AppTokenPrincipal).appId };
      },
    });

    return {
      routes: [tokenRoutes({ api, store, storage, usage })],
      async close() {
        await usage.flush();
      },
    };
  },
});
