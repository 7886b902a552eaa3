/** The sessions plugin's config: `[plugins.sessions]`. */
import { z } from 'zod';

export const sessionsConfig = z.strictObject({
  allow_private_networks: z
    .boolean()
    .default(false)
    .describe(
      'Accept proxy URLs whose host is an IP address or a name that resolves to a loopback, private, link-local or otherwise non-public address (self-hosted LANs, tests). Off: such proxies are refused with 422, as WasenderAPI does.',
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
