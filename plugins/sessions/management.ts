/**
 * Account-level operations on sessions: create (a sandbox session is connected from birth), read,
 * update settings (checked first: proxy, webhook URL, a number used once per organization),
 * delete, connect / pair / disconnect / restart through the session's network, replace the API
 * key or the webhook secret, and the session's logs. Every change is written with its audit row
 * in one transaction.
 */
import { randomUUID } from 'node:crypto';
import { ConstraintError } from '../../core/db.ts';
import { type FieldErrors, WharfError } from '../../core/errors.ts';
import { newSessionKey, newWebhookSecret } from './credentials.ts';
import type { ConnectRequest, ConnectResult, PairingQr } from './networks/types.ts';
import { requireAdapter, requireConnected, type Sessions } from './service.ts';
import type { AuditRow, MessageRow, MessageStatus, Page, SessionChanges, StatusLogRow } from './store.ts';
import type { Account, SessionRecord, SessionType, SigningMode } from './types.ts';

/** Settings a caller may give at creation or change later (the proxy URL is stored encrypted, apart). */
export type SessionSettings = SessionChanges & { proxy_url?: string | null };

/** A session with the secrets a single-session read shows. */
export interface SessionDetail {
  session: SessionRecord;
  apiKey: string;
  webhookSecret: string;
  proxyUrl: string | null;
}

function invalid(fields: FieldErrors): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields });
}

function isUniqueViolation(err: unknown): boolean {
  return err instanceof ConstraintError && err.kind === 'unique';
}

const NUMBER_TAKEN = { phone_number: ['phone_number is already used by another session of this organization'] };

function changesOf(input: SessionSettings): SessionChanges {
  const { proxy_url: _proxy, ...rest } = input;
  return rest;
}

export class SessionAdmin {
  readonly #sessions: Sessions;
  readonly #checkProxy: (url: string) => Promise<string | null>;

  constructor(sessions: Sessions, options: { checkProxy(url: string): Promise<string | null> }) {
    this.#sessions = sessions;
    this.#checkProxy = options.checkProxy;
  }

  /** The organization's sessions with their API keys. */
  async list(account: Account): Promise<{ session: SessionRecord; apiKey: string }[]> {
    const { store } = this.#sessions;
    const list = [];
    for (const session of await store.sessionsOfOrg(account.orgId)) list.push({ session, apiKey: (await store.secrets(session.id)).apiKey });
    return list;
  }

  async detail(session: SessionRecord): Promise<SessionDetail> {
    return { session, ...(await this.#sessions.store.secrets(session.id)) };
  }

  /** Creates a session (and, for a network without pairing, connects it) in one transaction: all or nothing. */
  async create(account: Account, input: SessionSettings & { name: string }, type: SessionType): Promise<SessionDetail> {
    const sessions = this.#sessions;
    const { store } = sessions;
    if (type === 'whatsapp' && !input.phone_number) throw invalid({ phone_number: ['phone_number is required'] });
    await this.#check(account.orgId, input, null);
    const key = newSessionKey();
    const now = new Date().toISOString();
    try {
      const created = await sessions.transaction(async () => {
        const id = await store.insertSession(
          {
            ...changesOf(input),
            orgId: account.orgId,
            type,
            status: 'disconnected',
            name: input.name,
            phoneNumber: input.phone_number ?? `pending:${randomUUID()}`,
          },
          { apiKey: key.key, apiKeyHash: key.hash, webhookSecret: newWebhookSecret() },
          now,
        );
        if (!input.phone_number) {
          let phone = `+1555${String(id).padStart(7, '0')}`;
          for (let n = 1; await store.sessionByPhone(account.orgId, phone); n++) phone = `+1555${String(id).padStart(7, '0')}${n}`;
          await store.updateSession(id, { phone_number: phone }, now);
        }
        if (input.proxy_url) await store.setProxyUrl(id, input.proxy_url, now);
        const session = (await store.session(id))!;
        await sessions.audit(session, account.actor, 'session.created', { type, fields: Object.keys(input).filter((k) => k !== 'proxy_url') });
        // A network without pairing has its sessions connected from birth, reported like any connection.
        const network = sessions.network(session);
        if (network && network.capabilities.pairing.length === 0) await sessions.host(type)!.setStatus(id, 'connected', `${type} session created`);
        return (await store.session(id))!;
      });
      return this.detail(created);
    } catch (err) {
      if (isUniqueViolation(err)) throw invalid(NUMBER_TAKEN);
      throw err;
    }
  }

  async update(account: Account, session: SessionRecord, input: SessionSettings): Promise<SessionDetail> {
    const { store } = this.#sessions;
    if (Object.keys(input).length === 0) throw invalid({ body: ['send at least one field to update'] });
    await this.#check(account.orgId, input, session.id);
    const now = new Date().toISOString();
    try {
      await this.#sessions.transaction(async () => {
        await store.updateSession(session.id, changesOf(input), now);
        if (input.proxy_url !== undefined) await store.setProxyUrl(session.id, input.proxy_url, now);
        await this.#sessions.audit(session, account.actor, 'session.updated', { fields: Object.keys(input) });
      }, [session.id]);
    } catch (err) {
      if (isUniqueViolation(err)) throw invalid(NUMBER_TAKEN);
      throw err;
    }
    return this.detail((await store.session(session.id))!);
  }

  /** Sets or clears the proxy (checked like any setting). */
  async setProxy(account: Account, session: SessionRecord, proxyUrl: string | null): Promise<SessionDetail> {
    const { store } = this.#sessions;
    await this.#check(account.orgId, { proxy_url: proxyUrl }, session.id);
    await this.#sessions.transaction(async () => {
      await store.setProxyUrl(session.id, proxyUrl, new Date().toISOString());
      await this.#sessions.audit(session, account.actor, 'session.proxy_updated', { proxy: proxyUrl === null ? 'cleared' : 'set' });
    }, [session.id]);
    return this.detail((await store.session(session.id))!);
  }

  /** Deletes a session: its network forgets it, a last session.status is recorded, its key stops working. */
  async remove(account: Account, session: SessionRecord): Promise<void> {
    const sessions = this.#sessions;
    await sessions.network(session)?.forget(session);
    await sessions.transaction(async () => {
      await sessions.emit(session.id, 'session.status', { status: 'disconnected', reason: 'session deleted' });
      await sessions.audit(session, account.actor, 'session.deleted', { name: session.name, phone_number: session.phoneNumber });
      await sessions.store.deleteSession(session.id);
    }, [session.id]);
  }

  async connect(account: Account, session: SessionRecord, request: ConnectRequest): Promise<ConnectResult> {
    const network = this.#sessions.network(session);
    requireAdapter(session, network);
    if (request.phoneNumber && !network.capabilities.pairing.includes('phone_code')) {
      throw invalid({ phone_number: [`a ${session.type} session does not pair by phone code`] });
    }
    const result = await network.connect(session, request);
    await this.#sessions.audit(session, account.actor, 'session.connect', { status: result.status });
    return result;
  }

  /** The current pairing QR code and its image; 409 for a network that pairs without one. */
  async qrCode(session: SessionRecord): Promise<PairingQr> {
    const network = this.#sessions.network(session);
    requireAdapter(session, network);
    const { pairing } = network.capabilities;
    if (!pairing.includes('qr') || !network.qrCode) {
      throw new WharfError(
        'conflict',
        pairing.length === 0
          ? `A ${session.type} session is always connected and needs no QR code`
          : `A ${session.type} session pairs by phone code, not by QR code`,
      );
    }
    return network.qrCode(session);
  }

  async disconnect(account: Account, session: SessionRecord): Promise<ConnectResult> {
    const network = this.#sessions.network(session);
    const result = network ? await network.disconnect(session) : { status: session.status, message: 'Session is not connected' };
    await this.#sessions.audit(session, account.actor, 'session.disconnect', { status: result.status });
    return result;
  }

  async restart(account: Account, session: SessionRecord): Promise<ConnectResult> {
    const sessions = this.#sessions;
    const network = sessions.network(session);
    requireConnected(session, network);
    const result = await network.restart(session);
    await sessions.transaction(async () => {
      await sessions.sessionLog(session.id, 'session_restarted', result.status);
      await sessions.audit(session, account.actor, 'session.restart', { status: result.status });
    }, [session.id]);
    return result;
  }

  /** Replaces the API key; the old one fails from the next request on. Returns the new key. */
  async regenerateKey(account: Account, session: SessionRecord): Promise<string> {
    const key = newSessionKey();
    await this.#sessions.transaction(async () => {
      await this.#sessions.store.setApiKey(session.id, key.key, key.hash, new Date().toISOString());
      await this.#sessions.audit(session, account.actor, 'session.api_key_regenerated');
    }, [session.id]);
    return key.key;
  }

  async setSigning(account: Account, session: SessionRecord, mode: SigningMode): Promise<void> {
    await this.#sessions.transaction(async () => {
      await this.#sessions.store.updateSession(session.id, { webhook_signing: mode }, new Date().toISOString());
      await this.#sessions.audit(session, account.actor, 'session.webhook_signing_updated', { mode });
    }, [session.id]);
  }

  /**
   * Replaces the webhook secret in one transaction with the rotation hooks and the audit row;
   * returns the new secret and until when the old one still signs deliveries (null: not kept).
   */
  rotateWebhookSecret(account: Account, session: SessionRecord): Promise<{ secret: string; previousValidUntil: Date | null }> {
    const sessions = this.#sessions;
    const secret = newWebhookSecret();
    return sessions.transaction(async () => {
      const rotatedAt = new Date();
      const previousSecret = (await sessions.store.secrets(session.id)).webhookSecret;
      await sessions.store.setWebhookSecret(session.id, secret, rotatedAt.toISOString());
      const previousValidUntil = await sessions.secretRotated({ sessionId: session.id, orgId: session.orgId, previousSecret, rotatedAt });
      await sessions.audit(session, account.actor, 'session.webhook_secret_rotated', { previous_valid_until: previousValidUntil?.toISOString() ?? null });
      return { secret, previousValidUntil };
    }, [session.id]);
  }

  messageLogs(session: SessionRecord, options: { status?: MessageStatus; page: number; perPage: number }): Promise<Page<MessageRow>> {
    return this.#sessions.store.messageLogs(session.id, options);
  }

  statusLogs(session: SessionRecord, page: number, perPage: number): Promise<Page<StatusLogRow>> {
    return this.#sessions.store.statusLogs(session.id, page, perPage);
  }

  auditLogs(session: SessionRecord, page: number, perPage: number): Promise<Page<AuditRow>> {
    return this.#sessions.store.auditLogs(session.id, session.orgId, page, perPage);
  }

  /** Checks that need I/O or other rows (proxy, webhook URL, phone number in use): 422 naming each field. */
  async #check(orgId: string, input: SessionSettings, sessionId: number | null): Promise<void> {
    const fields: FieldErrors = {};
    if (input.proxy_url) {
      const problem = await this.#checkProxy(input.proxy_url);
      if (problem) fields.proxy_url = [problem];
    }
    if (input.webhook_url) {
      const problem = await this.#sessions.checkWebhookUrl(input.webhook_url);
      if (problem) fields.webhook_url = [problem];
    }
    if (input.phone_number) {
      const other = await this.#sessions.store.sessionByPhone(orgId, input.phone_number);
      if (other && other.id !== sessionId) fields.phone_number = [`phone_number is already used by session ${other.id} of this organization`];
    }
    if (Object.keys(fields).length) throw invalid(fields);
  }
}
