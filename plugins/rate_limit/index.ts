/**
 * The rate_limit plugin: limits per route group and per caller (each credential, or the client
 * address for calls without a valid one), `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
 * `X-RateLimit-Reset` (Unix seconds) on every response of a limited path, errors included, and
 * 429 `{message, retry_after}` with `Retry-After` past the limit. Health, readiness and metrics
 * are never limited. Counters are in memory, behind the store interface of `store.ts`.
 */
import { Counter } from 'prom-client';
import { definePlugin } from '../../core/plugin.ts';
import { rateLimitConfig } from './config.ts';
import { compileRules, rateLimiter } from './middleware.ts';
import { memoryStore } from './store.ts';

export default definePlugin({
  name: 'rate_limit',
  description: 'Request limits per route group and per credential or client address; X-RateLimit-* headers and 429 answers.',
  config: rateLimitConfig,
  setup({ config, metrics }) {
    const store = memoryStore();
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
