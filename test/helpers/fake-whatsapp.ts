/**
 * A stand-in for the live WhatsApp network (which cannot be reached from here), at the level of
 * Baileys' socket: `FakeWhatsApp.makeSocket` has `makeWASocket`'s signature and answers the
 * `BaileysSocket` type the adapter uses (plugins/sessions/networks/whatsapp/socket.ts), so a call
 * the adapter makes with wrong arguments fails `tsc` against Baileys' own declarations; at run
 * time every call is checked again (JIDs of the right kind, known enums), recorded, and a send's
 * content goes through Baileys' real `generateWAMessage`, which refuses a content Baileys would
 * not send (and encrypts media exactly as Baileys does, onto a fake media CDN).
 *
 * Events come out in the shapes Baileys 7 emits them, through Baileys' real event buffer: pairing
 * (QR codes, creds.update, the 515 restart, open), LID-addressed messages with remoteJidAlt,
 * group messages with participant/participantAlt, the server's ack on the WebSocket, delivery and
 * read receipts, reactions, edits and revokes, group changes. Accounts of the fake network talk
 * to each other, like sandbox sessions do. `replay` hands a recorded batch to a session as one
 * buffered flush.
 *
 * Tests mock the `baileys` module with `mockedBaileys(real)` so the adapter's `makeWASocket`
 * builds these sockets and its media downloads reach the fake CDN; everything else of Baileys is real.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type {
  AnyMessageContent,
  BaileysEventMap,
  BinaryNode,
  GroupMetadata,
  MiscMessageGenerationOptions,
  proto,
  UserFacingSocketConfig,
  WAMessage,
  WAMessageKey,
  WAPresence,
} from 'baileys';
import type { BaileysSocket } from '../../plugins/sessions/networks/whatsapp/socket.ts';

type Baileys = typeof import('baileys');
type Boom = typeof import('@hapi/boom').Boom;

const PN = /^[1-9]\d{5,19}(:\d+)?@s\.whatsapp\.net$/;
const LID = /^\d{6,20}(:\d+)?@lid$/;
const GROUP = /^\d[\d-]{5,40}@g\.us$/;
const NEWSLETTER = /^\d{6,30}@newsletter$/;

/** Throws when a value the adapter passed does not have the shape Baileys expects. */
function expectShape(ok: boolean, what: string, value: unknown): void {
  if (!ok) throw new TypeError(`fake WhatsApp: ${what}, got ${JSON.stringify(value)}`);
}
const isUserJid = (v: unknown) => typeof v === 'string' && (PN.test(v) || LID.test(v));
const isChatJid = (v: unknown) => typeof v === 'string' && (PN.test(v) || LID.test(v) || GROUP.test(v) || NEWSLETTER.test(v));
const digitsOf = (jid: string) => jid.split('@')[0]!.split(':')[0]!;

export interface Account {
  digits: string;
  lid: string;
  name: string;
  blocked: Set<string>;
  /** Received messages, by id (for read receipts and re-uploads). */
  received: Map<string, { from: string; key: WAMessageKey; group: string | null }>;
}

interface Group {
  jid: string;
  subject: string;
  desc: string | undefined;
  owner: string;
  creation: number;
  announce: boolean;
  restrict: boolean;
  code: string;
  /** Member digits -> role. */
  members: Map<string, 'admin' | 'superadmin' | null>;
}

interface CdnEntry {
  bytes: Buffer;
  expired: boolean;
}

/** One recorded call of the adapter on a socket. */
export interface Call {
  sessionId: number;
  method: string;
  args: unknown[];
}

export class FakeWhatsApp {
  baileys!: Baileys;
  Boom!: Boom;
  readonly accounts = new Map<string, Account>();
  readonly groups = new Map<string, Group>();
  readonly cdn = new Map<string, CdnEntry>();
  readonly sockets: FakeSocket[] = [];
  readonly calls: Call[] = [];
  /** Recipients whose sends the server refuses with an error ack (digits). */
  readonly unreachable = new Set<string>();
  /** While set, every new socket is closed at once with this status code (the server is unreachable, say). */
  refuse: number | undefined;
  /** While true, the server's acks and deliveries wait (`releaseAcks`): a send stays accepted. */
  holdAcks = false;
  readonly #held: (() => void)[] = [];

  releaseAcks(): void {
    this.holdAcks = false;
    for (const run of this.#held.splice(0)) run();
  }

  /** Runs `fn` now, or when acks are released. */
  later(fn: () => void): void {
    if (this.holdAcks) this.#held.push(fn);
    else setImmediate(fn);
  }
  #pairingCodes = new Map<string, FakeSocket>();

  /** Registers a WhatsApp user of the fake network (a phone with WhatsApp). */
  account(phone: string, name = `User ${phone.slice(-4)}`): Account {
    const digits = phone.replace(/\D/g, '');
    let account = this.accounts.get(digits);
    if (!account) {
      // A stable LID, unlike the number (WhatsApp's are random too).
      const lid = `2${digits.padStart(14, '0').split('').reverse().join('')}`;
      account = { digits, lid, name, blocked: new Set(), received: new Map() };
      this.accounts.set(digits, account);
    }
    return account;
  }

  accountOfJid(jid: string): Account | undefined {
    const user = digitsOf(jid);
    if (jid.endsWith('@lid')) return [...this.accounts.values()].find((a) => a.lid === user);
    return this.accounts.get(user);
  }

  /** The socket of a session (the last one made for it), by the session id its logger carries. */
  socketOf(sessionId: number): FakeSocket | undefined {
    return this.sockets.filter((s) => s.sessionId === sessionId).at(-1);
  }

  /** Open sockets of an account. */
  online(digits: string): FakeSocket[] {
    return this.sockets.filter((s) => s.isOpen && s.account?.digits === digits);
  }

  /** `makeWASocket`, as the mocked module exports it. */
  makeSocket = (config: UserFacingSocketConfig): BaileysSocket => {
    const socket = new FakeSocket(this, config);
    this.sockets.push(socket);
    return socket;
  };

  /** The phone scans the QR code a session shows: pairing completes (creds.update, then the 515 restart). */
  scan(sessionId: number, phone: string, name?: string): void {
    const socket = this.socketOf(sessionId);
    if (!socket?.qr) throw new Error(`session ${sessionId} shows no QR code`);
    socket.pair(this.account(phone, name));
  }

  /** The phone enters a pairing code. */
  enterCode(code: string, phone: string, name?: string): void {
    const socket = this.#pairingCodes.get(code);
    if (!socket) throw new Error(`no socket issued pairing code ${code}`);
    socket.pair(this.account(phone, name));
  }

  registerCode(code: string, socket: FakeSocket): void {
    this.#pairingCodes.set(code, socket);
  }

  /** Media upload for `generateWAMessage`: the encrypted file onto the fake CDN. */
  upload = async (encFilePath: string, opts: { mediaType: string }) => {
    const directPath = `/v/t62.7118-24/${randomBytes(12).toString('hex')}.enc?ccb=11-4&oh=fake&mms3=true`;
    this.cdn.set(directPath.split('?')[0]!, { bytes: fs.readFileSync(encFilePath), expired: false });
    expectShape(typeof opts.mediaType === 'string', 'a media type', opts);
    return { mediaUrl: `https://mmg.whatsapp.net${directPath}`, directPath };
  };

  /** A fetch dispatcher that serves the CDN (Node's fetch, legacy handler callbacks): 410 for expired media. */
  readonly dispatcher = {
    dispatch: (opts: { origin?: string | URL; path: string; method?: string }, handler: Record<string, (...args: unknown[]) => void>) => {
      const origin = String(opts.origin ?? '');
      const entry = origin.includes('whatsapp.net') ? this.cdn.get(opts.path.split('?')[0]!) : undefined;
      const status = !entry ? 404 : entry.expired ? 410 : 200;
      const body = status === 200 ? entry!.bytes : Buffer.from(status === 410 ? 'gone' : 'not found');
      queueMicrotask(() => {
        handler.onConnect?.(() => {});
        handler.onHeaders?.(status, [Buffer.from('content-type'), Buffer.from('application/octet-stream')], () => {}, status === 200 ? 'OK' : 'Gone');
        handler.onData?.(body);
        handler.onComplete?.([]);
      });
      return true;
    },
    close() {},
    destroy() {},
    on() {
      return this;
    },
    once() {
      return this;
    },
    off() {
      return this;
    },
  };

  /** Marks every CDN file expired (WhatsApp keeps media a limited time; the phone can upload it again). */
  expireMedia(): void {
    for (const entry of this.cdn.values()) entry.expired = true;
  }

  record(sessionId: number, method: string, args: unknown[]): void {
    this.calls.push({ sessionId, method, args });
  }

  callsOf(sessionId: number, method?: string): Call[] {
    return this.calls.filter((c) => c.sessionId === sessionId && (!method || c.method === method));
  }
}

/** A socket of the fake network. */
export class FakeSocket {
  readonly network: FakeWhatsApp;
  readonly config: UserFacingSocketConfig;
  readonly sessionId: number;
  readonly ev: ReturnType<Baileys['makeEventBuffer']>;
  readonly ws = new EventEmitter();
  readonly signalRepository: BaileysSocket['signalRepository'];
  account: Account | undefined;
  qr: string | undefined;
  isOpen = false;
  closed = false;
  qrCount = 0;
  /** Frames arriving (the keep-alive pongs of a live socket); `silence()` stops them. */
  #frames: NodeJS.Timeout | undefined;

  constructor(network: FakeWhatsApp, config: UserFacingSocketConfig) {
    this.network = network;
    this.config = config;
    const bindings = (config.logger as unknown as { bindings(): Record<string, unknown> }).bindings();
    this.sessionId = Number(bindings.sessionId);
    expectShape(Array.isArray(config.version) && config.version.length === 3, 'a version of three numbers', config.version);
    expectShape(typeof config.getMessage === 'function', 'a getMessage', typeof config.getMessage);
    this.ev = network.baileys.makeEventBuffer(config.logger!);
    this.signalRepository = {
      lidMapping: {
        getLIDForPN: async (pn: string) => {
          this.#record('getLIDForPN', [pn]);
          expectShape(PN.test(pn), 'a phone-number JID', pn);
          const account = network.accountOfJid(pn);
          return account ? `${account.lid}@lid` : null;
        },
        getPNForLID: async (lid: string) => {
          this.#record('getPNForLID', [lid]);
          expectShape(LID.test(lid), 'a LID', lid);
          const account = network.accountOfJid(lid);
          return account ? `${account.digits}@s.whatsapp.net` : null;
        },
      },
    };
    const creds = config.auth.creds;
    setImmediate(() => {
      if (this.closed) return;
      this.ev.emit('connection.update', { connection: 'connecting', receivedPendingNotifications: false, qr: undefined });
      if (network.refuse !== undefined) {
        void this.end(this.#boom('Connection Terminated', network.refuse));
        return;
      }
      if (creds.me && creds.account) {
        this.account = network.account(digitsOf(creds.me.id));
        this.#open();
      } else {
        this.rotateQr();
      }
    });
  }

  #record(method: string, args: unknown[]): void {
    this.network.record(this.sessionId, method, args);
  }

  get #creds() {
    return this.config.auth.creds;
  }

  get user() {
    const me = this.#creds.me;
    return me ? { ...me } : undefined;
  }

  #boom(message: string, statusCode: number, data?: unknown) {
    return new this.network.Boom(message, { statusCode, ...(data === undefined ? {} : { data }) });
  }

  /** A query error as Baileys raises it: WhatsApp's code in `data`. */
  #refusal(text: string, code: number) {
    return new this.network.Boom(text, { data: code });
  }

  #requireOpen(): void {
    if (!this.isOpen) throw this.#boom('Connection Closed', 428);
  }

  get #me(): Account {
    this.#requireOpen();
    return this.account!;
  }

  /** Issues the next QR code (WhatsApp rotates them every 20 s). */
  rotateQr(): void {
    if (this.closed || this.isOpen) return;
    this.qrCount++;
    const ref = randomBytes(12).toString('base64');
    this.qr = `2@${ref},${Buffer.from(this.#creds.noiseKey.public).toString('base64')},${Buffer.from(this.#creds.signedIdentityKey.public).toString('base64')},${this.#creds.advSecretKey}`;
    this.ev.emit('connection.update', { qr: this.qr });
  }

  /** The phone confirmed pairing: credentials as configureSuccessfulPairing leaves them, then the server asks for a restart. */
  pair(account: Account): void {
    this.account = account;
    const device = 12;
    this.ev.buffer();
    this.ev.emit('creds.update', {
      me: { id: `${account.digits}:${device}@s.whatsapp.net`, name: account.name, lid: `${account.lid}:${device}@lid` },
      account: { details: randomBytes(16), accountSignatureKey: randomBytes(32), accountSignature: randomBytes(64), deviceSignature: randomBytes(64) },
      platform: 'smba',
      signalIdentities: [{ identifier: { name: `${account.digits}:${device}@s.whatsapp.net`, deviceId: 0 }, identifierKey: randomBytes(33) }],
    });
    this.ev.emit('connection.update', { isNewLogin: true, qr: undefined });
    this.ev.flush();
    this.qr = undefined;
    setImmediate(() => this.end(this.#boom('Stream Errored (restart required)', 515)));
  }

  #open(): void {
    this.isOpen = true;
    this.ev.emit('creds.update', { me: { ...this.#creds.me!, lid: `${this.account!.lid}:12@lid` } });
    this.ev.emit('connection.update', { connection: 'open' });
    this.ev.emit('connection.update', { receivedPendingNotifications: true });
    this.ws.emit('frame', { tag: 'success', attrs: {} });
    this.#frames = setInterval(() => this.ws.emit('frame', { tag: 'iq', attrs: { type: 'result' } }), 100);
    this.#frames.unref();
  }

  /** The connection stays open but nothing arrives any more (what the watchdog is for). */
  silence(): void {
    clearInterval(this.#frames);
  }

  /** The server (or the network) closes the connection with this error. */
  async end(error: Error | undefined): Promise<void> {
    if (this.closed) return;
    this.#record('end', [error?.message]);
    this.closed = true;
    this.isOpen = false;
    clearInterval(this.#frames);
    this.ev.emit('connection.update', { connection: 'close', lastDisconnect: { error, date: new Date() } });
    this.ev.removeAllListeners('connection.update');
  }

  async logout(msg?: string): Promise<void> {
    this.#record('logout', [msg]);
    await this.end(this.#boom(msg ?? 'Intentional Logout', 401));
  }

  async requestPairingCode(phoneNumber: string): Promise<string> {
    this.#record('requestPairingCode', [phoneNumber]);
    expectShape(/^\d{7,15}$/.test(phoneNumber), 'digits of a phone number', phoneNumber);
    const code = randomBytes(5).toString('hex').toUpperCase().slice(0, 8);
    this.network.registerCode(code, this);
    this.#creds.me = { id: `${phoneNumber}@s.whatsapp.net`, name: '~' };
    return code;
  }

  /** Hands the session a batch of events, buffered and flushed together as Baileys does. */
  replay(batch: Partial<BaileysEventMap>): void {
    this.ev.buffer();
    for (const [event, data] of Object.entries(batch)) this.ev.emit(event as keyof BaileysEventMap, data as never);
    this.ev.flush();
  }

  // Messages

  async sendMessage(jid: string, content: AnyMessageContent, options: MiscMessageGenerationOptions = {}): Promise<WAMessage | undefined> {
    this.#record('sendMessage', [jid, content, options]);
    expectShape(isChatJid(jid), 'a chat JID', jid);
    const me = this.#me;
    const { baileys } = this.network;
    if (options.messageId !== undefined) expectShape(/^[0-9A-F]{16,64}$/i.test(options.messageId), 'a message id', options.messageId);
    if (options.quoted) expectShape(typeof options.quoted.key?.id === 'string' && options.quoted.message !== undefined, 'a quoted WAMessage', options.quoted);
    // Baileys builds the message: an impossible content throws here, as it would live.
    const msg = await baileys.generateWAMessage(jid, content, {
      userJid: `${me.digits}:12@s.whatsapp.net`,
      upload: this.network.upload as never,
      logger: this.config.logger,
      ...options,
    });
    if ('react' in content) {
      expectShape(typeof content.react.key?.id === 'string' && isChatJid(content.react.key.remoteJid), 'a reaction key', content.react);
      setImmediate(() => this.#reaction(msg, content.react));
      return msg;
    }
    if ('edit' in content && content.edit) {
      expectShape(typeof content.edit.id === 'string', 'an edited key', content.edit);
      setImmediate(() =>
        this.#everywhere(jid, content.edit!, (s, key) =>
          s.ev.emit('messages.update', [{ key, update: { message: { editedMessage: { message: { conversation: (content as { text: string }).text } } } } }]),
        ),
      );
      return msg;
    }
    if ('delete' in content) {
      expectShape(typeof content.delete.id === 'string', 'a deleted key', content.delete);
      setImmediate(() =>
        this.#everywhere(jid, content.delete, (s, key) =>
          s.ev.emit('messages.update', [{ key, update: { message: null, messageStubType: baileys.WAMessageStubType.REVOKE, key } }]),
        ),
      );
      return msg;
    }
    this.ev.emit('messages.upsert', { messages: [msg], type: 'append' });
    this.network.later(() => this.#deliver(jid, msg));
    return msg;
  }

  /** The server's ack, then delivery to the recipients online and their receipts. */
  #deliver(jid: string, msg: WAMessage): void {
    const me = this.account!;
    const id = msg.key.id!;
    const target = GROUP.test(jid) ? undefined : this.network.accountOfJid(jid);
    if (!GROUP.test(jid) && this.network.unreachable.has(target?.digits ?? digitsOf(jid))) {
      this.ev.emit('messages.update', [{ key: msg.key, update: { status: 0, messageStubParameters: ['479'] } }]);
      return;
    }
    this.ws.emit('CB:ack,class:message', {
      tag: 'ack',
      attrs: { class: 'message', id, from: jid, t: String(Math.floor(Date.now() / 1000)) },
    } satisfies BinaryNode);
    const ts = Math.floor(Date.now() / 1000);
    if (GROUP.test(jid)) {
      const group = this.network.groups.get(jid);
      if (!group) return;
      for (const digits of group.members.keys()) {
        if (digits === me.digits) continue;
        for (const socket of this.network.online(digits)) {
          const key: WAMessageKey = {
            remoteJid: jid,
            fromMe: false,
            id,
            participant: `${me.lid}@lid`,
            participantAlt: `${me.digits}@s.whatsapp.net`,
            addressingMode: 'lid',
          };
          socket.account!.received.set(id, { from: me.digits, key: msg.key, group: jid });
          socket.ev.emit('messages.upsert', { messages: [{ key, message: msg.message, pushName: me.name, messageTimestamp: ts }], type: 'notify' });
          this.ev.emit('message-receipt.update', [{ key: msg.key, receipt: { userJid: `${digits}@s.whatsapp.net`, receiptTimestamp: ts } }]);
        }
      }
      return;
    }
    if (!target || target.blocked.has(me.digits)) return;
    for (const socket of this.network.online(target.digits)) {
      const key: WAMessageKey = { remoteJid: `${me.lid}@lid`, remoteJidAlt: `${me.digits}@s.whatsapp.net`, fromMe: false, id, addressingMode: 'lid' };
      socket.account!.received.set(id, { from: me.digits, key: msg.key, group: null });
      socket.ev.emit('messages.upsert', { messages: [{ key, message: msg.message, pushName: me.name, messageTimestamp: ts }], type: 'notify' });
      this.ev.emit('messages.update', [{ key: msg.key, update: { status: 3, messageTimestamp: ts } }]);
    }
  }

  /** Runs `fn` on this socket and on the other party's, each with the key as it sees the message. */
  #everywhere(jid: string, key: WAMessageKey, fn: (socket: FakeSocket, key: WAMessageKey) => void): void {
    fn(this, key);
    const me = this.account!;
    if (GROUP.test(jid)) {
      const group = this.network.groups.get(jid);
      for (const digits of group?.members.keys() ?? []) {
        if (digits === me.digits) continue;
        for (const socket of this.network.online(digits)) {
          fn(socket, { remoteJid: jid, fromMe: false, id: key.id, participant: `${me.lid}@lid`, participantAlt: `${me.digits}@s.whatsapp.net` });
        }
      }
      return;
    }
    const target = this.network.accountOfJid(jid);
    for (const socket of target ? this.network.online(target.digits) : []) {
      fn(socket, { remoteJid: `${me.lid}@lid`, remoteJidAlt: `${me.digits}@s.whatsapp.net`, fromMe: false, id: key.id });
    }
  }

  #reaction(msg: WAMessage, react: proto.Message.IReactionMessage): void {
    const target = react.key!;
    const received = this.account!.received.get(target.id!);
    const reactionKey = msg.key;
    this.ev.emit('messages.reaction', [{ key: target, reaction: { key: reactionKey, text: react.text, senderTimestampMs: Date.now() } }]);
    if (!received) return;
    for (const socket of this.network.online(received.from)) {
      const me = this.account!;
      socket.ev.emit('messages.reaction', [
        {
          key: received.key,
          reaction: {
            key: {
              remoteJid: received.group ?? `${me.lid}@lid`,
              fromMe: false,
              id: reactionKey.id,
              ...(received.group ? { participant: `${me.lid}@lid` } : {}),
            },
            text: react.text,
            senderTimestampMs: Date.now(),
          },
        },
      ]);
    }
  }

  async readMessages(keys: WAMessageKey[]): Promise<void> {
    this.#record('readMessages', [keys]);
    const me = this.#me;
    for (const key of keys) {
      expectShape(typeof key.id === 'string' && isChatJid(key.remoteJid), 'a message key', key);
      const received = me.received.get(key.id!);
      if (!received) continue;
      const ts = Math.floor(Date.now() / 1000);
      for (const socket of this.network.online(received.from)) {
        if (received.group)
          socket.ev.emit('message-receipt.update', [{ key: received.key, receipt: { userJid: `${me.digits}@s.whatsapp.net`, readTimestamp: ts } }]);
        else socket.ev.emit('messages.update', [{ key: received.key, update: { status: 4 } }]);
      }
    }
  }

  async sendPresenceUpdate(type: WAPresence, toJid?: string): Promise<void> {
    this.#record('sendPresenceUpdate', [type, toJid]);
    expectShape(['unavailable', 'available', 'composing', 'recording', 'paused'].includes(type), 'a presence', type);
    expectShape(toJid === undefined || isChatJid(toJid), 'a chat JID', toJid);
    this.#requireOpen();
  }

  async updateMediaMessage(message: WAMessage): Promise<WAMessage> {
    this.#record('updateMediaMessage', [message.key]);
    expectShape(typeof message.key.id === 'string' && isChatJid(message.key.remoteJid), 'the key of the media message', message.key);
    this.#requireOpen();
    const content = this.network.baileys.normalizeMessageContent(message.message);
    const type = content && this.network.baileys.getContentType(content);
    const media = type && (content![type] as { directPath?: string; url?: string });
    const entry = media?.directPath ? this.network.cdn.get(media.directPath.split('?')[0]!) : undefined;
    if (!entry) throw this.#refusal('media not found on the phone', 404);
    // The phone uploads the file again: a new path on the CDN.
    const directPath = `/v/t62.7118-24/${randomBytes(12).toString('hex')}.enc`;
    this.network.cdn.set(directPath, { bytes: entry.bytes, expired: false });
    media!.directPath = directPath;
    media!.url = `https://mmg.whatsapp.net${directPath}`;
    return message;
  }

  async rejectCall(callId: string, callFrom: string): Promise<void> {
    this.#record('rejectCall', [callId, callFrom]);
    expectShape(typeof callId === 'string' && isUserJid(callFrom), 'a call id and its caller', [callId, callFrom]);
  }

  // Contacts and lookups

  async onWhatsApp(...phoneNumber: string[]): Promise<{ jid: string; exists: boolean }[] | undefined> {
    this.#record('onWhatsApp', phoneNumber);
    for (const p of phoneNumber) expectShape(PN.test(p), 'a phone-number JID', p);
    this.#requireOpen();
    return phoneNumber.filter((p) => this.network.accounts.has(digitsOf(p))).map((p) => ({ jid: `${digitsOf(p)}@s.whatsapp.net`, exists: true }));
  }

  async profilePictureUrl(jid: string, type?: 'preview' | 'image'): Promise<string | undefined> {
    this.#record('profilePictureUrl', [jid, type]);
    expectShape(isChatJid(jid), 'a JID', jid);
    this.#requireOpen();
    throw this.#refusal('item-not-found', 404);
  }

  async updateBlockStatus(jid: string, action: 'block' | 'unblock'): Promise<void> {
    this.#record('updateBlockStatus', [jid, action]);
    expectShape(isUserJid(jid) && (action === 'block' || action === 'unblock'), 'a user JID and block/unblock', [jid, action]);
    const me = this.#me;
    if (action === 'block') me.blocked.add(digitsOf(jid));
    else me.blocked.delete(digitsOf(jid));
  }

  async addOrEditContact(jid: string, contact: proto.SyncActionValue.IContactAction): Promise<void> {
    this.#record('addOrEditContact', [jid, contact]);
    expectShape(PN.test(jid) && typeof contact.fullName === 'string', 'a phone-number JID and a contact action with fullName', [jid, contact]);
    this.#requireOpen();
  }

  // Groups

  #metadata(group: Group): GroupMetadata {
    return {
      id: group.jid,
      addressingMode: 'lid' as GroupMetadata['addressingMode'],
      subject: group.subject,
      owner: `${this.network.account(group.owner).lid}@lid`,
      ownerPn: `${group.owner}@s.whatsapp.net`,
      creation: group.creation,
      desc: group.desc,
      announce: group.announce,
      restrict: group.restrict,
      size: group.members.size,
      participants: [...group.members].map(([digits, admin]) => ({
        id: `${this.network.account(digits).lid}@lid`,
        phoneNumber: `${digits}@s.whatsapp.net`,
        admin,
      })),
    };
  }

  /** The group, when this account is in it; WhatsApp's 404 / 403 otherwise. */
  #member(jid: string): { group: Group; admin: boolean } {
    expectShape(GROUP.test(jid), 'a group JID', jid);
    const me = this.#me;
    const group = this.network.groups.get(jid);
    if (!group) throw this.#refusal('item-not-found', 404);
    if (!group.members.has(me.digits)) throw this.#refusal('forbidden', 403);
    return { group, admin: group.members.get(me.digits) !== null };
  }

  #toMembers(group: Group, event: 'groups.upsert' | 'groups.update' | 'group-participants.update', data: unknown, extra: string[] = []): void {
    for (const digits of new Set([...group.members.keys(), ...extra])) {
      for (const socket of this.network.online(digits)) socket.ev.emit(event, data as never);
    }
  }

  async groupCreate(subject: string, participants: string[]): Promise<GroupMetadata> {
    this.#record('groupCreate', [subject, participants]);
    for (const p of participants) expectShape(PN.test(p), 'participants as phone-number JIDs', p);
    const me = this.#me;
    const jid = `120363${String(Math.floor(Math.random() * 1e12)).padStart(12, '0')}@g.us`;
    const group: Group = {
      jid,
      subject,
      desc: undefined,
      owner: me.digits,
      creation: Math.floor(Date.now() / 1000),
      announce: false,
      restrict: false,
      code: randomBytes(16).toString('base64url').slice(0, 22),
      members: new Map([[me.digits, 'superadmin']]),
    };
    for (const p of participants) if (digitsOf(p) !== me.digits) group.members.set(this.network.account(digitsOf(p)).digits, null);
    this.network.groups.set(jid, group);
    const metadata = this.#metadata(group);
    this.#toMembers(group, 'groups.upsert', [metadata]);
    return metadata;
  }

  async groupMetadata(jid: string): Promise<GroupMetadata> {
    this.#record('groupMetadata', [jid]);
    return this.#metadata(this.#member(jid).group);
  }

  async groupFetchAllParticipating(): Promise<{ [_: string]: GroupMetadata }> {
    this.#record('groupFetchAllParticipating', []);
    const me = this.#me;
    const all: { [_: string]: GroupMetadata } = {};
    for (const group of this.network.groups.values()) if (group.members.has(me.digits)) all[group.jid] = this.#metadata(group);
    return all;
  }

  async groupParticipantsUpdate(jid: string, participants: string[], action: 'add' | 'remove' | 'promote' | 'demote' | 'modify') {
    this.#record('groupParticipantsUpdate', [jid, participants, action]);
    for (const p of participants) expectShape(PN.test(p), 'participants as phone-number JIDs', p);
    expectShape(['add', 'remove', 'promote', 'demote'].includes(action), 'a participant action', action);
    const { group, admin } = this.#member(jid);
    const changed: string[] = [];
    const results = participants.map((p) => {
      const account = this.network.account(digitsOf(p));
      const answer = (status: string) => ({ status, jid: `${account.lid}@lid`, content: { tag: 'participant', attrs: { jid: p } } as BinaryNode });
      if (!admin) return answer('403');
      const member = group.members.has(account.digits);
      if (action === 'add') {
        if (member) return answer('409');
        group.members.set(account.digits, null);
      } else if (!member) {
        return answer('404');
      } else if (action === 'remove') {
        group.members.delete(account.digits);
      } else {
        group.members.set(account.digits, action === 'promote' ? 'admin' : null);
      }
      changed.push(account.digits);
      return answer('200');
    });
    if (changed.length) {
      this.#toMembers(
        group,
        'group-participants.update',
        {
          id: group.jid,
          author: `${this.account!.lid}@lid`,
          participants: changed.map((d) => ({ id: `${this.network.account(d).lid}@lid`, phoneNumber: `${d}@s.whatsapp.net` })),
          action,
        },
        action === 'remove' ? changed : [],
      );
    }
    return results;
  }

  async groupUpdateSubject(jid: string, subject: string): Promise<void> {
    this.#record('groupUpdateSubject', [jid, subject]);
    const { group, admin } = this.#member(jid);
    if (group.restrict && !admin) throw this.#refusal('not-authorized', 401);
    group.subject = subject;
    this.#toMembers(group, 'groups.update', [{ id: jid, subject }]);
  }

  async groupUpdateDescription(jid: string, description?: string): Promise<void> {
    this.#record('groupUpdateDescription', [jid, description]);
    const { group, admin } = this.#member(jid);
    if (group.restrict && !admin) throw this.#refusal('not-authorized', 401);
    group.desc = description;
    this.#toMembers(group, 'groups.update', [{ id: jid, desc: description }]);
  }

  async groupSettingUpdate(jid: string, setting: 'announcement' | 'not_announcement' | 'locked' | 'unlocked'): Promise<void> {
    this.#record('groupSettingUpdate', [jid, setting]);
    expectShape(['announcement', 'not_announcement', 'locked', 'unlocked'].includes(setting), 'a group setting', setting);
    const { group, admin } = this.#member(jid);
    if (!admin) throw this.#refusal('not-authorized', 401);
    if (setting === 'announcement' || setting === 'not_announcement') group.announce = setting === 'announcement';
    else group.restrict = setting === 'locked';
    this.#toMembers(group, 'groups.update', [{ id: jid, announce: group.announce, restrict: group.restrict }]);
  }

  async groupLeave(id: string): Promise<void> {
    this.#record('groupLeave', [id]);
    const { group } = this.#member(id);
    const me = this.account!;
    group.members.delete(me.digits);
    this.#toMembers(
      group,
      'group-participants.update',
      { id, author: `${me.lid}@lid`, participants: [{ id: `${me.lid}@lid`, phoneNumber: `${me.digits}@s.whatsapp.net` }], action: 'remove' },
      [me.digits],
    );
  }

  async groupInviteCode(jid: string): Promise<string | undefined> {
    this.#record('groupInviteCode', [jid]);
    const { group, admin } = this.#member(jid);
    if (!admin) throw this.#refusal('not-authorized', 401);
    return group.code;
  }

  async groupGetInviteInfo(code: string): Promise<GroupMetadata> {
    this.#record('groupGetInviteInfo', [code]);
    this.#requireOpen();
    const group = [...this.network.groups.values()].find((g) => g.code === code);
    if (!group) throw this.#refusal('item-not-found', 404);
    return this.#metadata(group);
  }

  async groupAcceptInvite(code: string): Promise<string | undefined> {
    this.#record('groupAcceptInvite', [code]);
    const me = this.#me;
    const group = [...this.network.groups.values()].find((g) => g.code === code);
    if (!group) throw this.#refusal('item-not-found', 404);
    if (!group.members.has(me.digits)) {
      group.members.set(me.digits, null);
      this.#toMembers(group, 'group-participants.update', {
        id: group.jid,
        author: `${me.lid}@lid`,
        participants: [{ id: `${me.lid}@lid`, phoneNumber: `${me.digits}@s.whatsapp.net` }],
        action: 'add',
      });
    }
    return group.jid;
  }
}

/** The `baileys` module as tests mock it: `makeWASocket` makes fake sockets, downloads reach the fake CDN. */
export function mockedBaileys(real: Baileys, network: FakeWhatsApp, boom: Boom): Baileys {
  network.baileys = real;
  network.Boom = boom;
  return {
    ...real,
    makeWASocket: network.makeSocket as unknown as Baileys['makeWASocket'],
    downloadMediaMessage: ((message, type, options, ctx) =>
      real.downloadMediaMessage(
        message,
        type,
        { ...options, options: { ...options?.options, dispatcher: network.dispatcher } as unknown as RequestInit },
        ctx,
      )) as Baileys['downloadMediaMessage'],
  };
}
