/**
 * The part of Baileys' socket the WhatsApp adapter uses, as Baileys' own types declare it. The
 * adapter calls nothing else of a socket, so a test can stand a fake in for the real one that
 * implements exactly this type: a call the adapter makes with the wrong arguments fails `tsc`
 * against Baileys' declarations. Types only: nothing of Baileys loads with this file.
 */
import type { EventEmitter } from 'node:events';
import type { UserFacingSocketConfig, WASocket } from 'baileys';

/** Methods the adapter calls on a socket. */
type SocketMethods =
  | 'end'
  | 'logout'
  | 'requestPairingCode'
  | 'sendMessage'
  | 'readMessages'
  | 'sendPresenceUpdate'
  | 'onWhatsApp'
  | 'profilePictureUrl'
  | 'updateBlockStatus'
  | 'addOrEditContact'
  | 'groupCreate'
  | 'groupMetadata'
  | 'groupParticipantsUpdate'
  | 'groupUpdateSubject'
  | 'groupUpdateDescription'
  | 'groupSettingUpdate'
  | 'groupLeave'
  | 'groupInviteCode'
  | 'groupGetInviteInfo'
  | 'groupAcceptInvite'
  | 'groupFetchAllParticipating'
  | 'updateMediaMessage'
  | 'rejectCall';

/** A connected (or connecting) Baileys socket, as far as the adapter uses it. */
export type BaileysSocket = Pick<WASocket, SocketMethods> & {
  /** Events, batched as Baileys buffers them (`process`). */
  readonly ev: Pick<WASocket['ev'], 'process'>;
  /**
   * The WebSocket client: the adapter listens to `frame` (every frame received, for the watchdog)
   * and to `CB:ack,class:message` (the server's ack of a message this socket sent).
   */
  readonly ws: Pick<EventEmitter, 'on' | 'off'>;
  /** The paired account, once the connection is open. */
  readonly user: WASocket['user'];
  readonly signalRepository: { readonly lidMapping: Pick<WASocket['signalRepository']['lidMapping'], 'getLIDForPN' | 'getPNForLID'> };
};

/** Makes a socket: Baileys' `makeWASocket`, or a test's fake with the same signature. */
export type MakeSocket = (config: UserFacingSocketConfig) => BaileysSocket;
