/**
 * One whatsapp session's connection: exactly one Baileys socket at a time, its pairing (QR codes,
 * refreshed as WhatsApp rotates them and capped; or a pairing code typed on the phone), every
 * state change reported to the host (connecting, need_scan, connected, disconnected, logged_out,
 * failed, with the reason), reconnection after transient closes with exponential backoff and
 * jitter (at once for the restart WhatsApp asks for right after pairing), a stop on the codes
 * that mean the account is gone (logged out, forbidden, replaced), and a watchdog for a socket
 * that stays "open" but receives nothing.
 *
 * A socket belongs to a generation: when the connection replaces or drops it, whatever the old
 * socket still emits is ignored, so two sockets never drive one session.
 */
import type { BaileysEventMap, ConnectionState, UserFacingSocketConfig } from 'baileys';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Logger } from '../../../../core/logger.ts';
import type { ProxyCheckOptions } from '../../address-guard.ts';
import type { WhatsAppConfig } from '../../config.ts';
import { digitsOf } from '../nodes.ts';
import type { ConnectResult, NetworkHost, PairingQr, SessionStatus } from '../types.ts';
import { databaseAuthState, isPaired } from './auth-state.ts';
import { BoundedCache } from './cache.ts';
import { normalizeJid, userOf } from './convert.ts';
import type { EventMapper } from './events.ts';
import { type ProxyClients, ProxyRefused, proxyClients } from './proxy.ts';
import type { WhatsAppRuntime } from './load.ts';
import type { BaileysSocket } from './socket.ts';
import type { WhatsAppStore } from './store.ts';

/** What a connection is made with (shared by every session of the network). */
export interface ConnectionDeps {
  runtime: WhatsAppRuntime;
  host: NetworkHost;
  store: WhatsAppStore;
  mapper: EventMapper;
  config: WhatsAppConfig;
  log: Logger;
  /** How a session's proxy URL is checked again before each connection. */
  proxyCheck: ProxyCheckOptions;
  /** Takes or renews the session's lease (see `leases.ts`) before a socket opens; false: another instance drives the session. */
  lease(sessionId: number): Promise<boolean>;
}

/** Close codes (Baileys' DisconnectReason and WhatsApp's stream errors). */
const CODE = {
  loggedOut: 401,
  forbidden: 403,
  /** WhatsApp refuses the announced client version. */
  outdated: 405,
  timedOut: 408,
  multideviceMismatch: 411,
  unauthorized: 419,
  connectionClosed: 428,
  connectionReplaced: 440,
  badSession: 500,
  unavailable: 503,
  restartRequired: 515,
} as const;

/** What a close means for the connection. */
type CloseAction = { kind: 'restart' } | { kind: 'reconnect' } | { kind: 'stop'; status: SessionStatus; forget: boolean; reason: string };

/** The status code of a close error (a Boom from Baileys), if it has one. */
export function closeCode(error: unknown): number | undefined {
  const boom = error as { output?: { statusCode?: unknown }; isBoom?: boolean } | undefined;
  const code = boom?.output?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/**
 * The network error behind a close, when the WebSocket itself failed before or instead of
 * WhatsApp answering (DNS, connection refused or reset, TLS, handshake timeout, an HTTP answer to
 * the upgrade). Baileys 7 wraps it in a Boom "WebSocket Error (<message>)" whose status code says
 * little (408 for any `E...` error code or "timed out", 500 otherwise, the HTTP status of a refused
 * upgrade) and keeps the original error as the Boom's `data`.
 */
export function closeCause(error: unknown): string | undefined {
  const data = (error as { data?: unknown } | undefined)?.data;
  return data instanceof Error && data.message ? data.message : undefined;
}

/** A close in words, for the session log and session.status events; `cause`: see {@link closeCause}. */
export function describeClose(code: number | undefined, message: string | undefined, cause?: string): string {
  // Not WhatsApp's verdict but the network's: say so, with the error as the system gave it.
  if (cause) return `WhatsApp cannot be reached (${cause})`;
  const words: Record<number, string> = {
    [CODE.loggedOut]: 'logged out',
    [CODE.forbidden]: 'forbidden',
    [CODE.outdated]: 'client version refused',
    [CODE.timedOut]: 'timed out',
    [CODE.multideviceMismatch]: 'multi-device mismatch',
    [CODE.unauthorized]: 'unauthorized',
    [CODE.connectionClosed]: 'connection closed',
    [CODE.connectionReplaced]: 'connection replaced',
    [CODE.badSession]: 'stream error',
    [CODE.unavailable]: 'service unavailable',
    [CODE.restartRequired]: 'restart required',
  };
  const what = code === undefined ? 'connection lost' : `${words[code] ?? 'closed'} (${code})`;
  return message && !what.toLowerCase().includes(message.toLowerCase()) ? `${what}: ${message}` : what;
}

/** What to do after a close with this code; a close caused by the network (`cause`) always reconnects, whatever its code. */
export function closeAction(code: number | undefined, message: string | undefined, cause?: string): CloseAction {
  if (cause) return { kind: 'reconnect' };
  const reason = describeClose(code, message);
  switch (code) {
    case CODE.restartRequired:
      return { kind: 'restart' };
    case CODE.loggedOut:
    case CODE.unauthorized:
      return { kind: 'stop', status: 'logged_out', forget: true, reason: `${reason}: the linked device was removed from the phone; connect again to pair` };
    case CODE.forbidden:
      return { kind: 'stop', status: 'failed', forget: true, reason: `${reason}: WhatsApp refused this account (banned or restricted)` };
    case CODE.outdated:
      return {
        kind: 'stop',
        status: 'failed',
        forget: false,
        reason: `${reason}: WhatsApp no longer accepts this WhatsApp Web version; set a newer [plugins.sessions.whatsapp] version and connect again`,
      };
    case CODE.multideviceMismatch:
      return { kind: 'stop', status: 'failed', forget: true, reason: `${reason}: the account cannot use linked devices; connect again to pair` };
    case CODE.connectionReplaced:
      return {
        kind: 'stop',
        status: 'disconnected',
        forget: false,
        reason: `${reason}: another client connected with this session's credentials; connect again to take it back`,
      };
    default:
      return { kind: 'reconnect' };
  }
}

/** The wait before reconnect attempt `attempt` (1, 2, ...): doubling from `initial` up to `max`, drawn between half and all of it. */
export function backoffDelay(attempt: number, initial: number, max: number, random: () => number = Math.random): number {
  const ceiling = Math.min(max, initial * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

type Phase = 'idle' | 'connecting' | 'need_scan' | 'open' | 'stopped';

interface Waiter {
  resolve(result: ConnectResult): void;
}

export class Connection {
  readonly sessionId: number;
  readonly #deps: ConnectionDeps;
  readonly #groups: BoundedCache;
  readonly #caches: { retries: BoundedCache; devices: BoundedCache; calls: BoundedCache; placeholders: BoundedCache };
  #phase: Phase = 'idle';
  #generation = 0;
  #socket: BaileysSocket | undefined;
  /** The proxy clients of the current socket (the session's proxy_url), if it has one. */
  #proxy: ProxyClients | undefined;
  /** The proxy the last attempt went through (no credentials), for the reason of a failure. */
  #proxyShown: string | undefined;
  #qr: PairingQr | undefined;
  #qrCount = 0;
  #pairingPhone: string | undefined;
  #pairingCode: string | undefined;
  /** The socket generation the pairing code was issued on. */
  #codeGeneration = -1;
  /** The attempt under way since the last connect or drop (1, 2, ...); 0 while open or idle. */
  #attempt = 0;
  /** Closes in a row that led to a reconnect (the backoff's exponent). */
  #failures = 0;
  /** The server log said this session cannot connect, and has not yet said it recovered. */
  #failing = false;
  #timer: NodeJS.Timeout | undefined;
  #lastFrame = Date.now();
  #lastReason = '';
  #waiters: Waiter[] = [];
  /** Undone by `stop`: a socket being opened when the connection stopped is closed as soon as it exists. */
  #opening: Promise<void> | undefined;
  /**
   * The database writes of this connection (status reports, resume flags) and the answers to
   * waiting connects, in the order the state machine made them: the state machine itself stays
   * synchronous, its writes and answers run one after the other behind it.
   */
  #writes: Promise<void> = Promise.resolve();
  /** The status last reported (what `current()` answers when neither connecting, pairing nor open). */
  #lastStatus: SessionStatus | undefined;
  /** Whether the stored credentials are registered (paired once), as last read or written. */
  #registered = false;

  constructor(deps: ConnectionDeps, sessionId: number) {
    this.#deps = deps;
    this.sessionId = sessionId;
    const { cache_size: size } = deps.config;
    this.#groups = new BoundedCache(size, 5 * 60_000);
    this.#caches = {
      retries: new BoundedCache(size, 60 * 60_000),
      devices: new BoundedCache(size, 5 * 60_000),
      calls: new BoundedCache(Math.min(size, 100), 5 * 60_000),
      placeholders: new BoundedCache(size, 60 * 60_000),
    };
  }

  /** The open socket, or undefined while not connected. */
  get socket(): BaileysSocket | undefined {
    return this.#phase === 'open' ? this.#socket : undefined;
  }

  /** The dispatcher media downloads of the open socket use (its proxy's), if it has a proxy. */
  get dispatcher(): Dispatcher | undefined {
    return this.#phase === 'open' ? this.#proxy?.dispatcher : undefined;
  }

  get phase(): Phase {
    return this.#phase;
  }

  /** Group metadata the socket reads instead of asking WhatsApp. */
  get groups(): BoundedCache {
    return this.#groups;
  }

  /** The caches of this connection and how full each is. */
  cacheSizes(): Record<string, number> {
    return {
      groups: this.#groups.size,
      retries: this.#caches.retries.size,
      devices: this.#caches.devices.size,
      calls: this.#caches.calls.size,
      placeholders: this.#caches.placeholders.size,
    };
  }

  get qr(): PairingQr | undefined {
    return this.#phase === 'need_scan' ? this.#qr : undefined;
  }

  /** Why the connection is in its phase (the last attempt's failure, say); '' when there is nothing to say. */
  get reason(): string {
    return this.#lastReason;
  }

  /** Whether the session completed pairing once (its credentials are registered): only then can it reconnect without a scan. */
  #paired(): boolean {
    return this.#registered;
  }

  /** Reads whether the stored credentials are registered (before a decision that depends on it). */
  async #readPaired(): Promise<void> {
    this.#registered = (await this.#deps.store.account(this.sessionId))?.registered === 1;
  }

  /** Settles once everything queued so far (and anything it queued) is done: event batches, writes, answers. */
  async idle(): Promise<void> {
    let writes: Promise<void>;
    do {
      writes = this.#writes;
      await writes;
    } while (writes !== this.#writes);
  }

  /** Runs a write (or an answer) after those queued before it; a failure is logged, the queue goes on. */
  #queue(fn: () => unknown): void {
    this.#writes = this.#writes.then(fn).then(
      () => {},
      (err: unknown) => this.#log.error({ err, sessionId: this.sessionId }, 'recording a WhatsApp connection change failed'),
    );
  }

  /** Failed attempts in a row before giving up (0: never): a session not paired yet gives up soon, it can do nothing without a scan. */
  #attemptLimit(): number {
    const { reconnect_max_attempts: max, unpaired_max_attempts: unpaired } = this.#deps.config;
    if (this.#paired()) return max;
    return max > 0 ? Math.min(max, unpaired) : unpaired;
  }

  get #log(): Logger {
    return this.#deps.log;
  }

  #setStatus(status: SessionStatus, reason?: string, repeat = false): void {
    this.#lastStatus = status;
    this.#queue(() => this.#deps.host.setStatus(this.sessionId, status, reason, { repeat }));
  }

  /** The connection works again (a QR code or an open socket): one server log line ends the failing one. */
  #recovered(what: string): void {
    this.#attempt = 0;
    this.#failures = 0;
    if (!this.#failing) return;
    this.#failing = false;
    this.#log.info({ sessionId: this.sessionId }, `WhatsApp session ${this.sessionId} ${what} again`);
  }

  /** What the connection can say now. */
  current(): ConnectResult {
    switch (this.#phase) {
      case 'open':
        return { status: 'connected' };
      case 'need_scan':
        if (this.#pairingCode) {
          return {
            status: 'need_scan',
            pairingCode: this.#pairingCode,
            message: 'Enter this code on the phone: WhatsApp > Linked devices > Link a device > Link with phone number instead',
          };
        }
        return { status: 'need_scan', ...(this.#qr ?? {}), message: 'Scan the QR code with the phone: WhatsApp > Linked devices > Link a device' };
      case 'connecting':
        return { status: 'connecting', message: this.#lastReason || 'Connecting to WhatsApp' };
      default:
        return { status: this.#lastStatus ?? 'disconnected', ...(this.#lastReason ? { message: this.#lastReason } : {}) };
    }
  }

  /** Waits for the next milestone (a QR code, a pairing code, open, or a stop), at most connect_timeout_ms; answers the state then. */
  #next(): Promise<ConnectResult> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(this.current());
      }, this.#deps.config.connect_timeout_ms);
      timer.unref();
      const waiter: Waiter = {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  /** Answers the connects waiting for a milestone, once the writes before it are done. */
  #settle(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    const result = this.current();
    this.#queue(() => {
      for (const w of waiters) w.resolve(result);
    });
  }

  /**
   * Connects (or joins the connecting already under way: one session, one socket). With a phone
   * number, pairing is by code. Answers at the first milestone.
   */
  async connect(request: { phoneNumber?: string }, reason: string): Promise<ConnectResult> {
    if (request.phoneNumber) this.#pairingPhone = digitsOf(request.phoneNumber);
    if (this.#phase === 'open') return this.current();
    if (this.#phase === 'need_scan') {
      // Switching to a pairing code while a QR code is shown: ask for one on the same socket.
      if (request.phoneNumber && !this.#pairingCode && this.#socket) await this.#requestPairingCode(this.#generation);
      return this.current();
    }
    const waiting = this.#next();
    // A connect counts its own attempts from 1, also when it joins a socket being opened.
    this.#attempt = 1;
    this.#failures = 0;
    // Idle, stopped, or waiting to reconnect: start now. Already opening a socket: join it.
    if (this.#phase !== 'connecting' || this.#timer) {
      this.#qrCount = 0;
      // Queued, not awaited: the phase changes in this turn, so a concurrent connect joins this one.
      const now = new Date().toISOString();
      this.#queue(() => this.#deps.store.setResume(this.sessionId, true, now));
      this.#begin(reason, true);
    }
    return waiting;
  }

  /** Starts a new socket now (the old one, if any, is dropped first); `announce`: report the reason even when already connecting. */
  #begin(reason: string, announce = false): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#phase = 'connecting';
    this.#lastReason = reason;
    this.#setStatus('connecting', reason, announce);
    // A new generation first: the old socket's close, which Baileys emits synchronously from end(), is then ignored.
    const generation = ++this.#generation;
    this.#drop();
    this.#opening = this.#open(generation).catch((err: unknown) => {
      this.#log.error({ err, sessionId: this.sessionId }, 'opening the WhatsApp socket failed');
      if (generation === this.#generation) this.#closed(generation, err);
    });
  }

  async #open(generation: number): Promise<void> {
    const { runtime, store, config, log } = this.#deps;
    // No socket without the session's lease: another instance may drive it.
    if (!(await this.#deps.lease(this.sessionId))) {
      if (generation === this.#generation) this.yield('another Wharf instance drives this session (it holds its lease)');
      return;
    }
    if (generation !== this.#generation) return;
    const proxyUrl = await this.#deps.host.proxyUrl(this.sessionId);
    let proxy: ProxyClients | undefined;
    if (proxyUrl) {
      try {
        proxy = await proxyClients(proxyUrl, this.#deps.proxyCheck);
      } catch (err) {
        if (!(err instanceof ProxyRefused)) throw err;
        // Never around the proxy: without it the session does not connect at all.
        if (generation === this.#generation)
          this.#stop('failed', `${err.message}; the session does not connect without its proxy: change or clear proxy_url, then connect`);
        return;
      }
      if (generation !== this.#generation) {
        await proxy.close();
        return;
      }
    }
    this.#proxyShown = proxy?.shown;
    const auth = await databaseAuthState(store, this.sessionId, runtime);
    // The account row exists from the first connect on: it says whether to resume at start.
    const account = await store.account(this.sessionId);
    this.#registered = account?.registered === 1;
    if (!account) {
      await auth.saveCreds();
      await store.setResume(this.sessionId, true, new Date().toISOString());
    }
    const socketConfig: UserFacingSocketConfig = {
      auth: auth.state,
      version: config.version.split('.').map(Number) as [number, number, number],
      waWebSocketUrl: config.websocket_url,
      logger: log.child({ network: 'whatsapp', sessionId: this.sessionId }, { level: config.log_level }),
      connectTimeoutMs: config.connect_timeout_ms,
      // The WebSocket and media uploads through the proxy (downloads: see `dispatcher`).
      ...(proxy ? { agent: proxy.agent, fetchAgent: proxy.agent } : {}),
      markOnlineOnConnect: (await this.#deps.host.session(this.sessionId))?.alwaysOnline ?? false,
      syncFullHistory: false,
      // Only what pairing brings (contacts, LID mappings, recent chats); never the full history.
      shouldSyncHistoryMessage: (msg) => msg.syncType !== runtime.proto.HistorySync.HistorySyncType.FULL,
      getMessage: async (key) => {
        const row = key.id ? await store.message(this.sessionId, key.id) : undefined;
        return row?.message ? runtime.proto.Message.decode(row.message) : undefined;
      },
      cachedGroupMetadata: async (jid) => this.#groups.get(jid),
      msgRetryCounterCache: this.#caches.retries,
      userDevicesCache: this.#caches.devices,
      callOfferCache: this.#caches.calls,
      placeholderResendCache: this.#caches.placeholders,
    };
    const socket = runtime.makeWASocket(socketConfig);
    if (generation !== this.#generation) {
      // Stopped or replaced while the socket was being made.
      await socket.end(undefined);
      await proxy?.close();
      return;
    }
    this.#socket = socket;
    this.#proxy = proxy;
    // An HTTP answer to the WebSocket upgrade (a proxy's 407, a refusal): Baileys forwards ws's
    // 'unexpected-response' without acting on it, and ws then leaves the attempt to its listener,
    // so it would hang. Failing the request makes ws report the error, and Baileys close with it.
    socket.ws.on('unexpected-response', (req: ClientRequest, res: IncomingMessage) => {
      res.resume();
      const status = `${res.statusCode} ${res.statusMessage ?? ''}`.trim();
      req.destroy(new Error(res.statusCode === 407 ? `the proxy refused its credentials (${status})` : `Unexpected server response: ${status}`));
    });
    this.#lastFrame = Date.now();
    socket.ws.on('frame', () => {
      if (generation === this.#generation) this.#lastFrame = Date.now();
    });
    // Acks and event batches are handled one after the other, in the order they came, in the
    // queue of this connection's writes (Baileys does not wait for one batch before the next).
    socket.ws.on('CB:ack,class:message', (node) => {
      this.#queue(() => (generation === this.#generation ? this.#deps.mapper.serverAck(this.sessionId, node) : undefined));
    });
    socket.ev.process(async (events) => {
      this.#queue(async () => {
        if (generation !== this.#generation) return;
        try {
          await this.#events(generation, socket, auth, events);
        } catch (err) {
          log.error({ err, sessionId: this.sessionId }, 'handling WhatsApp events failed');
        }
      });
    });
  }

  async #events(
    generation: number,
    socket: BaileysSocket,
    auth: Awaited<ReturnType<typeof databaseAuthState>>,
    events: Partial<BaileysEventMap>,
  ): Promise<void> {
    const creds = events['creds.update'];
    if (creds) {
      Object.assign(auth.state.creds, creds);
      await auth.saveCreds();
      this.#registered = isPaired(auth.state.creds);
    }
    const { 'connection.update': update, 'creds.update': _creds, ...rest } = events;
    if (Object.keys(rest).length) await this.#deps.mapper.handle({ sessionId: this.sessionId, socket, groups: this.#groups }, rest);
    if (update) await this.#connectionUpdate(generation, socket, update);
  }

  async #connectionUpdate(generation: number, socket: BaileysSocket, update: Partial<ConnectionState>): Promise<void> {
    if (update.qr) this.#pairing(generation, update.qr);
    if (update.connection === 'open') await this.#opened(socket);
    if (update.connection === 'close' && generation === this.#generation) this.#closed(generation, update.lastDisconnect?.error);
  }

  /** A QR code was issued: shown, or answered with a pairing code; counted against the cap. */
  #pairing(generation: number, qr: string): void {
    this.#recovered('reaches WhatsApp');
    this.#qrCount++;
    if (this.#qrCount > this.#deps.config.qr_max_codes) {
      this.#stop('disconnected', `pairing timed out: ${this.#deps.config.qr_max_codes} codes were not used; connect again to pair`);
      return;
    }
    this.#phase = 'need_scan';
    if (this.#pairingPhone) {
      // One code per socket: WhatsApp's QR rotation must not replace the code the user is typing.
      if (this.#codeGeneration !== generation) void this.#requestPairingCode(generation);
      return;
    }
    const qrImage = this.#deps.runtime.encodeQR(qr, 'gif', { scale: 6 });
    this.#qr = { qrCode: qr, qrImage: `data:image/gif;base64,${Buffer.from(qrImage).toString('base64')}` };
    this.#lastReason = 'scan the QR code';
    this.#lastStatus = 'need_scan';
    const reason = `QR code ${this.#qrCount} of at most ${this.#deps.config.qr_max_codes}: scan it with the phone`;
    this.#queue(() =>
      this.#deps.host.transaction(async () => {
        await this.#deps.host.setStatus(this.sessionId, 'need_scan', reason);
        await this.#deps.host.qrUpdated(this.sessionId, qr);
      }, [this.sessionId]),
    );
    this.#settle();
  }

  async #requestPairingCode(generation: number): Promise<void> {
    const socket = this.#socket;
    if (!socket || !this.#pairingPhone || generation !== this.#generation) return;
    this.#codeGeneration = generation;
    try {
      const code = await socket.requestPairingCode(this.#pairingPhone);
      if (generation !== this.#generation) return;
      this.#pairingCode = code;
      this.#qr = undefined;
      this.#phase = 'need_scan';
      this.#lastReason = 'enter the pairing code on the phone';
      this.#lastStatus = 'need_scan';
      this.#queue(() =>
        this.#deps.host.transaction(async () => {
          await this.#deps.host.setStatus(this.sessionId, 'need_scan', 'pairing code issued: enter it on the phone');
          await this.#deps.host.emit(this.sessionId, 'qrcode.updated', { pairingCode: code });
        }, [this.sessionId]),
      );
    } catch (err) {
      // The next QR tick tries again.
      this.#codeGeneration = -1;
      this.#log.warn({ err, sessionId: this.sessionId }, 'requesting a pairing code failed');
      this.#lastReason = `requesting a pairing code failed: ${(err as Error).message}`;
    }
    this.#settle();
  }

  async #opened(socket: BaileysSocket): Promise<void> {
    const { host, store } = this.#deps;
    const user = socket.user;
    const session = await host.session(this.sessionId);
    if (!user || !session) return;
    const number = userOf(user.id);
    if (number !== digitsOf(session.phoneNumber)) {
      // Another account scanned: it must not act as this session's number.
      const reason = `the paired account +${number} is not this session's number ${session.phoneNumber}; it was unlinked`;
      socket.logout(reason).catch(() => {});
      this.#stop('failed', reason, true);
      return;
    }
    const wasNew = this.#qrCount > 0 || this.#pairingCode !== undefined;
    this.#phase = 'open';
    this.#recovered('is connected');
    this.#qrCount = 0;
    this.#qr = undefined;
    this.#pairingCode = undefined;
    this.#pairingPhone = undefined;
    this.#lastFrame = Date.now();
    this.#lastReason = '';
    const me = { jid: normalizeJid(user.id), lid: user.lid ? normalizeJid(user.lid) : null, name: user.name ?? user.notify ?? null };
    this.#registered = true;
    this.#lastStatus = 'connected';
    this.#queue(() =>
      host.transaction(async () => {
        await store.setMe(this.sessionId, me, new Date().toISOString());
        if (me.lid) await store.setLid(this.sessionId, me.lid, me.jid);
        await host.setStatus(this.sessionId, 'connected', wasNew ? 'paired' : 'connected');
      }, [this.sessionId]),
    );
    this.#settle();
  }

  /** The socket of `generation` closed (or could not open). */
  #closed(generation: number, error: unknown): void {
    if (generation !== this.#generation || this.#phase === 'stopped') return;
    this.#socket = undefined;
    this.#releaseProxy();
    const code = closeCode(error);
    const message = error instanceof Error ? error.message : undefined;
    const cause = closeCause(error);
    const action = closeAction(code, message, cause);
    if (action.kind === 'stop') {
      this.#log.warn({ sessionId: this.sessionId, status: action.status }, `WhatsApp session ${this.sessionId} stopped (${action.status}): ${action.reason}`);
      this.#stop(action.status, action.reason, action.forget);
      return;
    }
    if (action.kind === 'restart') {
      this.#begin('restart required (515): reconnecting to finish pairing');
      return;
    }
    const why = describeClose(code, message, cause) + (this.#proxyShown ? ` (through the proxy ${this.#proxyShown})` : '');
    // The attempt that failed (0: an open connection dropped, which is no attempt of ours).
    const failed = this.#attempt;
    const limit = this.#attemptLimit();
    if (limit > 0 && failed >= limit) {
      const reason = this.#paired()
        ? `${why}; gave up after ${failed} failed attempts in a row (reconnect_max_attempts); connect again to retry`
        : `${why}; gave up after ${failed} failed attempts: the session is not paired yet, so it does not retry on its own; connect again to retry`;
      this.#log.warn({ sessionId: this.sessionId, status: 'failed' }, `WhatsApp session ${this.sessionId} gave up connecting: ${reason}`);
      this.#stop('failed', reason);
      return;
    }
    const next = failed + 1;
    this.#failures++;
    const { reconnect_initial_delay_ms: initial, reconnect_max_delay_ms: ceiling } = this.#deps.config;
    const delay = backoffDelay(this.#failures, initial, ceiling);
    this.#phase = 'connecting';
    this.#lastReason = `${why}; next attempt in ${(delay / 1000).toFixed(1)} s (attempt ${next}${limit > 0 ? ` of ${limit}` : ''})`;
    // Every failed attempt is stored, logged and announced, also when the status already is connecting.
    this.#setStatus('connecting', this.#lastReason, true);
    if (!this.#failing) {
      // One server log line when the trouble starts (and one when it ends): each attempt is in the session log.
      this.#failing = true;
      this.#log.warn(
        { sessionId: this.sessionId },
        `WhatsApp session ${this.sessionId} cannot connect: ${this.#lastReason} (every attempt is in its session log)`,
      );
    }
    // A connect waiting for its first milestone answers now, with the failure: no point waiting out connect_timeout_ms.
    this.#settle();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#phase !== 'connecting') return;
      this.#attempt = next;
      this.#begin(this.#lastReason);
    }, delay);
    this.#timer.unref();
  }

  /** Stops for good with a status: no socket, no reconnect; `forget` drops the pairing. */
  #stop(status: SessionStatus, reason: string, forget = false): void {
    this.#halt('stopped', reason);
    this.#pairingPhone = undefined;
    const now = new Date().toISOString();
    if (forget) this.#registered = false;
    this.#lastStatus = status;
    const { host, store } = this.#deps;
    this.#queue(() =>
      host.transaction(async () => {
        if (forget) await store.clearAuth(this.sessionId);
        else await store.setResume(this.sessionId, false, now);
        await host.setStatus(this.sessionId, status, reason);
      }, [this.sessionId]),
    );
    this.#settle();
  }

  /** Ends the current socket without letting its close event act. */
  #drop(): void {
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) socket.end(undefined).catch(() => {});
    this.#releaseProxy();
  }

  #releaseProxy(): void {
    const proxy = this.#proxy;
    this.#proxy = undefined;
    proxy?.close().catch(() => {});
  }

  /** Disconnects on request: the pairing stays, the session does not reconnect (not even at the next start). */
  async disconnect(by: string): Promise<ConnectResult> {
    await this.#readPaired();
    const reason = this.#paired()
      ? `${by}; the pairing is kept: connect resumes without scanning`
      : `${by}; the session was not paired yet: connect starts pairing again`;
    this.#stop('disconnected', reason);
    await this.#opening;
    await this.#writes;
    return { status: 'disconnected', message: reason };
  }

  /** Closes the socket and opens a new one (the pairing stays). */
  async restart(reason: string): Promise<ConnectResult> {
    const waiting = this.#next();
    this.#attempt = 1;
    this.#failures = 0;
    this.#begin(reason, true);
    return waiting;
  }

  /** Unlinks this device from the account (best effort), then forgets the pairing. */
  async logout(reason: string): Promise<void> {
    const socket = this.socket;
    if (socket) await socket.logout(reason).catch((err: unknown) => this.#log.warn({ err, sessionId: this.sessionId }, 'logging out failed'));
    this.#stop('logged_out', reason, true);
    await this.#opening;
    await this.#writes;
  }

  /** The server is stopping: the socket closes; a paired session resumes at the next start, one being paired does not (nobody is there to scan). */
  async shutdown(): Promise<void> {
    await this.#readPaired().catch(() => {});
    const wasActive = this.#phase !== 'stopped' && this.#phase !== 'idle';
    this.#phase = 'stopped';
    clearTimeout(this.#timer);
    this.#generation++;
    this.#drop();
    this.#settle();
    if (wasActive) {
      this.#setStatus(
        'disconnected',
        this.#paired() ? 'server stopping; reconnects when it starts' : 'server stopping while the session was not paired yet; connect again to pair',
      );
    }
    await this.#opening;
    await this.#writes;
  }

  /**
   * Another instance holds the session's lease (it took the session over, or this one could not
   * renew in time): the socket closes at once and nothing reconnects. No status is reported: the
   * instance that drives the session reports them.
   */
  yield(reason: string): void {
    if (this.#phase === 'idle' || this.#phase === 'stopped') return;
    this.#log.warn({ sessionId: this.sessionId }, `WhatsApp session ${this.sessionId}: ${reason}; its socket here is closed`);
    this.#halt('idle', reason);
    this.#settle();
  }

  /** Ends the socket and any reconnect under way, leaving the connection in `phase` (no status reported here). */
  #halt(phase: 'idle' | 'stopped', reason: string): void {
    this.#phase = phase;
    this.#lastReason = reason;
    this.#failing = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#generation++;
    this.#drop();
    this.#qr = undefined;
    this.#pairingCode = undefined;
  }

  /** The watchdog: an open socket silent for longer than watchdog_silence_seconds is replaced. */
  watch(now: number): void {
    const limit = this.#deps.config.watchdog_silence_seconds * 1000;
    if (limit <= 0 || this.#phase !== 'open') return;
    const silent = now - this.#lastFrame;
    if (silent > limit) this.#begin(`watchdog: nothing received for ${Math.round(silent / 1000)} s; reconnecting`);
  }
}
