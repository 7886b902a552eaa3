/** The sessions plugin's config: `[plugins.sessions]`, and the WhatsApp network's `[plugins.sessions.whatsapp]`. */
import { z } from 'zod';

/**
 * The WhatsApp Web version Wharf announces when it connects, bundled so that starting needs no
 * network call (Baileys 7.0.0-rc14's own default). WhatsApp refuses versions it considers too old
 * (the session then fails with status 405 or "outdated" in its reason): set `version` to a newer one.
 */
export const DEFAULT_WHATSAPP_VERSION = '2.3000.1043857760';

/** `[plugins.sessions.whatsapp]`: the live WhatsApp network (sessions of type `whatsapp`, through Baileys). */
export const whatsappConfig = z
  .strictObject({
    version: z
      .string()
      .regex(/^\d{1,4}\.\d{1,6}\.\d{1,12}$/, 'must be three numbers separated by dots, for example 2.3000.1043857760')
      .default(DEFAULT_WHATSAPP_VERSION)
      .describe(
        'The WhatsApp Web version announced when connecting (bundled default: no network call at start). Set a newer one when WhatsApp refuses this one as outdated.',
      ),
    websocket_url: z
      .string()
      .regex(/^wss?:\/\/[^\s/]+/, 'must be a ws:// or wss:// URL')
      .default('wss://web.whatsapp.com/ws/chat')
      .describe("WhatsApp's WebSocket endpoint. Change it only to reach a test server."),
    qr_max_codes: z
      .int()
      .min(1)
      .max(100)
      .default(10)
      .describe(
        'Pairing stops after this many QR codes (or, pairing by phone code, this many code lifetimes) go unscanned: the first lives 60 s, later ones 20 s. The session becomes disconnected; connect again to pair.',
      ),
    connect_timeout_ms: z
      .int()
      .min(1000)
      .max(300_000)
      .default(20_000)
      .describe('How long POST .../connect waits for the first QR code, pairing code or open connection before answering the status it has (connecting).'),
    reconnect_initial_delay_ms: z
      .int()
      .min(10)
      .max(3_600_000)
      .default(2000)
      .describe(
        'First wait before reconnecting after a transient close; it doubles with each failed attempt, up to reconnect_max_delay_ms. Each wait is drawn between half and all of it (jitter).',
      ),
    reconnect_max_delay_ms: z.int().min(10).max(86_400_000).default(300_000).describe('Longest wait between reconnect attempts.'),
    reconnect_max_attempts: z
      .int()
      .min(0)
      .default(0)
      .describe(
        'A paired session: failed attempts in a row (after a drop, each reconnect is one) before it gives up with status failed (0: never give up, as WhatsApp Web does).',
      ),
    unpaired_max_attempts: z
      .int()
      .min(1)
      .max(100)
      .default(3)
      .describe(
        'A session not paired yet: failed attempts in a row (the first connect is attempt 1) before it gives up with status failed. Without a pairing it can do nothing until someone scans a QR code, so it does not retry for ever; connect again to retry.',
      ),
    watchdog_silence_seconds: z
      .int()
      .min(0)
      .max(86_400)
      .default(120)
      .describe(
        'A connection that is open but has received nothing (not even the answers to its 30-second keep-alive pings) for this long is closed and reconnected (0: no watchdog).',
      ),
    send_timeout_ms: z
      .int()
      .min(1000)
      .max(600_000)
      .default(30_000)
      .describe(
        'How long a send waits for the message to be handed to WhatsApp before answering in_progress anyway; the message stays accepted and its outcome arrives later (message info, messages.update).',
      ),
    message_store_limit: z
      .int()
      .min(100)
      .max(1_000_000)
      .default(5000)
      .describe(
        "Messages kept per session for WhatsApp's retry requests, replies, polls and media re-requests; the oldest go first, hourly and beyond this count.",
      ),
    message_store_days: z.int().min(1).max(365).default(14).describe('Messages older than this many days leave the per-session message store, hourly.'),
    cache_size: z
      .int()
      .min(10)
      .max(100_000)
      .default(1000)
      .describe('Entries each per-session cache holds (group metadata, device lists, retry counters); the least recently used go first.'),
    log_level: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('warn')
      .describe("Level of the WhatsApp library's own log lines (they carry the session id)."),
  })
  .prefault({});

export type WhatsAppConfig = z.output<typeof whatsappConfig>;

export const sessionsConfig = z.strictObject({
  allow_private_networks: z
    .boolean()
    .default(false)
    .describe(
      'Accept proxy URLs, and media URLs a whatsapp session fetches to send (imageUrl, documentUrl, ...), whose host is an IP address or a name that resolves to a loopback, private, link-local or otherwise non-public address (self-hosted LANs, tests). Off: such proxies are refused with 422, as WasenderAPI does, and such media URLs are not fetched (422).',
    ),
  account_protection_interval_seconds: z
    .int()
    .min(1)
    .max(3600)
    .default(5)
    .describe('A session with account_protection on may send one message per this many seconds; faster sends get 429 with Retry-After.'),
  event_retention_days: z
    .int()
    .min(1)
    .default(30)
    .describe(
      'Recorded session events (sessions_events) older than this many days are deleted, hourly. Subscribers copy what they need when the event is recorded.',
    ),
  message_log_retention_days: z
    .int()
    .min(1)
    .default(90)
    .describe('Message log rows (message-logs, message info) older than this many days are deleted, hourly.'),
  session_log_retention_days: z
    .int()
    .min(1)
    .default(30)
    .describe('Session log rows (connection history: one per status change or reconnect attempt) older than this many days are deleted, hourly.'),
  audit_log_retention_days: z
    .int()
    .min(1)
    .default(365)
    .describe('Audit log rows (who did what to a session; kept when the session is deleted) older than this many days are deleted, hourly.'),
  dns_timeout_ms: z
    .int()
    .min(100)
    .default(3000)
    .describe('How long resolving a proxy host name may take when a proxy URL is saved, in milliseconds; a name that does not resolve in time is refused.'),
  pat_last_used_resolution_seconds: z
    .int()
    .min(0)
    .default(60)
    .describe("A personal access token's last-use time is written at most once per this many seconds (0: on every request)."),
  upload_max_bytes: z
    .int()
    .min(1024)
    .max(2 ** 31 - 1)
    .default(52_428_800)
    .describe(
      "Largest file POST /api/upload accepts as a raw or multipart body, in bytes (default 50 MiB, WasenderAPI's limit for documents); larger uploads get 413. A JSON {base64} upload is also bound by server.body_limit_bytes.",
    ),
  upload_ttl_hours: z
    .int()
    .min(1)
    .max(24 * 365)
    .default(24)
    .describe("How long an uploaded file's public URL (GET /api/media/{id}) answers, in hours (WasenderAPI: 24)."),
  decrypted_media_ttl_minutes: z
    .int()
    .min(1)
    .max(7 * 24 * 60)
    .default(60)
    .describe('How long the public URL POST /api/decrypt-media returns (GET /api/decrypted-media/{id}) answers, in minutes (WasenderAPI: one hour).'),
  lease_seconds: z
    .int()
    .min(2)
    .max(3600)
    .default(30)
    .describe(
      "Several instances on one database: how long a session's lease lasts, in seconds. The instance holding it is the only one with a network connection (WhatsApp socket) for the session and renews it every third of this; when that instance dies, another one resumes the session once the lease runs out. An instance that loses a lease closes its socket at once.",
    ),
  internal_url: z
    .url({ protocol: /^https?$/ })
    .optional()
    .describe(
      'Several instances on one database: the URL at which the other instances reach this one (scheme, host, port; not through the load balancer), written with the leases it holds. A request that needs the network connection of a session this instance drives and reaches another instance is handed here (POST /internal/sessions/call, signed with a key derived from keys/). Default: http://<listen> when server.listen names an address; when it listens on every address (0.0.0.0, ::), the first non-loopback IPv4 address of this machine with the listen port. Without a usable one, such requests answer 503 on the other instances.',
    ),
  whatsapp: whatsappConfig,
  event_stream_heartbeat_seconds: z
    .int()
    .min(1)
    .max(300)
    .default(15)
    .describe(
      'GET /api/session-events sends a comment line this often when no event comes, in seconds, so proxies keep the stream open and a gone client is noticed.',
    ),
  event_stream_max_seconds: z
    .int()
    .min(1)
    .max(86_400)
    .default(300)
    .describe(
      'GET /api/session-events ends a stream after this many seconds (clients reconnect at once), so a revoked token or an ended sign-in stops receiving within this time.',
    ),
});

export type SessionsConfig = z.output<typeof sessionsConfig>;
