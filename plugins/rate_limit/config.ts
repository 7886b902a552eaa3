/**
 * The rate_limit plugin's config: `[plugins.rate_limit]`, the Redis of the shared store
 * (`[plugins.rate_limit.redis]`) and one table per rule, `[plugins.rate_limit.rules.<name>]`. The built-in rules have defaults and can be changed;
 * rules of other names can be added. A request counts against the one rule whose prefix is
 * the longest match for its path.
 */
import { z } from 'zod';
import { isUnder, normalizePrefix } from '../../core/paths.ts';
import type { CoreConfig } from '../../core/core-config.ts';
import type { ConfigProblem } from '../../core/plugin.ts';

/**
 * Credential kinds a rule can give their own limit, as principal kinds in snake_case
 * (`sessionKey` -> `session_key`). A kind not listed here (a future one) gets the rule's `limit`.
 */
export const KIND_NAMES = ['session', 'oauth', 'pat', 'session_key', 'app_token'] as const;
export type KindName = (typeof KIND_NAMES)[number];

/**
 * Paths that are never limited: health, readiness and metrics (probes and scrapers must always get through), and the
 * calls between instances (signed; the request each serves was counted on the instance it reached).
 */
export const EXEMPT_PATHS: readonly string[] = ['/healthz', '/readyz', '/metrics', '/internal/sessions/call'];

function isExemptPrefix(prefix: string): boolean {
  return EXEMPT_PATHS.some((exempt) => isUnder(prefix, exempt));
}

const count = z.int().min(1).max(1_000_000_000);

const prefix = z
  .string()
  .regex(/^\/[^\s?#*]*$/, { message: 'must be a path prefix starting with "/" (no wildcard, query or spaces), like "/api/files"', abort: true })
  .refine((p) => !isExemptPrefix(p), 'health, readiness and metrics routes (/healthz, /readyz, /metrics) are never limited');

const docs = {
  prefixes:
    'Path prefixes the rule covers, matched on whole segments and ignoring case; they share one counter per caller (so an alias cannot double the allowance). A request counts against the rule with the longest matching prefix. Rules of your own go in [plugins.rate_limit.rules.<name>] with prefixes and limit.',
  limit: 'Requests allowed per window to each credential (one counter per PAT, session key, app token or user) of a kind without its own entry in `kinds`.',
  anonymous: 'Requests allowed per window to each client address for calls without a valid credential (none, invalid, expired or revoked).',
  kinds:
    'Per-kind limits replacing `limit`, for example { pat = 120, session_key = 60 }. Kinds: session (dashboard cookie), oauth (command-line token), pat (personal access token), session_key (session API key), app_token (file-storage API token).',
  window: "Window length of this rule, in seconds. Default: the plugin's window_seconds.",
};
/** The other built-in rules point at the first one's descriptions rather than repeat them. */
const shortDocs: typeof docs = {
  prefixes: 'Path prefixes this rule covers (as in rules.default).',
  limit: 'Requests per window to each credential (as in rules.default).',
  anonymous: 'Requests per window to each client address without a valid credential (as in rules.default).',
  kinds: 'Per-kind limits replacing `limit` (as in rules.default).',
  window: 'Window length of this rule, in seconds (as in rules.default).',
};

const windowSeconds = z.int().min(1).max(86_400).optional();
const kinds = z.partialRecord(z.enum(KIND_NAMES), count).optional();

/** A built-in rule: every field has a default, so it exists whatever the file says. */
function builtinRule(defaults: { prefixes: string[]; limit: number; anonymous: number }, doc = shortDocs) {
  return z
    .strictObject({
      prefixes: z.array(prefix).min(1).default(defaults.prefixes).describe(doc.prefixes),
      limit: count.default(defaults.limit).describe(doc.limit),
      anonymous: count.default(defaults.anonymous).describe(doc.anonymous),
      kinds: kinds.describe(doc.kinds),
      window_seconds: windowSeconds.describe(doc.window),
    })
    .prefault({});
}

/** A rule of the operator's own name: `prefixes` and `limit` are required (checked below, for a clearer message). */
const customRule = z.strictObject({
  prefixes: z.array(prefix).min(1).optional().describe(docs.prefixes),
  limit: count.optional().describe(docs.limit),
  anonymous: count.optional().describe(`${docs.anonymous} Default: limit.`),
  kinds: kinds.describe(docs.kinds),
  window_seconds: windowSeconds.describe(docs.window),
});

const BUILTIN_RULES = ['default', 'send_message', 'sessions', 'files', 'login'] as const;

const rules = z
  .object({
    default: builtinRule({ prefixes: ['/'], limit: 600, anonymous: 300 }, docs),
    send_message: builtinRule({ prefixes: ['/api/send-message'], limit: 60, anonymous: 30 }),
    sessions: builtinRule({ prefixes: ['/api/whatsapp-sessions', '/api/messaging-sessions'], limit: 120, anonymous: 60 }),
    files: builtinRule({ prefixes: ['/api/files'], limit: 600, anonymous: 600 }),
    login: builtinRule({ prefixes: ['/auth/login'], limit: 60, anonymous: 60 }),
  })
  .catchall(customRule)
  .superRefine((value, ctx) => {
    const owner = new Map<string, string>();
    for (const [name, rule] of Object.entries(value) as [string, z.output<typeof customRule>][]) {
      if (!(BUILTIN_RULES as readonly string[]).includes(name) && (rule.prefixes === undefined || rule.limit === undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `rule "${name}" needs "prefixes" and "limit" (built-in rules, which have defaults: ${BUILTIN_RULES.join(', ')})`,
        });
        continue;
      }
      for (const [index, p] of (rule.prefixes ?? []).entries()) {
        const normalized = normalizePrefix(p);
        const other = owner.get(normalized);
        if (other !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [name, 'prefixes', index],
            message: other === name ? `prefix "${p}" is listed twice` : `prefix "${p}" is already covered by rule "${other}"`,
          });
        } else owner.set(normalized, name);
      }
    }
  })
  .prefault({})
  .describe('Rules, one table each: [plugins.rate_limit.rules.<name>].');

/** A Redis URL: redis:// or rediss:// (TLS), with optional user, password and database number. */
const redisUrl = z.string().refine((value) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  // The message never repeats the value: it may hold the password.
  return (url.protocol === 'redis:' || url.protocol === 'rediss:') && url.hostname !== '' && /^\/?(\d{1,2})?$/.test(url.pathname) && !url.hash;
}, 'expected redis://[[user]:password@]host[:port][/db], or rediss://... for TLS');

const redisConfig = z
  .strictObject({
    url: redisUrl
      .optional()
      .describe(
        'The Redis that holds the counters when store = "redis": redis://[[user]:password@]host[:port][/db], or rediss://... for TLS. Every instance of one Wharf names the same Redis and key_prefix. It holds the password: prefer the variable WHARF_PLUGINS__RATE_LIMIT__REDIS__URL to writing it in a file. Never logged.',
      ),
    key_prefix: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[^\s]+$/, 'must not contain spaces')
      .default('wharf:rl:')
      .describe(
        'Start of every key Wharf writes, so several Wharfs (or other programs) can share one Redis: the instances of one Wharf use the same prefix, separate Wharfs different ones.',
      ),
    timeout_ms: z
      .int()
      .min(10)
      .max(10_000)
      .default(250)
      .describe("How long a request waits for Redis before it is counted in this instance's memory instead, in milliseconds."),
    connect_timeout_ms: z
      .int()
      .min(100)
      .max(60_000)
      .default(5000)
      .describe('At start, how long to wait for Redis to answer before refusing to start, in milliseconds.'),
    tls_ca_file: z
      .string()
      .min(1)
      .optional()
      .describe(
        "PEM file of the certificate authority of the Redis server's certificate, for a rediss:// URL whose server has a private one. Default: the system's authorities.",
      ),
  })
  .prefault({})
  .describe('The Redis of store = "redis".');

export const rateLimitConfig = z.strictObject({
  store: z
    .enum(['memory', 'redis'])
    .default('memory')
    .describe(
      'Where counters live. "memory": in this process; they start empty after a restart and are not shared between instances. "redis": in the Redis of [plugins.rate_limit.redis], shared by every instance that names it.',
    ),
  single_instance: z
    .boolean()
    .default(false)
    .describe(
      'With store = "memory" and a PostgreSQL database ([database] url), say that one instance runs, so that counting in its memory is right; otherwise the server refuses to start, since instances sharing a database would each count on their own. Ignored on SQLite.',
    ),
  window_seconds: z
    .int()
    .min(1)
    .max(86_400)
    .default(60)
    .describe("Default window length of every rule, in seconds (fixed windows, starting at a caller's first request)."),
  ipv6_subnet: z
    .int()
    .min(32)
    .max(128)
    .default(64)
    .describe(
      'Calls without a valid credential are counted per client address; IPv6 addresses count per subnet of this many leading bits, since one host often has a whole /64.',
    ),
  redis: redisConfig,
  rules,
});

export type RateLimitConfig = z.output<typeof rateLimitConfig>;

/** Rules across keys (the plugin's `validate`): each a line for the operator. */
export function storeProblems(config: RateLimitConfig, core?: Readonly<CoreConfig>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  // A shared database is what several instances have: counters in one's memory would not be shared.
  if (config.store === 'memory' && core?.database.engine === 'postgres' && !config.single_instance) {
    problems.push({
      key: 'store',
      message:
        'is "memory", which counts in this instance only, but the database is shared (PostgreSQL): set store = "redis" to share the counters, or single_instance = true if one instance runs',
    });
  }
  const { store, redis } = config;
  // Either way round, a silent mismatch would leave each instance counting on its own.
  if (store === 'redis' && !redis.url) problems.push({ key: 'redis.url', message: 'required when store = "redis"' });
  if (store === 'memory' && redis.url)
    problems.push({ key: 'store', message: 'is "memory" but redis.url is set: set store = "redis" to use that Redis, or remove redis.url' });
  if (redis.tls_ca_file && redis.url && !redis.url.startsWith('rediss:')) problems.push({ key: 'redis.tls_ca_file', message: 'needs a rediss:// url (TLS)' });
  return problems;
}
