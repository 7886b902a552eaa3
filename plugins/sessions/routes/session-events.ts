/**
 * `GET /api/session-events` (account-level credential): the events of the caller's organization's
 * sessions, live, as server-sent events (`text/event-stream`), so a dashboard shows a status
 * change or a new pairing QR code the moment it happens. Each event is sent once its transaction
 * has committed (the sessions service's `afterEvent` listeners), as
 *
 *     id: <event id>
 *     event: <event name>
 *     data: {"event", "sessionId", "timestamp", "data"}   (the webhook payload)
 *
 * Only the caller's organization's events go out, optionally of one session (`session_id`, 404
 * for another organization's) and of some names (`events`, comma-separated). A comment line every
 * `event_stream_heartbeat_seconds` keeps proxies from closing an idle stream; a stream ends after
 * `event_stream_max_seconds` (the client reconnects, and its credential is checked again), when
 * the client goes, when the server stops accepting, or when the client reads too slowly.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { canonicalEvent, EVENT_NAMES, type EventName } from '../events.ts';
import type { RouteDeps } from './common.ts';

export interface SessionEventOptions {
  metrics: Registry;
  heartbeatMs: number;
  maxMs: number;
}

/** What a client that stops reading may leave buffered before its stream is ended. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const streamQuery = z.lazy(() =>
  z.strictObject({
    session_id: z.coerce
      .number()
      .int()
      .min(1)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe("Only this session's events (404 for a session of another organization)."),
    events: z
      .string()
      .max(2048)
      .superRefine((text, ctx) => {
        for (const name of text.split(',')) {
          if (!canonicalEvent(name.trim())) ctx.addIssue({ code: 'custom', message: `unknown event "${name.trim()}" (GET /api/webhook-events lists them)` });
        }
      })
      .transform((text) => new Set(text.split(',').map((name) => canonicalEvent(name.trim())!)))
      .optional()
      .describe(`Only these events, comma-separated (default: all ${EVENT_NAMES.length}); WasenderAPI's spellings are accepted.`),
  }),
);

export function sessionEventRoutes(deps: RouteDeps, options: SessionEventOptions): RouteGroup {
  const { sessions } = deps;
  const group = deps.api.group({ prefixes: ['/api/session-events'], envelope: 'messaging' });
  const streams = new Gauge({ name: 'wharf_session_event_streams', help: 'Open GET /api/session-events streams.', registers: [options.metrics] });

  group.route({
    method: 'GET',
    path: '/api/session-events',
    summary: "The organization's session events, live, as server-sent events (text/event-stream): session.status, qrcode.updated, messages, ...",
    tag: 'Sessions',
    auth: sessions.credentials.account,
    query: streamQuery,
    success: { contentType: 'text/event-stream', description: 'A stream of `id`, `event`, `data` (the webhook payload) records and heartbeat comments' },
    errors: { 404: 'No such session in this organization: `{success: false, error, message}`' },
    async handler(ctx, { auth, query }) {
      const only = query.session_id === undefined ? undefined : (await sessions.sessionOf(auth, String(query.session_id))).id;
      const wanted: ReadonlySet<EventName> | undefined = query.events;
      const stream = new PassThrough();
      const server = (ctx.req.socket as Socket & { server?: Server }).server;
      const started = Date.now();
      let lastWrite = started;
      let closed = false;

      const write = (text: string) => {
        if (closed) return;
        lastWrite = Date.now();
        stream.write(text);
        // A client that stopped reading is let go rather than buffered for without end.
        if (stream.writableLength > MAX_BUFFERED_BYTES) close();
      };
      const stop = sessions.afterEvent((event) => {
        if (event.orgId !== auth.orgId) return;
        if (only !== undefined && event.sessionId !== only) return;
        if (wanted && !wanted.has(event.event)) return;
        write(`id: ${event.id}\nevent: ${event.event}\ndata: ${event.raw}\n\n`);
      });
      // One timer per stream: the heartbeat, the stream's age, and the server's shutdown (a
      // stream never ends by itself, so it would hold the drain until its timeout).
      const tick = setInterval(
        () => {
          const now = Date.now();
          if (now - started >= options.maxMs || server?.listening === false) close();
          else if (now - lastWrite >= options.heartbeatMs) write(': heartbeat\n\n');
        },
        Math.min(1000, options.heartbeatMs),
      );
      function close() {
        if (closed) return;
        closed = true;
        stop();
        clearInterval(tick);
        streams.dec();
        stream.end();
      }
      streams.inc();
      ctx.req.once('close', close);
      stream.once('error', close);

      ctx.status = 200;
      ctx.type = 'text/event-stream';
      ctx.set('Cache-Control', 'no-store');
      // nginx buffers responses unless told not to.
      ctx.set('X-Accel-Buffering', 'no');
      ctx.body = stream;
      write(`: ${only === undefined ? `events of organization ${auth.orgId}` : `events of session ${only}`}\nretry: 3000\n\n`);
    },
  });

  return group;
}
