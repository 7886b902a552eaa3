/**
 * Counters in Redis (rate-limiter-flexible's RateLimiterRedis: one atomic script per request),
 * shared by every instance that names the same Redis and key prefix.
 *
 * When Redis fails or does not answer within the command timeout, the request is counted in this
 * instance's memory instead, with the same limits (what rate-limiter-flexible's insuranceLimiter
 * does, done here so that it can be logged and counted). Then, for a second, every request goes
 * straight to memory, so a stuck Redis costs one timeout a second rather than one per request;
 * after that Redis is tried again. Callers never see the outage as an error: limits still hold,
 * per instance, and the headers keep their meaning.
 */
import type { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { answerWithin, closeRedis, connectRedis, describeRedisUrl, type RedisConnection } from './redis.ts';
import { consumeFrom, memoryStore, type RateLimitStore } from './store.ts';

/** What the store tells the plugin, which logs and counts it. */
export interface StoreEvents {
  /** Redis stopped answering; requests are counted in memory until it answers. Once per outage; the reason is a message, never the error (ioredis errors carry the command's arguments, AUTH's password included). */
  down(reason: string): void;
  /** Redis answers again. */
  up(): void;
  /** One request was counted in memory. */
  fallback(): void;
}

export interface RedisStoreOptions {
  client: Redis;
  /** Start of every key (`wharf:rl:`); the counter's name and the caller follow. */
  keyPrefix: string;
  events: StoreEvents;
  /** How long a request waits for Redis's answer before it is counted in memory, in milliseconds (timeout_ms). */
  timeoutMs: number;
  /** After a failure, how long requests go straight to memory before Redis is tried again. */
  retryAfterMs?: number;
}

/** After a failure, requests go straight to memory this long (ms) before Redis is tried again. */
const RETRY_AFTER_MS = 1000;
/** How long closing waits for Redis to acknowledge QUIT, in milliseconds. */
const CLOSE_TIMEOUT_MS = 1000;

/** Whether Redis is answering, from the results of commands and the connection's events. */
function redisHealth(events: StoreEvents, retryAfterMs: number) {
  let down = false;
  let retryAt = 0;
  return {
    /** True while requests should not even try Redis. */
    skip: () => down && Date.now() < retryAt,
    failed(reason: string) {
      retryAt = Date.now() + retryAfterMs;
      if (!down) {
        down = true;
        events.down(reason);
      }
    },
    answered() {
      if (down) {
        down = false;
        events.up();
      }
    },
  };
}

/** A store on a connected client; closing it closes the client. */
export function redisStore(options: RedisStoreOptions): RateLimitStore {
  const { client, keyPrefix, events, timeoutMs } = options;
  const health = redisHealth(events, options.retryAfterMs ?? RETRY_AFTER_MS);
  const fallback = memoryStore();
  let closing = false;
  // Without a listener ioredis prints its errors to the console; these are the reconnection
  // attempts' (refused, timed out), which say the outage goes on.
  client.on('error', (err: Error) => {
    if (!closing) health.failed(err.message);
  });
  client.on('ready', () => health.answered());
  return {
    counter(spec) {
      const shared = new RateLimiterRedis({
        storeClient: client,
        keyPrefix: `${keyPrefix}${spec.name}`,
        points: spec.limit,
        duration: spec.windowSeconds,
        // Not connected: fail at once (and count in memory) rather than send into a dead socket.
        rejectIfRedisNotReady: true,
      });
      const local = fallback.counter(spec);
      return {
        async consume(key, cost = 1) {
          if (!health.skip()) {
            try {
              const decision = await answerWithin(consumeFrom(shared, spec, key, cost), timeoutMs);
              health.answered();
              return decision;
            } catch (err) {
              health.failed((err as Error).message);
            }
          }
          events.fallback();
          return local.consume(key, cost);
        },
      };
    },
    async close() {
      closing = true;
      await closeRedis(client, CLOSE_TIMEOUT_MS);
    },
  };
}

/**
 * Connects, then counts once on a key of its own (`<prefix>start-check:probe`, gone after a
 * second): proves at start, not on the first request, that the user may run the limiter's script
 * (EVAL/EVALSHA) and write under the prefix. Throws one line when it cannot.
 */
export async function openRedisStore(connection: RedisConnection & { keyPrefix: string }, events: StoreEvents): Promise<RateLimitStore> {
  const client = await connectRedis(connection);
  // Until the store listens: an error event without a listener would go to the console.
  const quiet = () => {};
  client.on('error', quiet);
  try {
    const spec = { name: 'start-check', limit: 1, windowSeconds: 1 };
    const probe = new RateLimiterRedis({
      storeClient: client,
      keyPrefix: `${connection.keyPrefix}${spec.name}`,
      points: spec.limit,
      duration: spec.windowSeconds,
    });
    // At start: connect_timeout_ms, as for connecting (timeout_ms is each request's).
    await answerWithin(consumeFrom(probe, spec, 'probe', 1), connection.connectTimeoutMs);
  } catch (err) {
    await closeRedis(client, CLOSE_TIMEOUT_MS);
    throw new Error(`Redis at ${describeRedisUrl(connection.url)} refused the rate limiter's commands: ${(err as Error).message}`);
  } finally {
    client.off('error', quiet);
  }
  return redisStore({ client, keyPrefix: connection.keyPrefix, events, timeoutMs: connection.timeoutMs });
}
