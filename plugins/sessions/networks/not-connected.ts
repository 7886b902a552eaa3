/**
 * The 409 text for a session that cannot act now, shared by the gateway's check and the network
 * adapters' own (a socket gone between the two).
 */
import type { NetworkSession } from './types.ts';

/**
 * Why a session cannot act now, and what to do: while it is connecting or pairing, what is
 * happening (its status reason: the last attempt's failure and when the next one comes); otherwise
 * its status and why, and to connect it.
 */
export function notConnectedMessage(session: Pick<NetworkSession, 'id' | 'status' | 'statusReason'>): string {
  const { id, status, statusReason: reason } = session;
  if (status === 'connecting') return `Session ${id} is connecting${reason ? `: ${reason}` : ''}; poll GET /api/status until it is connected`;
  if (status === 'need_scan') return `Session ${id} is waiting to be paired${reason ? `: ${reason}` : ''}; poll GET /api/status until it is connected`;
  return `Session ${id} is not connected (status: ${status}${reason ? `: ${reason}` : ''}); connect it and poll GET /api/status`;
}
