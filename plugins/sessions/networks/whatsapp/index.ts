/**
 * The live WhatsApp network, through Baileys (`baileys@7.0.0-rc14`), behind the same adapter
 * interface as the sandbox: sessions of type `whatsapp`.
 *
 * - Baileys loads when the first whatsapp session connects or resumes (`load.ts`), never before.
 * - Each session has one {@link Connection}: pairing, statuses, reconnects, the watchdog.
 * - Credentials and Signal keys live encrypted in the database (`auth-state.ts`, `store.ts`).
 * - Events map to the gateway's (`events.ts`); sends are built in `outbound.ts` and stay
 *   accepted (in_progress) until WhatsApp's server acks them.
 * - `supervise()` runs on a timer once the server has started: it resumes the sessions that were
 *   connected (only then does Baileys load) and runs the watchdog; `prune()` bounds the stores.
 * - Several instances on one database: only the instance holding a session's lease (leases.ts)
 *   has its socket; a method that needs the socket, called on another instance, runs on that one
 *   (`../../forwarding.ts`, the methods in OWNER_METHODS; `serveForwarded` is the owner's side).
 *
 * Capabilities: pairing by QR code and by phone code; no simulated receive.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { WAMessageContent } from 'baileys';
import type { Db } from '../../../../core/db.ts';
import { WharfError } from '../../../../core/errors.ts';
import type { Keys } from '../../../../core/keys.ts';
import type { ProxyCheckOptions } from '../../address-guard.ts';
import type { Logger } from '../../../../core/logger.ts';
import { randomToken } from '../../../../core/tokens.ts';
import type { WhatsAppConfig } from '../../config.ts';
import { type ForwardedCall, OWNER_METHODS, type OwnerClient, type OwnerMethod } from '../../forwarding.ts';
import type { LeaseHolder, SessionLeases } from '../../leases.ts';
import { notConnectedMessage } from '../not-connected.ts';
import { digitsOf, mediaOf, normalizePhone, participantJid, participantJids, recipientOf } from '../nodes.ts';
import type {
  ConnectRequest,
  ConnectResult,
  Contact,
  GroupMetadata,
  MessageKey,
  MessageNode,
  NetworkAdapter,
  NetworkCapabilities,
  NetworkHost,
  NetworkSession,
  OutgoingMessage,
  PairingQr,
  ParticipantResult,
  PresenceType,
  StoredMedia,
} from '../types.ts';
import { Connection, type ConnectionDeps } from './connection.ts';
import { isLid, isPn, jsonOfMessage, keyOf, messageOfJson, normalizeJid } from './convert.ts';
import { EventMapper } from './events.ts';
import { loadRuntime, type WhatsAppRuntime } from './load.ts';
import { type MediaFetcher, mediaFetcher } from './media-fetch.ts';
import { contentOf, MEDIA_URL_FIELD, sendOptions } from './outbound.ts';
import type { BaileysSocket } from './socket.ts';
import { type ContactRow, WhatsAppStore } from './store.ts';

export interface WhatsAppOptions {
  config: WhatsAppConfig;
  /** The server's public URL: a media URL under it (`/api/media/{id}`) is read from the database. */
  publicUrl: string;
  /** Fetch media URLs that resolve to private addresses (`[plugins.sessions] allow_private_networks`). */
  allowPrivateNetworks: boolean;
  /** How a session's proxy URL is checked again before each connection. */
  proxyCheck: ProxyCheckOptions;
  /** Largest media a send fetches or a decryption returns, in bytes. */
  maxMediaBytes: number;
  /** How long uploaded files are kept, in hours. */
  uploadTtlHours: number;
  log: Logger;
  /** Loads Baileys (tests may count the loads). */
  load?: () => Promise<WhatsAppRuntime>;
  /** The sessions' leases: the instance holding a session's lease is the only one with a socket for it. */
  leases: SessionLeases;
  /** Calls the instance holding a session's lease, for what needs its socket (forwarding.ts); without it such calls answer 503. */
  owners?: OwnerClient;
}

/** Set while this instance runs a call another instance forwarded: such a call is never forwarded again. */
const forwarded = new AsyncLocalStorage<true>();

/** 503: another instance holds the session's lease. Where it can be reached, the call goes to it instead (forwarding.ts). */
class DrivenElsewhere extends WharfError {
  readonly holder: LeaseHolder;

  constructor(sessionId: number, holder: LeaseHolder, retryAfter: number) {
    super(
      'unavailable',
      `Session ${sessionId} is driven by another Wharf instance (it holds the session's lease): only that instance has its WhatsApp connection. Retry: a balancer may send the request there, or this instance takes the session over if that one stops.`,
      { retryAfter },
    );
    this.holder = holder;
  }
}

type AdapterMethod = (session: NetworkSession, ...args: unknown[]) => Promise<unknown>;

/** `promise`, or a rejection once `ms` have passed (a database that hangs instead of failing). */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from the database within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

const MEDIA_FILE = /\/api\/media\/([A-Za-z0-9_-]{16,128})(?:\.[A-Za-z0-9]{1,10})?$/;
const PARTICIPANT_DONE = { add: 'added', remove: 'removed', promote: 'promoted', demote: 'demoted' } as const;
const PARTICIPANT_ERROR: Readonly<Record<number, string>> = {
  400: 'bad request',
  401: 'not-authorized',
  403: 'not-authorized',
  404: 'not a participant',
  406: 'not acceptable',
  408: 'recently left the group',
  409: 'already a participant',
  500: 'server error',
};

/** The media part of a message (inside view-once and ephemeral wrappers), as Baileys reads it. */
function mediaPart(
  runtime: WhatsAppRuntime,
  message: WAMessageContent,
): { url?: string | null; directPath?: string | null; mediaKey?: Uint8Array | null } | undefined {
  const inner = runtime.normalizeMessageContent(message);
  const type = inner ? runtime.getContentType(inner) : undefined;
  return type && inner ? (inner[type] as { url?: string | null; directPath?: string | null; mediaKey?: Uint8Array | null } | undefined) : undefined;
}

/** The host of a WhatsApp media URL (https, *.whatsapp.net), or undefined for any other URL. */
function mediaHost(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' && /(^|\.)whatsapp\.net$/.test(parsed.hostname) ? parsed.hostname : undefined;
  } catch {
    return undefined;
  }
}

function invalid(field: string, message: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [message] } });
}

/** A Baileys error as the gateway's: connection trouble is 503 (retry), a refusal by WhatsApp names its code. */
export function networkError(err: unknown, notFound = 'Not found on WhatsApp'): WharfError {
  if (err instanceof WharfError) return err;
  const boom = err as { output?: { statusCode?: number }; data?: unknown; message?: string } | undefined;
  const status = boom?.output?.statusCode;
  // A query error carries WhatsApp's error code in `data` (404 item-not-found, 401 not-authorized, ...).
  const code = typeof boom?.data === 'number' ? boom.data : status;
  const text = boom?.message ?? 'WhatsApp error';
  if (status === 428 || status === 408 || status === 503 || /connection closed|timed out|connection lost/i.test(text)) {
    return new WharfError('unavailable', `WhatsApp is briefly unreachable (${text}); retry later`, { retryAfter: 5, cause: err });
  }
  if (code === 404 || code === 410) return new WharfError('not_found', notFound, { cause: err });
  if (code === 401 || code === 403) return invalid('session', `WhatsApp refused: ${text} (not allowed for this account)`);
  if (code === 400 || code === 406) return invalid('request', `WhatsApp refused the request: ${text}`);
  return new WharfError('internal', `WhatsApp error: ${text}`, { cause: err });
}

export class WhatsAppNetwork implements NetworkAdapter {
  readonly name = 'whatsapp';
  readonly capabilities: NetworkCapabilities = { pairing: ['qr', 'phone_code'], receive: false };
  readonly #host: NetworkHost;
  readonly #store: WhatsAppStore;
  readonly #options: WhatsAppOptions;
  readonly #connections = new Map<number, Connection>();
  readonly #fetch: MediaFetcher & { close(): Promise<void> };
  readonly #publicUrl: string;
  #runtime: Promise<WhatsAppRuntime> | undefined;
  #deps: Promise<ConnectionDeps> | undefined;
  #resumed = false;
  #closed = false;
  /** The methods that need the session's socket, as this instance runs them (the public ones go to the owner when another instance drives the session). */
  readonly #here = new Map<OwnerMethod, AdapterMethod>();

  constructor(db: Db, keys: Pick<Keys, 'encrypt' | 'decrypt'>, host: NetworkHost, options: WhatsAppOptions) {
    // Each method that needs the socket runs here, or, when it finds that another instance holds
    // the session's lease (a DrivenElsewhere, thrown before it changed anything), on that instance.
    const self = this as unknown as Record<OwnerMethod, AdapterMethod>;
    for (const method of OWNER_METHODS) {
      const here = self[method].bind(this);
      this.#here.set(method, here);
      self[method] = (session, ...args) => this.#hereOrOwner(method, session, args, here);
    }
    this.#host = host;
    this.#store = new WhatsAppStore(db, keys);
    this.#options = options;
    this.#publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.#fetch = mediaFetcher({
      allowPrivateNetworks: options.allowPrivateNetworks,
      maxBytes: options.maxMediaBytes,
      timeoutMs: options.config.send_timeout_ms,
    });
  }

  /** The adapter's store (tests and operators read it). */
  get store(): WhatsAppStore {
    return this.#store;
  }

  /** The sessions' leases this instance takes and holds. */
  get leases(): SessionLeases {
    return this.#options.leases;
  }

  /** Whether Baileys has been asked for (a whatsapp session connected or resumed). */
  get loaded(): boolean {
    return this.#runtime !== undefined;
  }

  #loadRuntime(): Promise<WhatsAppRuntime> {
    this.#runtime ??= (this.#options.load ?? loadRuntime)();
    return this.#runtime;
  }

  #connectionDeps(): Promise<ConnectionDeps> {
    this.#deps ??= this.#loadRuntime().then((runtime) => {
      const log = this.#options.log;
      const mapper = new EventMapper({ runtime, host: this.#host, store: this.#store, log });
      const leases = this.#options.leases;
      return {
        runtime,
        host: this.#host,
        store: this.#store,
        mapper,
        config: this.#options.config,
        log,
        proxyCheck: this.#options.proxyCheck,
        lease: (sessionId: number) => leases.take(sessionId),
      };
    });
    return this.#deps;
  }

  /** The connection of a session, made (and Baileys loaded) on first use. */
  async #connection(sessionId: number): Promise<Connection> {
    const deps = await this.#connectionDeps();
    let connection = this.#connections.get(sessionId);
    if (!connection) {
      connection = new Connection(deps, sessionId);
      this.#connections.set(sessionId, connection);
    }
    return connection;
  }

  /** The open socket of a session; 409 when it has none, 503 when another instance drives it. */
  async #socket(session: NetworkSession): Promise<BaileysSocket> {
    const socket = this.#connections.get(session.id)?.socket;
    if (!socket) {
      await this.#notDrivenElsewhere(session);
      throw new WharfError('not_connected', notConnectedMessage(session));
    }
    return socket;
  }

  /** DrivenElsewhere (503) when another instance holds the session's lease: only that instance has its socket. */
  async #notDrivenElsewhere(session: NetworkSession): Promise<void> {
    const { leases } = this.#options;
    if (leases.holds(session.id)) return;
    const holder = await leases.holder(session.id);
    if (holder !== null && holder.owner !== leases.owner) throw new DrivenElsewhere(session.id, holder, Math.ceil(leases.ms / 1000));
  }

  /** Runs a method here; when another instance drives the session, on that one (a call forwarded here is never forwarded again). */
  async #hereOrOwner(method: OwnerMethod, session: NetworkSession, args: unknown[], here: AdapterMethod): Promise<unknown> {
    try {
      return await here(session, ...args);
    } catch (err) {
      const owners = this.#options.owners;
      if (!(err instanceof DrivenElsewhere) || !owners || forwarded.getStore()) throw err;
      const { holder } = err;
      if (holder.url === null) throw err;
      return owners.call({ owner: holder.owner, url: holder.url }, { owner: holder.owner, method, session, args });
    }
  }

  /**
   * Runs a call another instance forwarded (forwarding.ts), if this instance is the owner it
   * found and holds the session's lease; 503 otherwise (it moved: the caller retries).
   */
  async serveForwarded(call: ForwardedCall): Promise<unknown> {
    const { leases } = this.#options;
    if (call.owner !== leases.owner || !leases.holds(call.session.id)) {
      throw new WharfError(
        'unavailable',
        `Session ${call.session.id} is not driven by the Wharf instance the request was handed to (any more): retry, the session's lease names the one that drives it.`,
        { retryAfter: Math.ceil(leases.ms / 1000) },
      );
    }
    return forwarded.run(true, () => this.#here.get(call.method)!(call.session, ...call.args));
  }

  /** Takes the session's lease for a request that opens a socket; 503 when another instance holds it. */
  async #lease(session: NetworkSession): Promise<void> {
    if (await this.#options.leases.take(session.id)) return;
    await this.#notDrivenElsewhere(session);
    // Released between the two statements: try once more (and answer 503 if taken again).
    if (!(await this.#options.leases.take(session.id))) await this.#notDrivenElsewhere(session);
  }

  async #mapper(): Promise<EventMapper> {
    return (await this.#connectionDeps()).mapper;
  }

  // Connection

  async connect(session: NetworkSession, request: ConnectRequest): Promise<ConnectResult> {
    if (this.#closed) throw new WharfError('unavailable', 'The server is stopping', { retryAfter: 5 });
    await this.#lease(session);
    const connection = await this.#connection(session.id);
    return connection.connect({ phoneNumber: request.phoneNumber }, request.phoneNumber ? 'connect requested (pairing by phone code)' : 'connect requested');
  }

  async disconnect(session: NetworkSession): Promise<ConnectResult> {
    const connection = this.#connections.get(session.id);
    if (connection && connection.phase !== 'idle') {
      const result = await connection.disconnect('disconnected by request');
      await this.#options.leases.release(session.id);
      return result;
    }
    await this.#notDrivenElsewhere(session);
    await this.#store.setResume(session.id, false, new Date().toISOString());
    return { status: session.status, message: 'The session is not connected' };
  }

  async restart(session: NetworkSession): Promise<ConnectResult> {
    await this.#lease(session);
    const connection = await this.#connection(session.id);
    return connection.restart('restart requested');
  }

  async qrCode(session: NetworkSession): Promise<PairingQr> {
    const connection = this.#connections.get(session.id);
    const qr = connection?.qr;
    if (qr) return qr;
    // The QR code of a session being paired elsewhere is on that instance.
    if (!connection || connection.phase === 'idle') await this.#notDrivenElsewhere(session);
    // Say what is happening: the live connection's reason first, else the one stored with the status.
    const reason = connection?.reason || session.statusReason;
    const why =
      session.status === 'connected'
        ? 'The session is connected: there is no QR code to scan'
        : connection?.phase === 'need_scan'
          ? 'The session pairs by phone code: read pairingCode from POST .../connect'
          : connection?.phase === 'connecting'
            ? `The session is connecting and has no QR code yet${reason ? `: ${reason}` : ''}; ask again shortly`
            : `The session is not pairing (status: ${session.status}${reason ? `: ${reason}` : ''}); POST .../connect starts pairing`;
    throw new WharfError('conflict', why);
  }

  async user(session: NetworkSession) {
    const socket = await this.#socket(session);
    const user = socket.user!;
    return {
      id: normalizeJid(user.id),
      lid: user.lid ? normalizeJid(user.lid) : null,
      name: user.name ?? user.notify ?? session.name,
      phone_number: session.phoneNumber,
    };
  }

  async forget(session: NetworkSession): Promise<void> {
    const connection = this.#connections.get(session.id);
    if (!connection || connection.phase === 'idle') await this.#notDrivenElsewhere(session);
    if (connection) await connection.logout('session deleted');
    this.#connections.delete(session.id);
    await this.#store.clearAuth(session.id);
    await this.#options.leases.release(session.id);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#connections.values()].map((c) => c.shutdown()));
    this.#connections.clear();
    // After the last status writes: an instance taking a session over reports after them.
    await this.#options.leases.releaseAll();
    await this.#fetch.close();
  }

  /**
   * The heartbeat (every third of the lease): renews the lease of every session this instance
   * has a connection for; a connection whose lease another instance took, or that could not be
   * renewed before it ran out, closes its socket at once. Leases of stopped connections are released.
   */
  async renewLeases(): Promise<void> {
    if (this.#closed) return;
    const { leases, log } = this.#options;
    const held = leases.held();
    await Promise.all(
      [...this.#connections.values()].map(async (connection) => {
        const id = connection.sessionId;
        if (connection.phase === 'idle' || connection.phase === 'stopped') {
          if (held.includes(id)) await leases.release(id);
          return;
        }
        // Alone on the database (SQLite) a lease is held until released: nothing to renew.
        if (!leases.shared) return;
        let kept: boolean;
        try {
          kept = await withDeadline(leases.take(id), leases.ms / 3);
        } catch (err) {
          log.warn({ err, sessionId: id }, 'renewing a session lease failed');
          // Closed while a third of the lease is left (the next heartbeat would come too late): another
          // instance takes the session over only once the lease has run out, so the two never overlap.
          kept = leases.holds(id, Date.now() + leases.ms / 3);
        }
        if (!kept) connection.yield('another Wharf instance took this session over, or its lease could not be renewed in time');
      }),
    );
  }

  /**
   * Runs on a timer once the server has started. The first run resumes the sessions that were
   * connected when the server stopped (Baileys loads only if there is one) and marks the others
   * that were left mid-connection disconnected; every run checks the watchdog.
   */
  async supervise(): Promise<void> {
    if (this.#closed) return;
    const first = !this.#resumed;
    this.#resumed = true;
    const { leases } = this.#options;
    // After the first run only another instance's sessions can need taking over: alone on the
    // database (SQLite) there is none, so the accounts are not read again every tick.
    if (first || leases.shared) await this.#takeOver(first);
    const now = Date.now();
    for (const connection of this.#connections.values()) connection.watch(now);
  }

  /** Resumes the sessions to drive whose lease is free; at start-up, marks those left mid-pairing disconnected. */
  async #takeOver(first: boolean): Promise<void> {
    // Sessions to resume (paired, and connected when their instance stopped or died) and, at
    // start-up, sessions left mid-pairing, which nobody drives: each once its lease is free.
    const found: { id: number; resume: boolean }[] = [];
    for (const account of await this.#store.accounts()) {
      // A session with a connection here is in hand already.
      const here = this.#connections.get(account.session_id);
      if (here && here.phase !== 'idle') continue;
      if (account.resume && account.registered) found.push({ id: account.session_id, resume: true });
      else if (first) {
        const session = await this.#host.session(account.session_id);
        if (session?.status === 'connecting' || session?.status === 'need_scan' || session?.status === 'connected') {
          found.push({ id: account.session_id, resume: false });
        }
      }
    }
    const { leases } = this.#options;
    for (const { id, resume } of found) {
      if (!(await leases.take(id))) continue;
      if (!resume) {
        await this.#host.setStatus(id, 'disconnected', 'server restarted while pairing; connect again');
        await leases.release(id);
        continue;
      }
      const connection = await this.#connection(id);
      if (connection.phase === 'idle') void connection.connect({}, first ? 'server started: resuming' : 'resuming: the instance that drove it stopped');
    }
  }

  /** Bounds the message store and drops expired uploads (hourly). */
  async prune(now = Date.now()): Promise<void> {
    const { message_store_limit: keep, message_store_days: days } = this.#options.config;
    await this.#store.pruneMessages(keep, new Date(now - days * 86_400_000).toISOString());
    await this.#store.pruneUploads(new Date(now - this.#options.uploadTtlHours * 3_600_000).toISOString());
  }

  /** Settles once the session's connection has handled what it received so far (its events, acks and writes). */
  async idle(sessionId: number): Promise<void> {
    await this.#connections.get(sessionId)?.idle();
  }

  /** The connection of a session, if it has one (tests read its caches). */
  connectionOf(sessionId: number): Connection | undefined {
    return this.#connections.get(sessionId);
  }

  // Messages

  async send(session: NetworkSession, out: OutgoingMessage): Promise<void> {
    const socket = await this.#socket(session);
    const runtime = await this.#loadRuntime();
    const mapper = await this.#mapper();
    const content = await contentOf(out, (url, type) => this.#media(session, url, MEDIA_URL_FIELD[type]));
    await mapper.pending(session.id, { msgId: out.msgId, id: out.id, jid: out.jid });
    const sending = socket
      .sendMessage(
        out.jid,
        content,
        sendOptions(out, (node) => messageOfJson(runtime, node)),
      )
      .then(async (msg) => {
        if (msg) await mapper.accepted(session.id, out.msgId, msg);
      });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#options.config.send_timeout_ms);
    });
    try {
      const outcome = await Promise.race([sending.then(() => 'sent' as const), timedOut]);
      if (outcome === 'timeout') {
        // Still going: the message stays accepted; a later failure is reported on its log row.
        sending.catch((err: unknown) =>
          this.#host
            .failed(session.id, out.msgId, networkError(err).message)
            .catch((error: unknown) => this.#options.log.error({ err: error }, 'recording a failed send failed')),
        );
      }
    } catch (err) {
      throw networkError(err);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The bytes of a media URL: an upload to this server from the database, anything else fetched (guarded). */
  async #media(session: NetworkSession, url: string, field: string) {
    if (url.startsWith(`${this.#publicUrl}/`)) {
      const id = MEDIA_FILE.exec(new URL(url).pathname)?.[1];
      const upload = id ? await this.#store.upload(id, session.orgId) : undefined;
      if (!upload) throw invalid(field, `${field} names no file uploaded by this organization (or it expired)`);
      return { bytes: upload.bytes, mimetype: upload.mimetype, fileName: upload.file_name };
    }
    return this.#fetch(url, field);
  }

  /** The key of a message as the network gave it (participant included), from the message store. */
  async #fullKey(session: NetworkSession, key: Partial<MessageKey>): Promise<MessageKey & { participant?: string }> {
    const row = key.id ? await this.#store.message(session.id, key.id) : undefined;
    const stored = row ? (JSON.parse(row.key) as MessageKey) : undefined;
    return {
      id: key.id ?? stored?.id ?? '',
      remoteJid: stored?.remoteJid ?? key.remoteJid ?? '',
      fromMe: stored?.fromMe ?? key.fromMe ?? false,
      ...((stored?.participant ?? key.participant) ? { participant: stored?.participant ?? key.participant } : {}),
    };
  }

  async editMessage(session: NetworkSession, key: MessageKey, text: string): Promise<MessageNode> {
    const socket = await this.#socket(session);
    const full = await this.#fullKey(session, key);
    try {
      await socket.sendMessage(full.remoteJid, { text, edit: full });
    } catch (err) {
      throw networkError(err, 'Message not found');
    }
    return { conversation: text };
  }

  async deleteMessage(session: NetworkSession, key: MessageKey): Promise<void> {
    const socket = await this.#socket(session);
    const full = await this.#fullKey(session, key);
    try {
      await socket.sendMessage(full.remoteJid, { delete: full });
    } catch (err) {
      throw networkError(err, 'Message not found');
    }
  }

  async readMessages(session: NetworkSession, keys: MessageKey[]): Promise<void> {
    const socket = await this.#socket(session);
    try {
      await socket.readMessages(await Promise.all(keys.map((k) => this.#fullKey(session, k))));
    } catch (err) {
      throw networkError(err, 'Message not found');
    }
  }

  async react(session: NetworkSession, key: MessageKey, emoji: string): Promise<MessageKey> {
    const socket = await this.#socket(session);
    const full = await this.#fullKey(session, key);
    let sent: Awaited<ReturnType<BaileysSocket['sendMessage']>>;
    try {
      sent = await socket.sendMessage(full.remoteJid, { react: { text: emoji, key: full } });
    } catch (err) {
      throw networkError(err, 'Message not found');
    }
    return sent ? await keyOf(sent.key, (await this.#mapper()).lids(session.id)) : { id: '', remoteJid: full.remoteJid, fromMe: true };
  }

  async findMessage(session: NetworkSession, id: string): Promise<{ key: MessageKey; message: MessageNode } | null> {
    const row = await this.#store.message(session.id, id);
    if (!row?.message) return null;
    const runtime = await this.#loadRuntime();
    return { key: JSON.parse(row.key) as MessageKey, message: jsonOfMessage(runtime, runtime.proto.Message.decode(row.message)) };
  }

  async sendPresence(session: NetworkSession, jid: string, type: PresenceType, delayMs?: number): Promise<void> {
    const socket = await this.#socket(session);
    const chat = recipientOf(jid);
    if (!chat) throw invalid('jid', 'jid is not a phone number or JID');
    try {
      await socket.sendPresenceUpdate(type, chat.jid);
    } catch (err) {
      throw networkError(err);
    }
    if (delayMs && (type === 'composing' || type === 'recording')) {
      // The indicator lapses after delayMs, as WasenderAPI's does.
      setTimeout(() => {
        this.#connections
          .get(session.id)
          ?.socket?.sendPresenceUpdate('paused', chat.jid)
          .catch(() => {});
      }, delayMs).unref();
    }
  }

  // Contacts and lookups

  #contact(row: ContactRow): Contact {
    return { id: row.jid, lid: row.lid, name: row.name, notify: row.notify, imgUrl: row.img_url, status: null, blocked: row.blocked === 1 };
  }

  /** A phone number, phone JID or known LID as the contact's phone-number JID; 422 otherwise. */
  async #contactJid(session: NetworkSession, value: string): Promise<string> {
    const trimmed = value.trim();
    if (/^\d{6,20}@lid$/.test(trimmed)) {
      const pn = await this.#store.pnOfLid(session.id, trimmed);
      if (pn) return pn;
    }
    const jid = participantJid(trimmed);
    if (!jid) throw invalid('jid', 'jid must be a phone number (E.164), a phone JID or a known LID');
    return jid;
  }

  async contacts(session: NetworkSession): Promise<Contact[]> {
    return (await this.#store.contacts(session.id)).map((r) => this.#contact(r));
  }

  async contact(session: NetworkSession, jid: string): Promise<Contact | null> {
    const row = await this.#store.contact(session.id, await this.#contactJid(session, jid));
    return row ? this.#contact(row) : null;
  }

  async upsertContact(session: NetworkSession, input: { jid: string; fullName: string }): Promise<Contact> {
    const socket = await this.#socket(session);
    const jid = await this.#contactJid(session, input.jid);
    try {
      await socket.addOrEditContact(jid, { fullName: input.fullName, firstName: input.fullName.split(' ')[0], saveOnPrimaryAddressbook: true });
    } catch (err) {
      throw networkError(err);
    }
    return this.#host.transaction(async () => {
      const existed = (await this.#store.contact(session.id, jid)) !== undefined;
      await this.#store.upsertContact(
        session.id,
        jid,
        { name: input.fullName, lid: (await this.#store.lidOfPn(session.id, jid)) ?? null },
        new Date().toISOString(),
      );
      const contact = this.#contact((await this.#store.contact(session.id, jid))!);
      await this.#host.emit(session.id, existed ? 'contacts.update' : 'contacts.upsert', [
        { id: jid, lid: contact.lid, phoneNumber: jid, name: input.fullName },
      ]);
      return contact;
    }, [session.id]);
  }

  async setBlocked(session: NetworkSession, jid: string, blocked: boolean): Promise<void> {
    const socket = await this.#socket(session);
    const contactJid = await this.#contactJid(session, jid);
    try {
      await socket.updateBlockStatus(contactJid, blocked ? 'block' : 'unblock');
    } catch (err) {
      throw networkError(err);
    }
    await this.#store.upsertContact(session.id, contactJid, { blocked }, new Date().toISOString());
  }

  async #picture(socket: BaileysSocket, jid: string): Promise<string | null> {
    try {
      return (await socket.profilePictureUrl(jid, 'image')) ?? null;
    } catch (err) {
      // No picture, or not allowed to see it: WhatsApp answers 404 / 401.
      const mapped = networkError(err);
      if (mapped.code === 'not_found' || mapped.code === 'validation_failed') return null;
      throw mapped;
    }
  }

  async profilePicture(session: NetworkSession, jid: string): Promise<string | null> {
    const socket = await this.#socket(session);
    const contactJid = await this.#contactJid(session, jid);
    const url = await this.#picture(socket, contactJid);
    if (url) await this.#store.upsertContact(session.id, contactJid, { imgUrl: url }, new Date().toISOString());
    return url;
  }

  async onWhatsApp(session: NetworkSession, phone: string) {
    const socket = await this.#socket(session);
    const normalized = normalizePhone(phone);
    if (!normalized) throw invalid('phone', 'phone must be in E.164 format');
    const pn = `${digitsOf(normalized)}@s.whatsapp.net`;
    let found: { jid: string; exists: boolean }[] | undefined;
    try {
      found = await socket.onWhatsApp(pn);
    } catch (err) {
      throw networkError(err);
    }
    const hit = found?.find((r) => r.exists);
    const lid = hit ? await this.lidFromPn(session, pn) : null;
    return { exists: hit !== undefined, jid: hit ? normalizeJid(hit.jid) : pn, lid };
  }

  async lidFromPn(session: NetworkSession, pn: string): Promise<string | null> {
    const jid = participantJid(pn);
    if (!jid) return null;
    const known = await this.#store.lidOfPn(session.id, jid);
    if (known) return known;
    const socket = await this.#socket(session);
    let lid: string | null;
    try {
      lid = await socket.signalRepository.lidMapping.getLIDForPN(jid);
    } catch (err) {
      throw networkError(err);
    }
    if (!isLid(lid)) return null;
    const normalized = normalizeJid(lid);
    await this.#store.setLid(session.id, normalized, jid);
    return normalized;
  }

  async pnFromLid(session: NetworkSession, lid: string): Promise<string | null> {
    const match = /^(\d{6,20})(?:@lid)?$/.exec(lid.trim());
    if (!match) return null;
    const jid = `${match[1]}@lid`;
    const known = await this.#store.pnOfLid(session.id, jid);
    if (known) return known;
    const socket = await this.#socket(session);
    let pn: string | null;
    try {
      pn = await socket.signalRepository.lidMapping.getPNForLID(jid);
    } catch (err) {
      throw networkError(err);
    }
    if (!isPn(pn)) return null;
    const normalized = normalizeJid(pn);
    await this.#store.setLid(session.id, jid, normalized);
    return normalized;
  }

  // Groups

  async #group(session: NetworkSession, run: () => Promise<Parameters<EventMapper['group']>[1]>): Promise<GroupMetadata> {
    let group: Parameters<EventMapper['group']>[1];
    try {
      group = await run();
    } catch (err) {
      throw networkError(err, 'Group not found');
    }
    this.#connections.get(session.id)?.groups.set(group.id, group);
    return (await this.#mapper()).group(session.id, group);
  }

  #groupJid(jid: string): string {
    const trimmed = jid.trim();
    if (!/^\d[\d-]{5,40}@g\.us$/.test(trimmed)) throw invalid('groupJid', 'must be a group JID (…@g.us)');
    return trimmed;
  }

  async groups(session: NetworkSession): Promise<GroupMetadata[]> {
    const socket = await this.#socket(session);
    let all: Awaited<ReturnType<BaileysSocket['groupFetchAllParticipating']>>;
    try {
      all = await socket.groupFetchAllParticipating();
    } catch (err) {
      throw networkError(err);
    }
    const mapper = await this.#mapper();
    const cache = this.#connections.get(session.id)?.groups;
    return Promise.all(
      Object.values(all)
        .sort((a, b) => (a.creation ?? 0) - (b.creation ?? 0) || a.id.localeCompare(b.id))
        .map((g) => {
          cache?.set(g.id, g);
          return mapper.group(session.id, g);
        }),
    );
  }

  async createGroup(session: NetworkSession, subject: string, participants: string[]): Promise<GroupMetadata> {
    const socket = await this.#socket(session);
    const members = participantJids(participants);
    return this.#group(session, () => socket.groupCreate(subject, members));
  }

  async groupMetadata(session: NetworkSession, jid: string): Promise<GroupMetadata> {
    const socket = await this.#socket(session);
    const groupJid = this.#groupJid(jid);
    return this.#group(session, () => socket.groupMetadata(groupJid)).catch((err: unknown) => {
      // WhatsApp answers forbidden for a group this account is not in: to the caller it does not exist.
      throw err instanceof WharfError && err.code === 'validation_failed' ? new WharfError('not_found', 'Group not found') : err;
    });
  }

  async updateParticipants(
    session: NetworkSession,
    jid: string,
    action: 'add' | 'remove' | 'promote' | 'demote',
    participants: string[],
  ): Promise<ParticipantResult[]> {
    const socket = await this.#socket(session);
    const groupJid = this.#groupJid(jid);
    const list = participantJids(participants);
    let results: Awaited<ReturnType<BaileysSocket['groupParticipantsUpdate']>>;
    try {
      results = await socket.groupParticipantsUpdate(groupJid, list, action);
    } catch (err) {
      throw networkError(err, 'Group not found');
    }
    this.#connections.get(session.id)?.groups.del(groupJid);
    const lids = (await this.#mapper()).lids(session.id);
    return Promise.all(
      results.map(async (r, i) => {
        const status = Number(r.status) || 500;
        const answered = r.jid ? normalizeJid(r.jid) : list[i]!;
        const id = isLid(answered) ? ((await lids.pnOfLid(answered)) ?? list[i] ?? answered) : answered;
        return { id, status, message: status === 200 ? PARTICIPANT_DONE[action] : (PARTICIPANT_ERROR[status] ?? `error ${status}`) };
      }),
    );
  }

  async updateGroupSettings(
    session: NetworkSession,
    jid: string,
    settings: { subject?: string; description?: string; announce?: boolean; restrict?: boolean },
  ): Promise<GroupMetadata> {
    const socket = await this.#socket(session);
    const groupJid = this.#groupJid(jid);
    try {
      if (settings.subject !== undefined) await socket.groupUpdateSubject(groupJid, settings.subject);
      if (settings.description !== undefined) await socket.groupUpdateDescription(groupJid, settings.description);
      if (settings.announce !== undefined) await socket.groupSettingUpdate(groupJid, settings.announce ? 'announcement' : 'not_announcement');
      if (settings.restrict !== undefined) await socket.groupSettingUpdate(groupJid, settings.restrict ? 'locked' : 'unlocked');
    } catch (err) {
      throw networkError(err, 'Group not found');
    }
    this.#connections.get(session.id)?.groups.del(groupJid);
    return this.#group(session, () => socket.groupMetadata(groupJid));
  }

  async leaveGroup(session: NetworkSession, jid: string): Promise<void> {
    const socket = await this.#socket(session);
    const groupJid = this.#groupJid(jid);
    try {
      await socket.groupLeave(groupJid);
    } catch (err) {
      throw networkError(err, 'Group not found');
    }
    this.#connections.get(session.id)?.groups.del(groupJid);
  }

  async groupInviteCode(session: NetworkSession, jid: string): Promise<string> {
    const socket = await this.#socket(session);
    const groupJid = this.#groupJid(jid);
    let code: string | undefined;
    try {
      code = await socket.groupInviteCode(groupJid);
    } catch (err) {
      throw networkError(err, 'Group not found');
    }
    if (!code) throw new WharfError('not_found', 'Group not found');
    return code;
  }

  async groupInviteInfo(session: NetworkSession, code: string): Promise<GroupMetadata> {
    const socket = await this.#socket(session);
    return this.#group(session, () => socket.groupGetInviteInfo(code)).catch((err: unknown) => {
      throw err instanceof WharfError && err.code === 'not_found' ? new WharfError('not_found', 'Invite not found') : err;
    });
  }

  async acceptGroupInvite(session: NetworkSession, code: string): Promise<string> {
    const socket = await this.#socket(session);
    let jid: string | undefined;
    try {
      jid = await socket.groupAcceptInvite(code);
    } catch (err) {
      throw networkError(err, 'Invite not found');
    }
    if (!jid) throw new WharfError('not_found', 'Invite not found');
    return jid;
  }

  async groupPicture(session: NetworkSession, jid: string): Promise<string | null> {
    const socket = await this.#socket(session);
    return this.#picture(socket, this.#groupJid(jid));
  }

  // Media

  async uploadMedia(session: NetworkSession, media: { bytes: Buffer; mimetype: string; fileName?: string }): Promise<{ id: string }> {
    const id = randomToken(18);
    await this.#store.insertUpload(
      { id, orgId: session.orgId, sessionId: session.id, mimetype: media.mimetype, fileName: media.fileName ?? null, bytes: media.bytes },
      new Date().toISOString(),
    );
    return { id };
  }

  async uploadedMedia(session: NetworkSession, id: string): Promise<StoredMedia | null> {
    const row = await this.#store.upload(id, session.orgId);
    return row ? { bytes: row.bytes, mimetype: row.mimetype, fileName: row.file_name } : null;
  }

  async decryptMedia(session: NetworkSession, node: MessageNode, key?: Partial<MessageKey>): Promise<StoredMedia> {
    const socket = await this.#socket(session);
    const runtime = await this.#loadRuntime();
    const found = mediaOf(node);
    if (!found) throw invalid('message', 'the message has no image, video, audio, document or sticker');
    const { media } = found;
    const message = messageOfJson(runtime, node);
    const part = mediaPart(runtime, message);
    if (part?.mediaKey?.length !== 32) throw invalid('mediaKey', 'the media has no mediaKey of 32 bytes');
    if (part.directPath && !part.directPath.startsWith('/')) throw invalid('directPath', "directPath must be a path on WhatsApp's media host");
    if (!part.directPath && !mediaHost(part.url)) throw invalid('url', 'the media has neither a directPath nor a WhatsApp media URL');
    const logger = this.#options.log.child({ network: 'whatsapp', sessionId: session.id }, { level: this.#options.config.log_level });
    const download = (msg: { key: MessageKey; message: typeof message }) => {
      const media = mediaPart(runtime, msg.message)!;
      // The download goes to WhatsApp's media hosts only, whatever host the node names.
      const host = mediaHost(media.url);
      if (!host) media.url = null;
      const dispatcher = this.#connections.get(session.id)?.dispatcher;
      return runtime.downloadMediaMessage(
        msg,
        'stream',
        // Through the session's proxy, as everything else it sends to WhatsApp (fetch takes undici's dispatcher).
        { host: host ?? 'mmg.whatsapp.net', ...(dispatcher ? { options: { dispatcher } as RequestInit } : {}) },
        { logger, reuploadRequest: (m) => socket.updateMediaMessage(m) },
      );
    };
    let target = { key: await this.#fullKey(session, key ?? {}), message };
    const limit = this.#options.maxMediaBytes;
    let bytes: Buffer;
    try {
      let stream: Awaited<ReturnType<typeof download>>;
      try {
        stream = await download(target);
      } catch (err) {
        // Expired on WhatsApp's CDN (404 / 410): the phone is asked to upload it again, which
        // needs the message's key. (Baileys' own re-request in downloadMediaMessage looks for an
        // error property its errors do not have, so the adapter does it.)
        const status = (err as { output?: { statusCode?: number } }).output?.statusCode;
        if ((status !== 404 && status !== 410) || !target.key.id || !target.key.remoteJid) throw err;
        target = (await socket.updateMediaMessage(target)) as typeof target;
        stream = await download(target);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of stream) {
        size += (chunk as Buffer).length;
        if (size > limit) {
          stream.destroy();
          throw new WharfError('payload_too_large', `The media is larger than ${limit} bytes (upload_max_bytes)`);
        }
        chunks.push(chunk as Buffer);
      }
      bytes = Buffer.concat(chunks);
    } catch (err) {
      if (err instanceof WharfError) throw err;
      if (/bad decrypt|wrong final block|invalid/i.test((err as Error).message ?? '')) {
        throw invalid('mediaKey', 'mediaKey does not decrypt this media');
      }
      throw networkError(err, 'Media not found on WhatsApp (expired, and the phone did not upload it again)');
    }
    const fileName = typeof media.fileName === 'string' ? media.fileName : null;
    return { bytes, mimetype: typeof media.mimetype === 'string' ? media.mimetype : 'application/octet-stream', fileName };
  }
}
