/**
 * The sessions plugin: messaging sessions owned by organizations, their two credentials
 * (session API keys and personal access tokens), WasenderAPI's session and message operations,
 * the sandbox network, and the recorded events the webhooks plugin delivers.
 */
import { definePlugin } from '../../core/plugin.ts';
import { systemResolver } from '../../core/net.ts';
import { checkProxyUrl } from './address-guard.ts';
import { sessionsConfig } from './config.ts';
import { registerResolvers } from './credentials.ts';
import { MediaStore } from './media-store.ts';
import { migrations } from './migrations.ts';
import { SandboxNetwork } from './networks/sandbox.ts';
import { accountRoutes } from './routes/account.ts';
import type { RouteDeps } from './routes/common.ts';
import { contactRoutes } from './routes/contacts.ts';
import { groupRoutes } from './routes/groups.ts';
import { mediaRoutes } from './routes/media.ts';
import { messageRoutes } from './routes/messages.ts';
import { sandboxSessionRoutes, sessionRoutes } from './routes/sessions.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { Sessions } from './service.ts';
import { SessionsStore } from './store.ts';
import type { SessionsService } from './types.ts';

export default definePlugin({
  name: 'sessions',
  description: 'Messaging sessions (WhatsApp-compatible API), session API keys, personal access tokens, the sandbox network, session events.',
  dependsOn: ['identity'],
  config: sessionsConfig,
  migrations,
  setup({ config, core, db, keys, auth, api, log, use, every }) {
    const identity = use('identity');
    const store = new SessionsStore(db, keys);
    const sessions = new Sessions(store, log, { accountProtectionSeconds: config.account_protection_interval_seconds });
    sessions.registerNetwork('sandbox', new SandboxNetwork(db, sessions.host, { publicUrl: core.server.public_url }));
    registerResolvers({ auth, store, identity, lastUsedResolutionMs: config.pat_last_used_resolution_seconds * 1000 });

    api.scheme('personalAccessToken', {
      type: 'http',
      scheme: 'bearer',
      description:
        'A personal access token (wpat_...), for account-level operations. A signed-in user (dashboard __session cookie, or a command-line OAuth token) is accepted too.',
    });
    api.scheme('sessionApiKey', { type: 'http', scheme: 'bearer', description: "A session's API key (wsk_...), for operations acting as that session's account." });

    const deps: RouteDeps = {
      sessions,
      api,
      config,
      checkProxy: (url) => checkProxyUrl(url, { allowPrivate: config.allow_private_networks, resolve: systemResolver, timeoutMs: config.dns_timeout_ms }),
    };
    const { send, messages } = messageRoutes(deps);
    const media = new MediaStore(db);
    const { contacts, presence, lookups } = contactRoutes(deps);

    const day = 86_400_000;
    every('prune-events-and-message-logs', 3_600_000, () =>
      store.prune(new Date(Date.now() - config.event_retention_days * day).toISOString(), new Date(Date.now() - config.message_log_retention_days * day).toISOString()),
    );
    every('prune-expired-media-urls', 3_600_000, () => media.prune(new Date().toISOString()));

    return {
      service: sessions satisfies SessionsService,
      routes: [
        sessionRoutes(deps, '/api/whatsapp-sessions'),
        sessionRoutes(deps, '/api/messaging-sessions'),
        sandboxSessionRoutes(deps),
        tokenRoutes({ ...deps, identity }),
        send,
        messages,
        ...accountRoutes(deps),
        mediaRoutes({ ...deps, media, publicUrl: core.server.public_url }),
        contacts,
        presence,
        lookups,
        groupRoutes(deps),
      ],
      async close() {
        for (const network of sessions.networks()) await network.close();
      },
    };
  },
});
