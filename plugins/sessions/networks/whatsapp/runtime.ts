/**
 * What the WhatsApp adapter uses of Baileys (and the QR encoder) at run time: the one module that
 * loads them, imported only when a whatsapp session starts (`load.ts`). In the single executable
 * it is a bundle of its own, carried as an asset and evaluated on first use, so a server without
 * whatsapp sessions neither parses nor keeps it.
 */
export {
  BufferJSON,
  downloadMediaMessage,
  getAggregateVotesInPollMessage,
  getContentType,
  initAuthCreds,
  makeWASocket,
  normalizeMessageContent,
  proto,
  WAMessageStubType,
} from 'baileys';
export { default as encodeQR } from 'qr';
