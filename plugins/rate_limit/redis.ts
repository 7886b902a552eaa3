/**
 * The connection to the Redis of `store = "redis"` (ioredis). It fails fast instead of queueing:
 * a command sent while the connection is down fails at once, and one that gets no answer within
 * `timeoutMs` fails then (`answerWithin`, which its callers wrap each command in), so a request
 * never waits long on a Redis that is gone or stuck. It reconnects on its own, for as long as the
 * server runs.
 *
 * Why ioredis rather than node-redis (`redis`): it is rate-limiter-flexible's default client, and
 * with it the limiter registers its script once and sends `EVALSHA` (with node-redis it sends the
 * whole script with `EVAL` on every request); it adds 0.19 MiB to the binary where @redis/client
 * bundles to 0.63 MiB; and it has the knobs failing fast needs (`commandTimeout`,
 * `enableOfflineQueue`). Redis itself points new projects to node-redis, but ioredis is kept up
 * by Redis too (6.0.0, July 2026).
 */
import fs from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';
import { timeoutAfterIo } from '../../core/timers.ts';

export interface RedisConnection {
  /** redis:// or rediss:// (TLS), with optional user, password and database number. */
  url: string;
  /** How long one command may take before it fails, in milliseconds. */
  timeoutMs: number;
  /** How long the first connection may take (TCP, TLS, AUTH, ready check), in milliseconds. */
  connectTimeoutMs: number;
  /** PEM file of the certificate authority of the server's certificate (rediss:// only). */
  tlsCaFile?: string;
}

/** The URL as it may be shown: scheme, host, port and database, never the user or the password. */
export function describeRedisUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname.length > 1 ? parsed.pathname : ''}`;
}

/** Longest pause between two reconnection attempts, in milliseconds. */
const MAX_RECONNECT_DELAY_MS = 2000;

/** What a command that got no answer in time fails with (ioredis's own words for it). */
export const TIMED_OUT = 'Command timed out';

/** Rejects with `message` once `ms` have passed (after the answers already received: `timeoutAfterIo`), unless cancelled first. */
function deadline(ms: number, message: string): { expired: Promise<never>; cancel(): void } {
  let cancel = () => {};
  const expired = new Promise<never>((_, reject) => {
    cancel = timeoutAfterIo(ms, () => reject(new Error(message)));
  });
  // Raced, so handled; but a deadline cancelled after it fired must not reject unobserved.
  expired.catch(() => {});
  return { expired, cancel };
}

/** The answer to `command`, or an error ("Command timed out") when it takes more than `ms` milliseconds. */
export async function answerWithin<T>(command: Promise<T>, ms: number): Promise<T> {
  const limit = deadline(ms, TIMED_OUT);
  try {
    return await Promise.race([command, limit.expired]);
  } finally {
    limit.cancel();
  }
}

/**
 * Connects to Redis and waits until it is ready (authenticated, database selected). Throws an
 * error of one line naming the server (without its password) and the reason when it cannot.
 */
export async function connectRedis(options: RedisConnection): Promise<Redis> {
  const where = describeRedisUrl(options.url);
  const settings: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    // No commandTimeout: its plain timer fails answers that came in time on a loaded machine (see
    // `deadline`); the connection below and every command of the store are bounded with `deadline`.
    connectTimeout: options.connectTimeoutMs,
    // A command in flight when the connection drops fails at once, rather than after reconnecting.
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    connectionName: 'wharf-rate-limit',
  };
  if (options.tlsCaFile) {
    try {
      settings.tls = { ca: fs.readFileSync(options.tlsCaFile) };
    } catch (err) {
      throw new Error(`cannot read redis.tls_ca_file ${options.tlsCaFile}: ${(err as Error).message}`);
    }
  }
  // The URL's own settings (host, port, user, password, database, TLS for rediss://) win over these.
  const client = new Redis(options.url, settings);
  // connect() only says "Connection is closed."; the reason (refused, WRONGPASS, a TLS failure)
  // comes as an error event, kept here for the message.
  let reason: Error | undefined;
  const remember = (err: Error) => {
    reason = err;
  };
  client.on('error', remember);
  // A server that accepts the connection but never answers (stopped, or not Redis) would keep
  // connect() waiting for ever. The connection and its ready check (HELLO, INFO) get
  // connect_timeout_ms in all: timeout_ms is a request's, too short for several round trips while
  // a busy machine starts the server.
  let connected = false;
  client.once('connect', () => {
    connected = true;
  });
  const ms = options.connectTimeoutMs;
  const limit = deadline(ms, TIMED_OUT);
  try {
    await Promise.race([client.connect(), limit.expired]);
  } catch (err) {
    // What the dropped connection's pending handshake fails with after this is of no interest (and,
    // without a listener, ioredis would print it).
    client.on('error', () => {});
    client.disconnect();
    const message = (reason ?? (err as Error)).message;
    // Connected, and then nothing: the server took the connection but says nothing.
    const said = message === TIMED_OUT ? (connected ? `connected, but no answer in ${ms} ms (connect_timeout_ms)` : `no answer in ${ms} ms`) : message;
    throw new Error(`cannot reach Redis at ${where}: ${said}`);
  } finally {
    limit.cancel();
    client.off('error', remember);
  }
  return client;
}

/** Says goodbye to Redis (QUIT), or drops the connection if it does not answer in time; stops reconnecting either way. */
export async function closeRedis(client: Redis, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([client.quit(), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  } catch {
    // Down already: nothing to say goodbye to.
  } finally {
    clearTimeout(timer);
    client.disconnect();
  }
}
