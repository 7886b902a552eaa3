/**
 * Webhook tests: an app with identity, sessions and webhooks (private networks allowed, so the
 * receivers can live on loopback), and real HTTP receivers whose behaviour each test sets.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { DbHandle } from '../../../core/db.ts';
import { openPostgres } from '../../../core/db-postgres.ts';
import { openSqlite } from '../../../core/db-sqlite.ts';
import identity from '../../../plugins/identity/index.ts';
import sessions from '../../../plugins/sessions/index.ts';
import webhooks from '../../../plugins/webhooks/index.ts';
import { startApp, type StartOptions, type TestApp } from '../../helpers/app.ts';
import { BASE_TOML, call, sandboxSession, type SessionInfo, WHATSAPP_TEST_TOML } from '../sessions/helpers.ts';
import type { TestNetwork } from '../sessions/test-networks.ts';

export { call, sandboxSession, tenant, type SessionInfo, type Tenant } from '../sessions/helpers.ts';

/** Fast retries, no jitter, loopback receivers allowed, short timeout. */
export const FAST_TOML = `[plugins.webhooks]
allow_private_networks = true
timeout_ms = 1000
retry_schedule_seconds = [0.05, 0.1, 0.15, 0.2]
retry_jitter = 0
shutdown_wait_ms = 0
`;

/**
 * FAST_TOML without its short attempt timeout: on a loaded machine a receiver in the test's own
 * process may take over a second to answer, and the retry after a timed-out attempt delivers
 * again (at least once). With this, a second arrival of one delivery is the dispatcher's fault.
 */
export const PATIENT_TOML = FAST_TOML.replace('timeout_ms = 1000', 'timeout_ms = 60000');

export function startWebhooksApp(webhooksToml = FAST_TOML, options: StartOptions = {}): Promise<TestApp> {
  // Quick reconnects for whatsapp sessions (the tests that run on them too).
  return startApp(`${BASE_TOML}${webhooksToml}${WHATSAPP_TEST_TOML}`, { plugins: [identity, sessions, webhooks], ...options });
}

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body bytes. */
  body: Buffer;
  json: any;
  at: number;
}

export type Behaviour = (req: http.IncomingMessage, res: http.ServerResponse, received: Received) => void;

export const answer =
  (status = 200, body = 'ok', headers: Record<string, string> = {}): Behaviour =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain', ...headers });
    res.end(body);
  };

/** A real HTTP server on loopback that records every request and answers as `behaviour` says. */
export class Receiver {
  readonly server: http.Server;
  readonly requests: Received[] = [];
  behaviour: Behaviour;
  #waiters: { count: number; resolve: () => void }[] = [];

  private constructor(behaviour: Behaviour) {
    this.behaviour = behaviour;
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(body.toString('utf8'));
        } catch {
          json = undefined;
        }
        const received: Received = { method: req.method!, path: req.url!, headers: req.headers, body, json, at: Date.now() };
        this.requests.push(received);
        this.#waiters = this.#waiters.filter((w) => {
          if (this.requests.length < w.count) return true;
          w.resolve();
          return false;
        });
        this.behaviour(req, res, received);
      });
    });
  }

  static async start(behaviour: Behaviour = answer()): Promise<Receiver> {
    const receiver = new Receiver(behaviour);
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Resolves once `count` requests arrived in all; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 10_000): Promise<Received[]> {
    if (this.requests.length >= count) return Promise.resolve(this.requests.slice());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver got ${this.requests.length} of ${count} requests in ${timeoutMs} ms`)), timeoutMs);
      this.#waiters.push({
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve(this.requests.slice());
        },
      });
    });
  }

  /** Requests whose payload is this event. */
  ofEvent(event: string): Received[] {
    return this.requests.filter((r) => r.json?.event === event);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** A session (sandbox, or of `net`) whose webhook goes to `url`, subscribed to `events` (default: all). */
export function hookedSession(
  app: TestApp,
  pat: string,
  url: string,
  events: string[] | null = [],
  extra: Record<string, unknown> = {},
  net?: TestNetwork,
): Promise<SessionInfo> {
  const body = { name: 'Hooked', webhook_url: url, webhook_enabled: true, webhook_events: events, ...extra };
  return net ? net.session(app, pat, body) : sandboxSession(app, pat, body);
}

let sender = 0;
/** Makes a session (sandbox, or of `net`) receive a text; answers the message key. */
export async function receive(
  app: TestApp,
  session: SessionInfo,
  text = 'hello',
  extra: Record<string, unknown> = {},
  net?: TestNetwork,
): Promise<{ id: string; remoteJid: string; remoteJidAlt?: string; fromMe: boolean }> {
  const from = `+1415555${String(1000 + (++sender % 9000)).padStart(4, '0')}`;
  if (net) return (await net.receive(app, session, { from, text, ...extra })) as { id: string; remoteJid: string; fromMe: boolean };
  const res = await call(app, session.apiKey, 'POST', '/api/sandbox/receive', { from, text, ...extra });
  if (res.status !== 200) {
    // A 500 names a request id: the app's log lines of that request say what went wrong.
    const id = /request id ([0-9a-f-]+)/.exec(res.text)?.[1];
    const lines = id ? app.logs.filter((l) => JSON.stringify(l).includes(id)).map((l) => JSON.stringify(l)) : [];
    throw new Error([`sandbox receive failed: ${res.status} ${res.text}`, ...lines].join('\n'));
  }
  return res.body.data.key;
}

/** Polls `probe` until it returns a truthy value; rejects after `timeoutMs`. */
export async function eventually<T>(probe: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The dispatch records of a session, oldest first, through the API. */
export async function dispatchesOf(app: TestApp, pat: string, sessionId: number, query = ''): Promise<any[]> {
  const res = await call(app, pat, 'GET', `/api/dispatches?session_id=${sessionId}&per_page=100${query}`);
  if (res.status !== 200) throw new Error(`GET /api/dispatches: ${res.status} ${res.text}`);
  return (res.body.data.data as any[]).reverse();
}

/** A statement the app executed: its SQL and the plugin code that ran it. */
export interface Executed {
  sql: string;
  caller: string;
}

/**
 * Records every statement the app executes on SQLite (wrapping better-sqlite3's Statement
 * methods, so statements prepared at start-up count too) into `executed`, until `restore`.
 */
export function countStatements(app: TestApp): { executed: Executed[]; restore(): void } {
  const executed: Executed[] = [];
  const proto = Object.getPrototypeOf(app.running.db.prepare('SELECT 1')) as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  for (const name of ['get', 'all', 'run', 'iterate']) {
    const original = proto[name]!;
    originals.set(name, original);
    proto[name] = function counted(this: { source: string }, ...args: unknown[]) {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 40;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      executed.push({ sql: this.source, caller: callerOf(stack) });
      return original.apply(this, args);
    };
  }
  return {
    executed,
    restore() {
      for (const [name, original] of originals) proto[name] = original;
    },
  };
}

/**
 * Who asked for a statement: `webhooks/<file:line>` when webhooks code is on the stack (it called
 * into the sessions service), else the first frame under plugins/ outside a store.
 */
function callerOf(stack: string): string {
  const frames = stack.split('\n').filter((l) => l.includes('/plugins/') && !l.includes('/test/'));
  const frame = frames.find((l) => l.includes('/plugins/webhooks/')) ?? frames.find((l) => !/store\.ts/.test(l)) ?? frames[0] ?? '';
  return /\/plugins\/([\w/.-]+:\d+)/.exec(frame)?.[1] ?? 'core';
}

/** A connection of its own to the app's database (another instance's, say): it sees only what is committed. */
export async function committedView(app: TestApp): Promise<DbHandle> {
  const { database } = app.running.config.core;
  return database.engine === 'postgres' ? await openPostgres(database.url!, { poolSize: 2, connectTimeoutMs: 5000 }) : openSqlite(database.path);
}

/** Every statement sent by pg clients (PostgreSQL only), with the client that sent it, until `restore`. */
export function pgStatements(): { texts: string[]; clients: unknown[]; restore(): void } {
  const texts: string[] = [];
  const clients: unknown[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function counted(this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string };
    texts.push(typeof first === 'string' ? first : (first?.text ?? ''));
    clients.push(this);
    return original.apply(this, args);
  };
  return { texts, clients, restore: () => (proto.query = original) };
}

/** The dispatcher's reads of the outbox queue (a session's due deliveries, its next due time) among `executed`. */
export const queueReads = (executed: readonly Executed[]) =>
  executed.filter((e) => /FROM webhooks_dispatches\s+WHERE session_id = \? AND status = 'pending'/.test(e.sql));
