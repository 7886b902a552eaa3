/**
 * The rate_limit plugin: limits per route group and per caller (each credential, or the client
 * address for calls without a valid one), `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
 * `X-RateLimit-Reset` (Unix seconds) on every response of a limited path, errors included, and
 * 429 `{message, retry_after}` with `Retry-After` past the limit. Health, readiness and metrics
 * are never limited. Counters are in memory or in Redis (shared between instances), behind the
 * store interface of `store.ts`.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../../core/logger.ts';
import { definePlugin } from '../../core/plugin.ts';
import { type RateLimitConfig, rateLimitConfig, storeProblems } from './config.ts';
import { compileRules, rateLimiter } from './middleware.ts';
import { memoryStore, type RateLimitStore } from './store.ts';

/** The configured store; for Redis, connected and checked, its outages logged and counted. */
async function openStore(config: RateLimitConfig, log: Logger, metrics: Registry): Promise<RateLimitStore> {
  if (config.store === 'memory') return memoryStore();
  const { redis } = config;
  const url = redis.url!; // required with store = "redis" (storeProblems)
  const up = new Gauge({
    name: 'wharf_rate_limit_store_up',
    help: "1 while the rate limit's Redis answers; 0 while requests are counted in this instance's memory instead.",
    registers: [metrics],
  });
  const fallbacks = new Counter({
    name: 'wharf_rate_limit_fallback_total',
    help: "Requests the rate limit counted in this instance's memory because Redis failed or did not answer in time.",
    registers: [metrics],
  });
  // Loaded only for this store: ioredis takes tens of milliseconds to load, which every start
  // with the memory store would pay for nothing.
  const [{ openRedisStore }, { describeRedisUrl }] = await Promise.all([import('./redis-store.ts'), import('./redis.ts')]);
  const where = describeRedisUrl(url);
  const store = await openRedisStore(
    { url, keyPrefix: redis.key_prefix, timeoutMs: redis.timeout_ms, connectTimeoutMs: redis.connect_timeout_ms, tlsCaFile: redis.tls_ca_file },
    {
      down(reason) {
        up.set(0);
        log.warn({ redis: where, reason }, "rate limit store unavailable; counting requests in this instance's memory until it answers");
      },
      up() {
        up.set(1);
        log.info({ redis: where }, 'rate limit store answers again; counters are shared again');
      },
      fallback: () => fallbacks.inc(),
    },
  );
  up.set(1);
  log.info({ redis: where, keyPrefix: redis.key_prefix }, 'rate limit counters in Redis');
  return store;
}

export default definePlugin({
  name: 'rate_limit',
  description: 'Request limits per route group and per credential or client address; X-RateLimit-* headers and 429 answers.',
  config: rateLimitConfig,
  // No tables of its own: it runs on either database.
  engines: ['sqlite', 'postgres'],
  validate: storeProblems,
  async setup({ config, metrics, log }) {
    const store = await openStore(config, log, metrics);
    const limited = new Counter({
      name: 'wharf_rate_limited_total',
      help: 'Requests refused with 429 by the rate_limit plugin, by rule.',
      labelNames: ['rule'],
      registers: [metrics],
    });
    return {
      middleware: [
        {
          name: 'rate_limit',
          // Before the guards and every route: a flooding caller is refused before its body is
          // read, and every refusal further down already carries the headers.
          priority: 'limits',
          fn: rateLimiter({
            rules: compileRules(config, store),
            ipv6Subnet: config.ipv6_subnet,
            onLimited: (rule) => limited.inc({ rule }),
          }),
        },
      ],
      async close() {
        await store.close?.();
      },
    };
  },
});
