/**
 * The core's own settings, `[server]`, `[log]` and `[database]`: their schema (every key
 * documented once) and what the core hands plugins after defaults and derivations. Apart from
 * config.ts, which reads and checks the whole config, so that the plugin contract can name these
 * settings without depending on the reader.
 */
import { z } from 'zod';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):\d{1,5}$/, { message: 'expected HOST:PORT, for example 127.0.0.1:8080', abort: true })
  .refine((s) => Number(s.slice(s.lastIndexOf(':') + 1)) <= 65535, 'port must be at most 65535');

/** The core's own sections. Every field is documented here once; the README and config.example.toml follow. */
export const coreSchema = z.strictObject({
  server: z
    .strictObject({
      listen: listenAddress.default('127.0.0.1:8080').describe('Address and port the HTTP server listens on (HOST:PORT). Flag --listen.'),
      public_url: z
        .url({ protocol: /^https?$/ })
        .optional()
        .describe(
          'URL at which clients reach this server (scheme, host, port). Used in links, cookies (Secure when https) and the CLI discovery document. Default: http://<listen>.',
        ),
      data_dir: z
        .string()
        .min(1)
        .default('./wharf-data')
        .describe(
          'Directory for the database, keys and embedded objects; created with mode 0700. Relative paths are relative to the working directory. Flag --data-dir.',
        ),
      body_limit_bytes: z.int().min(1024).default(1_048_576).describe('Largest JSON or form request body accepted, in bytes; larger bodies get 413.'),
      trust_proxy: z.boolean().default(false).describe('Trust X-Forwarded-For / X-Forwarded-Proto from a reverse proxy in front of Wharf.'),
      metrics: z.boolean().default(true).describe('Serve Prometheus metrics at GET /metrics.'),
      shutdown_timeout_ms: z
        .int()
        .min(0)
        .default(10_000)
        .describe('On SIGTERM/SIGINT, how long in-flight requests may take before connections are closed, in milliseconds.'),
      headers_timeout_ms: z
        .int()
        .min(100)
        .max(600_000)
        .default(10_000)
        .describe("How long a client may take to send a request's headers, in milliseconds; past it the connection gets 408 and is closed."),
      request_timeout_ms: z
        .int()
        .min(100)
        .max(3_600_000)
        .default(120_000)
        .describe(
          'How long a client may take to send a whole request, headers and body, in milliseconds; past it the connection gets 408 and is closed, so a stalled body cannot hold it. Raise it for large /api/upload bodies over slow links.',
        ),
    })
    .prefault({})
    .describe('The HTTP server.'),
  log: z
    .strictObject({
      level: z.enum(LOG_LEVELS).default('info').describe('Least severe level written to stdout (JSON lines).'),
    })
    .prefault({})
    .describe('Logging.'),
  database: z
    .strictObject({
      url: z
        .string()
        .regex(/^(sqlite:.+|postgres(ql)?:\/\/.+)$/, { message: 'expected sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE' })
        .optional()
        .describe(
          'The database: `sqlite:PATH` (a file, relative to the working directory) or `postgres://USER:PASSWORD@HOST:PORT/DATABASE`. Default: SQLite at `path`. Env WHARF_DATABASE__URL.',
        ),
      path: z.string().min(1).optional().describe('SQLite database file, when `url` names none. Default: <data_dir>/wharf.db.'),
      busy_timeout_ms: z
        .int()
        .min(0)
        .default(5000)
        .describe('How long a write waits for a lock held by another process (for example `wharf admin` while the server runs), in milliseconds.'),
      checkpoints: z
        .enum(['worker', 'main'])
        .default('worker')
        .describe(
          'SQLite: where the write-ahead log is copied into the database file (a checkpoint, with two fsyncs): `worker`, a thread of its own, off the event loop, once writes are frequent (see `checkpoint_worker_commits`); `main`, inside the commit that takes the log past 1000 pages, as SQLite does by default, blocking requests meanwhile.',
        ),
      checkpoint_worker_commits: z
        .int()
        .min(0)
        .default(20)
        .describe(
          'SQLite, `checkpoints = "worker"`: the worker thread starts at the first second with this many commits, and stays; 0 starts it with the server. It costs about 15 MiB of memory; until it starts, checkpoints run as with `main`.',
        ),
      pool_size: z.int().min(1).max(1000).default(10).describe('PostgreSQL: connections each instance keeps open at most.'),
      connect_timeout_ms: z
        .int()
        .min(100)
        .default(5000)
        .describe('PostgreSQL: how long opening a connection may take, in milliseconds; at start an unreachable server fails the start after it.'),
    })
    .prefault({})
    .describe('The database: SQLite (embedded, the default) or PostgreSQL.'),
});

export type CoreSections = z.output<typeof coreSchema>;

/** The core settings after defaults and derivations: absolute paths, a public URL, host and port. */
export interface CoreConfig {
  server: CoreSections['server'] & { host: string; port: number; public_url: string; data_dir: string };
  log: CoreSections['log'];
  /** `engine` and where: `path` for SQLite, `url` for PostgreSQL. */
  database: CoreSections['database'] & { engine: 'sqlite' | 'postgres'; path: string };
}
