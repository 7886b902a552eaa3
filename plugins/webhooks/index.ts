/**
 * The webhooks plugin: every recorded session event that matches the session's subscription
 * (webhook_enabled, webhook_events) gets a dispatch row in a durable outbox (SQLite or PostgreSQL),
 * written in the transaction that records the event; a dispatcher POSTs them, signed, retried with
 * backoff, at least once across crashes; dispatch records and redelivery are served under
 * /api/dispatches. On PostgreSQL several instances share the outbox: deliveries are taken with
 * leases, and a new one wakes every instance at once (NOTIFY at the commit, LISTEN here).
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { PostgresDb } from '../../core/db-postgres.ts';
import { Counter, Gauge, Histogram } from 'prom-client';
import { definePlugin } from '../../core/plugin.ts';
import type { EventName, SessionRecord } from '../sessions/types.ts';
import { webhooksConfig } from './config.ts';
import { previousSecretContext, WebhookDispatcher } from './dispatcher.ts';
import { migrations } from './migrations.ts';
import { systemResolver } from '../../core/net.ts';
import { addressPolicy, checkWebhookUrl, lazyGuardedAgent } from './network.ts';
import { dispatchRoutes } from './routes/dispatches.ts';
import { OUTBOX, outboxRow, WAKE_CHANNEL, WebhooksStore } from './store.ts';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** How often the dispatcher re-reads due times from the outbox, in case a wake-up was missed. */
const RESYNC_MS = 15_000;

/** Whether a session's subscription takes this event: enabled, a URL, and the event named (or every event, for []). */
export function subscribed(session: SessionRecord, event: EventName): boolean {
  if (!session.webhookEnabled || !session.webhookUrl || session.webhookEvents === null) return false;
  return session.webhookEvents.length === 0 || session.webhookEvents.includes(event);
}

export default definePlugin({
  name: 'webhooks',
  description: 'Webhook delivery of session events: durable outbox, signed and retried deliveries, dispatch records (GET /api/dispatches).',
  dependsOn: ['sessions'],
  config: webhooksConfig,
  migrations,
  engines: ['sqlite', 'postgres'],
  async setup({ config, data, keys, log, api, metrics, use, every }) {
    const sessions = use('sessions');
    const store = new WebhooksStore(data);
    const policy = addressPolicy({ allowPrivateNetworks: config.allow_private_networks, allowedNetworks: config.allowed_networks });
    const http = lazyGuardedAgent({ policy, resolve: systemResolver, connectTimeoutMs: Math.min(config.timeout_ms, 10_000) });

    const attempts = new Counter({
      name: 'wharf_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered, failed (to be retried), abandoned (no attempt left, or nothing to deliver to).',
      labelNames: ['outcome'],
      registers: [metrics],
    });
    const durations = new Histogram({
      name: 'wharf_webhook_attempt_duration_seconds',
      help: 'Duration of webhook delivery attempts, from the request to the end of the answer.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [metrics],
    });
    const dispatcher = new WebhookDispatcher({
      store,
      sessions,
      keys,
      log: log.child({ plugin: 'webhooks' }),
      config,
      http,
      owner: `${hostname()}:${process.pid}:${randomUUID()}`,
      direct: data.engine === 'sqlite',
      observe(outcome, durationMs) {
        attempts.inc({ outcome });
        if (outcome !== 'abandoned' || durationMs > 0) durations.observe(durationMs / 1000);
      },
    });
    new Gauge({
      name: 'wharf_webhook_deliveries_in_flight',
      help: 'Webhook deliveries in flight now.',
      registers: [metrics],
      collect() {
        this.set(dispatcher.active);
      },
    });

    sessions.addWebhookUrlCheck((url) => checkWebhookUrl(url, { policy, resolve: systemResolver, timeoutMs: config.dns_timeout_ms }));

    // With the event, in the statement that records it: the outbox row commits with the event,
    // or neither does. The event carries the session as that transaction read it: its
    // subscription is not read again. On PostgreSQL the transaction may run again: the dispatcher
    // only remembers the row (by the event object) until the commit is announced.
    const unsubscribe = sessions.onEventRow(OUTBOX, (event) => {
      const { session } = event;
      if (!subscribed(session, event.event)) return undefined;
      const row = {
        session_id: event.sessionId,
        webhook_id: `msg_${randomUUID().replaceAll('-', '')}`,
        url: session.webhookUrl!,
        body: event.raw,
        attempt_count: 0,
      };
      return {
        values: outboxRow(
          { orgId: event.orgId, sessionId: row.session_id, webhookId: row.webhook_id, event: event.event, url: row.url, body: row.body },
          Date.now(),
        ),
        written: (id) => dispatcher.enqueued(event, { id, ...row }),
      };
    });
    const unlisten = sessions.afterEvent((event) => dispatcher.committed(event, event.sessionId));
    const unrotate = sessions.onWebhookSecretRotated(async (rotation, tx) => {
      const until = rotation.rotatedAt.getTime() + config.secret_rotation_grace_seconds * 1000;
      await store.setPreviousSecret(rotation.sessionId, keys.encrypt(rotation.previousSecret, previousSecretContext(rotation.sessionId)), until, tx);
      dispatcher.forgetSecrets(rotation.sessionId);
      return config.secret_rotation_grace_seconds > 0 ? { previousValidUntil: new Date(until) } : undefined;
    });

    const prune = async () => {
      try {
        const now = Date.now();
        const removed = await store.prune(now - config.retention_days * DAY, now);
        if (removed) log.info({ removed }, 'pruned old webhook dispatch records');
      } catch (err) {
        log.error({ err }, 'pruning webhook dispatch records failed');
      }
    };
    await prune();
    every('prune-dispatch-records', HOUR, prune);
    every('resync-outbox', RESYNC_MS, () => dispatcher.resync());
    // Shared outbox (PostgreSQL): the leases of what this instance holds, renewed every third of a lease.
    if (data instanceof PostgresDb) every('renew-webhook-leases', Math.floor((config.lease_seconds * 1000) / 3), () => dispatcher.renewLeases());
    // Other instances' new deliveries and freed slots (PostgreSQL): their NOTIFY, delivered at
    // their commit, wakes this dispatcher. This instance's own are skipped: it knows of them in
    // process already (an event's commit is announced to `committed`, an outcome's write wakes the
    // queue in `#write`, a redelivery marks its session due), and each would cost a claim that
    // finds nothing (BENCHMARKS.md, issue 16 part 8); the periodic resync stays the safety net.
    const unlistenWake =
      data instanceof PostgresDb
        ? await data.listen(
            WAKE_CHANNEL,
            (payload, ours) => {
              if (ours) return;
              const sessionId = Number(payload);
              if (Number.isSafeInteger(sessionId)) dispatcher.markDue(sessionId, Date.now());
            },
            (err) => log.warn({ err }, 'the webhook wake-up connection broke; new deliveries of other instances are found by the periodic resync'),
          )
        : async () => {};
    await dispatcher.start();

    return {
      routes: [dispatchRoutes({ api, sessions, store, dispatcher, maxAttempts: config.max_attempts })],
      async close() {
        await unlistenWake();
        unsubscribe();
        unlisten();
        unrotate();
        await dispatcher.close(config.shutdown_wait_ms);
        await http.destroy();
      },
    };
  },
});
