/**
 * Calls between instances sharing one database: a request that needs a session's network
 * connection (a WhatsApp socket) and reaches an instance that does not hold the session's lease
 * (leases.ts) is served by the instance that does. The call crosses at the network-adapter level,
 * not HTTP: authentication, validation, rate limits and the message log happen once, on the
 * instance the request reached; the owner only runs the adapter method with the same arguments.
 *
 * Wire: `POST <owner's internal URL>/internal/sessions/call` with `{owner, method, session, args}`
 * (Buffers as `{"$wharf:buffer": base64}`), signed with HMAC-SHA256 under a key derived from the
 * instances' shared secret (`keys/`), over the HTTP method, path, a timestamp, a nonce and the body.
 * The owner refuses a bad or missing signature, a timestamp outside {@link WINDOW_MS} and a nonce
 * seen before (401), an unknown method (400: a closed list, {@link OWNER_METHODS}); it answers
 * 200 `{result}` or the adapter's error as the status of its code with `{error, code, fields?,
 * retry_after?}`, signed too (over the request's signature, the status and the body), and the
 * caller rethrows the same WharfError. An owner that does not hold the lease (any more) answers
 * 503 and never forwards again: a forwarded call runs where it lands or fails, so two instances
 * that each believe the other drives a session cannot bounce a call between them.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import { Counter, type Registry } from 'prom-client';
import getRawBody from 'raw-body';
import { isErrorCode, toWharfError, WharfError } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import type { LeaseHolder } from './leases.ts';
import type { NetworkAdapter, NetworkSession } from './networks/types.ts';

export const FORWARD_PATH = '/internal/sessions/call';

/** How far a call's timestamp may be from the owner's clock, either way (instances' clocks must agree within this). */
export const WINDOW_MS = 30_000;

/**
 * The adapter methods that need the session's connection or the owner's memory of it, and so run
 * on the owner. The others (contacts, contact, findMessage, uploadMedia, uploadedMedia) read the
 * shared database and run wherever the request lands.
 */
export const OWNER_METHODS = [
  'connect',
  'disconnect',
  'restart',
  'qrCode',
  'user',
  'forget',
  'send',
  'editMessage',
  'deleteMessage',
  'readMessages',
  'react',
  'sendPresence',
  'upsertContact',
  'setBlocked',
  'profilePicture',
  'onWhatsApp',
  'lidFromPn',
  'pnFromLid',
  'groups',
  'createGroup',
  'groupMetadata',
  'updateParticipants',
  'updateGroupSettings',
  'leaveGroup',
  'groupInviteCode',
  'groupInviteInfo',
  'acceptGroupInvite',
  'groupPicture',
  'decryptMedia',
] as const satisfies readonly (keyof NetworkAdapter)[];

export type OwnerMethod = (typeof OWNER_METHODS)[number];

/**
 * The methods whose second run is a second effect the user sees (a message sent twice, two
 * groups): when a call of one was sent and no answer came, it may have run on the owner, and the
 * caller is told so instead of being told to retry. The others read, or set a state again.
 */
const NOT_REPEATABLE: ReadonlySet<OwnerMethod> = new Set(['send', 'editMessage', 'createGroup']);

/** Connection errors that mean the call never reached the owner (nothing can have run there). */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
const OWNER_METHOD_NAMES: ReadonlySet<string> = new Set(OWNER_METHODS);

/** A call one instance hands the owner of a session. */
export interface ForwardedCall {
  /** The lease owner the caller found: an instance that is not it refuses the call. */
  owner: string;
  method: OwnerMethod;
  session: NetworkSession;
  args: unknown[];
}

/** The session as the adapter sees it, nothing more (the record the routes hold carries webhook settings too). */
export function networkSession(session: NetworkSession): NetworkSession {
  const { id, orgId, name, phoneNumber, status, statusReason, readIncomingMessages, autoRejectCalls, alwaysOnline } = session;
  return { id, orgId, name, phoneNumber, status, statusReason, readIncomingMessages, autoRejectCalls, alwaysOnline };
}

const BUFFER_TAG = '$wharf:buffer';

/** JSON, with bytes (Buffer, Uint8Array) as `{"$wharf:buffer": base64}`. */
export function encode(value: unknown): string {
  return JSON.stringify(value, function replace(this: Record<string, unknown>, key, converted) {
    const raw = this[key];
    return raw instanceof Uint8Array ? { [BUFFER_TAG]: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') } : converted;
  });
}

/** Reverses {@link encode}. */
export function decode(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const tagged = (value as Record<string, unknown>)[BUFFER_TAG];
    return typeof tagged === 'string' && Object.keys(value).length === 1 ? Buffer.from(tagged, 'base64') : value;
  });
}

function mac(key: Buffer, head: string, body: Buffer | string): Buffer {
  return createHmac('sha256', key).update(head).update(body).digest();
}

const requestHead = (timestamp: string, nonce: string) => `POST\n${FORWARD_PATH}\n${timestamp}\n${nonce}\n`;
const responseHead = (requestSignature: string, status: number) => `response\n${requestSignature}\n${status}\n`;

/** Whether a hex signature is the expected MAC (constant time; a malformed one is simply wrong). */
function matches(expected: Buffer, given: string): boolean {
  const got = /^[0-9a-f]{64}$/.test(given) ? Buffer.from(given, 'hex') : undefined;
  return got !== undefined && timingSafeEqual(expected, got);
}

export interface OwnerClientOptions {
  /** The instances' shared key for these calls (`keys.derive(FORWARD_KEY)`). */
  key: Buffer;
  /** How long a call may take before the caller gives up (longer than any adapter method waits). */
  timeoutMs: number;
  /** Retry-After of the 503 answered when the owner cannot be reached: its lease runs out by then. */
  retryAfterSeconds: number;
  log: Logger;
  /** Where `wharf_session_calls_forwarded_total` is registered. */
  metrics: Registry;
}

/** The purpose the forwarding key is derived for. */
export const FORWARD_KEY = 'sessions:forward';

/** Calls the owner of a session. */
export class OwnerClient {
  readonly #options: OwnerClientOptions;
  /** Calls made, by method and outcome: `ok`, `error` (the owner answered one), `unreachable` (no signed answer). */
  readonly #calls: Counter<'method' | 'outcome'>;

  constructor(options: OwnerClientOptions) {
    this.#options = options;
    this.#calls = new Counter({
      name: 'wharf_session_calls_forwarded_total',
      help: 'Requests for a WhatsApp session driven by another instance, run there: by adapter method and outcome (ok, error: the owner answered an error, unreachable: no signed answer).',
      labelNames: ['method', 'outcome'],
      registers: [options.metrics],
    });
  }

  #unreachable(call: ForwardedCall, why: string, mayHaveRun = false): WharfError {
    if (mayHaveRun) {
      return new WharfError(
        'unavailable',
        `Session ${call.session.id} is driven by another Wharf instance, which did not answer this request (${why}). It may have been carried out there: check (the session's messages and webhooks) before you send it again.`,
      );
    }
    return new WharfError(
      'unavailable',
      `Session ${call.session.id} is driven by another Wharf instance, which could not serve this request (${why}). Retry: once that instance's lease runs out, another instance takes the session over.`,
      { retryAfter: this.#options.retryAfterSeconds },
    );
  }

  /** Runs `call` on the owner: its result, or the WharfError it answered. */
  async call(holder: LeaseHolder & { url: string }, call: ForwardedCall): Promise<unknown> {
    const { key, timeoutMs, log } = this.#options;
    const body = encode({ ...call, session: networkSession(call.session) });
    const timestamp = String(Date.now());
    const nonce = randomBytes(16).toString('base64url');
    const signature = mac(key, requestHead(timestamp, nonce), body).toString('hex');
    const where = { sessionId: call.session.id, method: call.method, owner: holder.owner, url: holder.url };
    let res: Response;
    let text: string;
    try {
      res = await fetch(new URL(FORWARD_PATH, holder.url), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-wharf-timestamp': timestamp, 'x-wharf-nonce': nonce, 'x-wharf-signature': signature },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      const why = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `unreachable: ${cause ?? (err as Error).message}`;
      // Sent (a time-out, a connection lost after the request went): it may have run there.
      const mayHaveRun = NOT_REPEATABLE.has(call.method) && !(cause !== undefined && NEVER_SENT.has(cause));
      log.warn({ ...where, err, mayHaveRun }, 'a call to the instance driving a session failed');
      this.#calls.inc({ method: call.method, outcome: 'unreachable' });
      throw this.#unreachable(call, why, mayHaveRun);
    }
    // An answer not signed by an instance with our key is no answer (a proxy's page, another service on that address).
    if (!matches(mac(key, responseHead(signature, res.status), text), res.headers.get('x-wharf-signature') ?? '')) {
      log.error(
        { ...where, status: res.status, body: text.slice(0, 200) },
        'the instance driving a session refused or did not sign a call: do all instances share keys/ and agree on the time?',
      );
      this.#calls.inc({ method: call.method, outcome: 'unreachable' });
      throw this.#unreachable(call, `it answered ${res.status} without a valid signature`);
    }
    this.#calls.inc({ method: call.method, outcome: res.status === 200 ? 'ok' : 'error' });
    const answer = decode(text) as { result?: unknown; error?: string; code?: string; fields?: Record<string, string[]>; retry_after?: number };
    if (res.status === 200) return answer.result;
    const code = answer.code && isErrorCode(answer.code) ? answer.code : 'internal';
    throw new WharfError(code, answer.error ?? 'The instance driving the session failed', {
      ...(answer.fields ? { fields: answer.fields } : {}),
      ...(answer.retry_after !== undefined ? { retryAfter: answer.retry_after } : {}),
    });
  }
}

export interface ForwardEndpointOptions {
  key: Buffer;
  /** Largest call body accepted, in bytes. */
  maxBytes: number;
  /** Runs a verified call; throws WharfError. */
  serve(call: ForwardedCall): Promise<unknown>;
  log: Logger;
}

const unauthorized = (why: string) => new WharfError('unauthorized', `Not a call from a Wharf instance sharing this one's keys: ${why}`);

/** The owner's side: `POST /internal/sessions/call` (middleware; every other request passes through). */
export function forwardEndpoint(options: ForwardEndpointOptions): Middleware {
  const { key, maxBytes, log } = options;
  /** Nonces seen within the window: nonce -> when it may be forgotten (insertion order is time order). */
  const seen = new Map<string, number>();
  // Every other path passes straight on, without a promise and an async frame of its own.
  return function sessionCalls(ctx, next) {
    return ctx.path === FORWARD_PATH ? serveCall(ctx) : next();
  };

  async function serveCall(ctx: Context) {
    if (ctx.method !== 'POST') throw new WharfError('method_not_allowed', 'Method not allowed', { headers: { allow: 'POST' } });
    const timestamp = ctx.get('x-wharf-timestamp');
    const nonce = ctx.get('x-wharf-nonce');
    const signature = ctx.get('x-wharf-signature');
    if (!/^\d{1,16}$/.test(timestamp) || !/^[A-Za-z0-9_-]{16,64}$/.test(nonce) || !signature) {
      throw unauthorized('x-wharf-timestamp, x-wharf-nonce and x-wharf-signature are required');
    }
    let raw: Buffer;
    try {
      raw = await getRawBody(ctx.req, { limit: maxBytes, length: ctx.request.length });
    } catch (err) {
      throw toWharfError(err);
    }
    if (!matches(mac(key, requestHead(timestamp, nonce), raw), signature)) throw unauthorized('bad signature');
    const now = Date.now();
    if (Math.abs(now - Number(timestamp)) > WINDOW_MS) throw unauthorized(`timestamp more than ${WINDOW_MS / 1000} s from this instance's clock`);
    for (const [old, until] of seen) {
      if (until > now) break;
      seen.delete(old);
    }
    if (seen.has(nonce)) throw unauthorized('this call was made before (replayed)');
    seen.set(nonce, now + 2 * WINDOW_MS);

    let call: ForwardedCall;
    try {
      call = decode(raw.toString('utf8')) as ForwardedCall;
    } catch {
      throw new WharfError('invalid_json', 'The call is not JSON');
    }
    if (typeof call?.method !== 'string' || !OWNER_METHOD_NAMES.has(call.method)) {
      throw new WharfError('bad_request', `Unknown method ${JSON.stringify(String(call?.method)).slice(0, 80)}`);
    }
    if (typeof call.owner !== 'string' || typeof call.session?.id !== 'number' || !Array.isArray(call.args)) {
      throw new WharfError('bad_request', 'A call names owner, method, session and args');
    }

    let status = 200;
    let body: string;
    try {
      body = encode({ result: await options.serve(call) });
    } catch (thrown) {
      const err = toWharfError(thrown);
      if (err.status >= 500 && err.code !== 'unavailable')
        log.error({ err: thrown, sessionId: call.session.id, method: call.method }, 'a forwarded session call failed');
      status = err.status;
      body = encode({
        error: err.code === 'internal' ? 'Internal server error' : err.message,
        code: err.code,
        ...(err.fields ? { fields: err.fields } : {}),
        ...(err.retryAfter !== undefined ? { retry_after: err.retryAfter } : {}),
      });
    }
    ctx.status = status;
    ctx.type = 'application/json';
    ctx.set('x-wharf-signature', mac(key, responseHead(signature, status), body).toString('hex'));
    ctx.body = body;
  }
}
