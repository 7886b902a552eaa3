/**
 * The {@link NetworkHost} a network adapter reports through: status changes with the session
 * log, the message log's acks, inbound messages with the session's filters, and every event.
 * One host per network: its lookups see that network's sessions only. Every call joins the
 * current transaction (of the async context), in which the session row is read once.
 */
import { VIEW_OF_CHAT } from './events.ts';
import type { MessageKey, NetworkHost, ReceiptStatus } from './networks/types.ts';
import type { EventRecorder } from './recorder.ts';
import { STATUS_RANK, type SessionsStore } from './store.ts';
import type { SessionRecord, SessionType } from './types.ts';

export function networkHost(type: SessionType, store: SessionsStore, recorder: EventRecorder): NetworkHost {
  const now = () => new Date().toISOString();
  const transaction = <T>(fn: () => Promise<T>, sessions?: readonly number[]): Promise<T> => recorder.transaction(fn, sessions);
  const ofType = (session: SessionRecord | undefined) => (session?.type === type ? session : undefined);
  return {
    transaction,
    session: async (id) => ofType(await store.session(id)),
    sessionByPhone: (orgId, phoneNumber) => store.sessionByPhone(orgId, phoneNumber, type),
    proxyUrl: async (sessionId) => (ofType(await store.session(sessionId)) ? (await store.secrets(sessionId)).proxyUrl : null),
    emit: async (sessionId, event, data) => {
      await recorder.emit(sessionId, event, data);
    },
    setStatus: (sessionId, status, reason, options) =>
      transaction(async () => {
        const session = await store.session(sessionId);
        if (!session) return;
        const changed = session.status !== status;
        // The same status again is news only when the adapter says so (a reconnect attempt that failed).
        if (!changed && !(options?.repeat && reason && reason !== session.statusReason)) return;
        const at = now();
        await store.setStatus(sessionId, status, reason ?? null, at);
        await store.statusLog(sessionId, changed ? 'status_change' : 'status_update', status, reason ?? null, at);
        await recorder.emit(sessionId, 'session.status', reason ? { status, reason } : { status });
      }, [sessionId]),
    qrUpdated: async (sessionId, qr) => {
      await recorder.emit(sessionId, 'qrcode.updated', { qr });
    },
    sent: (sessionId, msgId, key, message, timestamp) =>
      transaction(async () => {
        const session = await store.session(sessionId);
        if (!session) return;
        await store.messageSent(sessionId, msgId, key, session.logMessages ? message : null, timestamp, now());
        await recorder.emit(sessionId, 'messages.upsert', { key, message, pushName: session.name, messageTimestamp: timestamp });
        await recorder.emit(sessionId, 'message.sent', { key, message, status: 'sent', msgId });
      }, [sessionId]),
    failed: (sessionId, msgId, error) =>
      transaction(async () => {
        const row = await store.message(sessionId, msgId);
        if (!row) return;
        await store.messageFailed(sessionId, msgId, error, now());
        await recorder.emit(sessionId, 'messages.update', [{ key: JSON.parse(row.remote_key) as MessageKey, update: { status: 'error' }, msgId }]);
      }, [sessionId]),
    receipt: (sessionId, key, status: ReceiptStatus, userJid) =>
      transaction(async () => {
        const row = await store.messageByKey(sessionId, key.id);
        if (row && STATUS_RANK[status] > STATUS_RANK[row.status] && row.status !== 'failed') {
          await store.messageStatus(row.id, status, now());
          await recorder.emit(sessionId, 'messages.update', [{ key, update: { status }, msgId: row.id }]);
        }
        await recorder.emit(sessionId, 'message-receipt.update', [
          { key, receipt: { userJid, status, t: Math.floor(Date.now() / 1000) }, ...(row ? { msgId: row.id } : {}) },
        ]);
      }, [sessionId]),
    inbound: (sessionId, message) =>
      transaction(async () => {
        const session = await store.session(sessionId);
        if (!session) return false;
        if (message.chat === 'group' && session.ignoreGroups) return false;
        if (message.chat === 'newsletter' && session.ignoreChannels) return false;
        if (message.chat === 'broadcast' && session.ignoreBroadcasts) return false;
        const data = { key: message.key, message: message.message, pushName: message.pushName, messageTimestamp: message.messageTimestamp };
        await recorder.emit(sessionId, 'messages.upsert', data);
        await recorder.emit(sessionId, 'messages.received', data);
        if (message.chat !== 'broadcast') await recorder.emit(sessionId, VIEW_OF_CHAT[message.chat], data);
        return true;
      }, [sessionId]),
  };
}
