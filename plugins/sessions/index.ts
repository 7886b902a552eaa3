/**
 * The sessions plugin: messaging sessions owned by organizations, their two credentials
 * (session API keys and personal access tokens), WasenderAPI's session and message operations,
 * the sandbox network, and the recorded events the webhooks plugin delivers.
 *
 * Layers: `routes/` (HTTP only: one file per URL group, named after it) -> the services
 * (`service.ts` shared, `management.ts` sessions, `messages.ts` sends and message operations,
 * `directory.ts` contacts and groups, `personal-access-tokens.ts`, `media.ts`) -> `store.ts` / `media-store.ts` (SQL). Networks
 * plug in behind `networks/types.ts`; `network-host.ts` is what they report through.
 */
import { networkInterfaces } from 'node:os';
import { PostgresDb } from '../../core/db-postgres.ts';
import type { CoreConfig } from '../../core/core-config.ts';
import { systemResolver } from '../../core/net.ts';
import { definePlugin } from '../../core/plugin.ts';
import { checkProxyUrl } from './address-guard.ts';
import { sessionsConfig } from './config.ts';
import { FORWARD_KEY, forwardEndpoint, OwnerClient } from './forwarding.ts';
import { SessionLeases } from './leases.ts';
import { messagingCredentials } from './credentials.ts';
import { Directory } from './directory.ts';
import { SessionAdmin } from './management.ts';
import { MediaUrls } from './media.ts';
import { MediaStore } from './media-store.ts';
import { Messages } from './messages.ts';
import { migrations } from './migrations.ts';
import { SandboxNetwork } from './networks/sandbox.ts';
import { WhatsAppNetwork } from './networks/whatsapp/index.ts';
import { PersonalAccessTokens } from './personal-access-tokens.ts';
import { EventRecorder } from './recorder.ts';
import type { RouteDeps } from './routes/common.ts';
import { contactRoutes } from './routes/contacts.ts';
import { groupRoutes } from './routes/groups.ts';
import { lookupRoutes } from './routes/lookups.ts';
import { mediaRoutes } from './routes/media.ts';
import { messageRoutes } from './routes/messages.ts';
import { personalAccessTokenRoutes } from './routes/personal-access-tokens.ts';
import { sandboxRoutes } from './routes/sandbox.ts';
import { sendMessageRoutes } from './routes/send-message.ts';
import { sessionEventRoutes } from './routes/session-events.ts';
import { presenceRoutes } from './routes/send-presence-update.ts';
import { statusRoutes } from './routes/status.ts';
import { webhookEventRoutes } from './routes/webhook-events.ts';
import { whatsappSessionRoutes } from './routes/whatsapp-sessions.ts';
import { Sessions } from './service.ts';
import { ScopedDb } from './scoped-db.ts';
import { SessionsStore } from './store.ts';
import type { SessionsService } from './types.ts';

/**
 * Where the other instances reach this one: `[plugins.sessions] internal_url`, else the listen
 * address, else (listening on every address) this machine's first non-loopback IPv4 address with
 * the listen port; null when there is none.
 */
export function internalUrl(configured: string | undefined, server: Pick<CoreConfig['server'], 'host' | 'port'>): string | null {
  if (configured) return configured.replace(/\/+$/, '');
  const { host, port } = server;
  if (host !== '0.0.0.0' && host !== '::' && host !== '') return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const address = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  return address ? `http://${address}:${port}` : null;
}

export default definePlugin({
  name: 'sessions',
  description: 'Messaging sessions (WhatsApp-compatible API), session API keys, personal access tokens, the sandbox network, session events.',
  dependsOn: ['identity'],
  config: sessionsConfig,
  migrations,
  engines: ['sqlite', 'postgres'],
  setup({ config, core, data, keys, auth, api, log, metrics, use, every }) {
    const identity = use('identity');
    // One view of the data layer for every store of the plugin: inside a transaction, queries join it.
    const db = new ScopedDb(data);
    const store = new SessionsStore(db, keys);
    const proxyCheck = { allowPrivate: config.allow_private_networks, resolve: systemResolver, timeoutMs: config.dns_timeout_ms };
    const sessions = new Sessions(store, new EventRecorder(store, log), (self) =>
      messagingCredentials({
        auth,
        store,
        identity,
        lastUsedResolutionMs: config.pat_last_used_resolution_seconds * 1000,
        network: (session) => self.network(session),
      }),
    );
    sessions.registerNetwork('sandbox', (host) => new SandboxNetwork(db, host, { publicUrl: core.server.public_url }));
    // Several instances on one database: a session's socket only where its lease is held (leases.ts);
    // what needs the socket on another instance is run here through the owner (forwarding.ts).
    const shared = data instanceof PostgresDb;
    const ownUrl = internalUrl(config.internal_url, core.server);
    const leases = new SessionLeases(data, config.lease_seconds, { shared, url: ownUrl });
    const notices: string[] = [];
    if (shared && !ownUrl) {
      const line = `sessions: no internal URL for this instance (it listens on ${core.server.host}:${core.server.port} and has no non-loopback IPv4 address): requests reaching other instances for the sessions it drives answer 503; set [plugins.sessions] internal_url`;
      log.warn(line);
      notices.push(line);
    } else if (shared) log.info({ internalUrl: ownUrl }, 'sessions: other instances reach this one at its internal URL');
    const forwardKey = keys.derive(FORWARD_KEY);
    const { whatsapp: wa } = config;
    const owners = new OwnerClient({
      key: forwardKey,
      // Longer than any adapter method waits on the owner (a connect for its first QR code, a send for its ack).
      timeoutMs: Math.max(wa.connect_timeout_ms, wa.send_timeout_ms) + 15_000,
      retryAfterSeconds: config.lease_seconds,
      log,
      metrics,
    });
    // Baileys loads when a whatsapp session first connects or resumes, never at start-up.
    const whatsapp = sessions.registerNetwork(
      'whatsapp',
      (host) =>
        new WhatsAppNetwork(db, keys, host, {
          config: config.whatsapp,
          publicUrl: core.server.public_url,
          allowPrivateNetworks: config.allow_private_networks,
          proxyCheck,
          maxMediaBytes: config.upload_max_bytes,
          uploadTtlHours: config.upload_ttl_hours,
          log,
          leases,
          owners,
        }),
    ) as WhatsAppNetwork;
    // Resumes the whatsapp sessions that were connected (after start-up) and runs their watchdog.
    every('whatsapp-supervisor', 2000, () => whatsapp.supervise());
    every('session-leases', Math.floor(leases.ms / 3), () => whatsapp.renewLeases());
    every('whatsapp-prune', 3_600_000, () => whatsapp.prune());

    api.scheme('personalAccessToken', {
      type: 'http',
      scheme: 'bearer',
      description:
        'A personal access token (wpat_...), for account-level operations. A signed-in user (dashboard __session cookie, or a command-line OAuth token) is accepted too.',
    });
    api.scheme('sessionApiKey', {
      type: 'http',
      scheme: 'bearer',
      description: "A session's API key (wsk_...), for operations acting as that session's account.",
    });

    const mediaStore = new MediaStore(db);
    const deps: RouteDeps = {
      api,
      config,
      sessions,
      admin: new SessionAdmin(sessions, {
        checkProxy: (url) => checkProxyUrl(url, proxyCheck),
      }),
      messages: new Messages(sessions, { accountProtectionSeconds: config.account_protection_interval_seconds }),
      pats: new PersonalAccessTokens(store, identity),
      directory: new Directory(sessions),
      media: new MediaUrls(sessions, mediaStore, {
        publicUrl: core.server.public_url,
        uploadTtlHours: config.upload_ttl_hours,
        decryptedTtlMinutes: config.decrypted_media_ttl_minutes,
      }),
    };

    const day = 86_400_000;
    const daysAgo = (days: number) => new Date(Date.now() - days * day).toISOString();
    every('prune-events-and-logs', 3_600_000, async () => {
      const removed = await store.prune({
        events: daysAgo(config.event_retention_days),
        messages: daysAgo(config.message_log_retention_days),
        statusLogs: daysAgo(config.session_log_retention_days),
        auditLogs: daysAgo(config.audit_log_retention_days),
      });
      if (Object.values(removed).some((n) => n > 0)) log.info({ removed }, 'pruned old session events and logs');
    });
    every('prune-expired-media-urls', 3_600_000, () => mediaStore.prune(new Date().toISOString()));

    return {
      service: sessions satisfies SessionsService,
      notices,
      middleware: [
        {
          name: 'sessions:calls-between-instances',
          fn: forwardEndpoint({
            key: forwardKey,
            maxBytes: core.server.body_limit_bytes + 65_536,
            serve: (call) => whatsapp.serveForwarded(call),
            log,
          }),
        },
      ],
      routes: [
        whatsappSessionRoutes(deps, '/api/whatsapp-sessions'),
        whatsappSessionRoutes(deps, '/api/messaging-sessions'),
        // /api/sandbox-sessions, /api/sandbox/receive
        ...sandboxRoutes(deps),
        personalAccessTokenRoutes(deps),
        sessionEventRoutes(deps, {
          metrics,
          heartbeatMs: config.event_stream_heartbeat_seconds * 1000,
          maxMs: config.event_stream_max_seconds * 1000,
        }),
        sendMessageRoutes(deps),
        messageRoutes(deps),
        // /api/status, /api/user
        ...statusRoutes(deps),
        webhookEventRoutes(deps),
        // /api/upload, /api/media, /api/decrypt-media, /api/decrypted-media
        mediaRoutes(deps),
        contactRoutes(deps),
        presenceRoutes(deps),
        // /api/on-whatsapp, /api/lid-from-pn, /api/pn-from-lid
        lookupRoutes(deps),
        groupRoutes(deps),
      ],
      async close() {
        for (const network of sessions.networks()) await network.close();
      },
    };
  },
});
