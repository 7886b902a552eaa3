/**
 * Baileys' authentication state (credentials and Signal keys) in the sessions plugin's database,
 * not in files: encrypted at rest (`store.ts`), and every `keys.set()` written in one
 * transaction, so a crash part-way through leaves the keys as they were before it (the "Bad MAC"
 * failures of a session whose key files were torn mid-write cannot happen). Baileys batches the
 * key changes of one operation into one `set` (its transaction layer over this store).
 */
import type { AuthenticationCreds, AuthenticationState, SignalDataSet, SignalDataTypeMap, SignalKeyStore } from 'baileys';
import type { WhatsAppRuntime } from './load.ts';
import type { WhatsAppStore } from './store.ts';

/** The auth state of one session, and what the adapter does with it besides Baileys. */
export interface DatabaseAuthState {
  state: AuthenticationState;
  /** Writes the credentials as they are now (after a `creds.update`). */
  saveCreds(): Promise<void>;
}

/**
 * Whether pairing completed: the phone signed this device's identity (`account`, set on
 * pair-success). `me` alone is not enough: requesting a pairing code sets it before the phone confirms.
 */
export function isPaired(creds: Pick<AuthenticationCreds, 'account' | 'me'>): boolean {
  return creds.account !== undefined && creds.account !== null && creds.me?.id !== undefined;
}

export async function databaseAuthState(
  store: WhatsAppStore,
  sessionId: number,
  runtime: Pick<WhatsAppRuntime, 'BufferJSON' | 'initAuthCreds' | 'proto'>,
): Promise<DatabaseAuthState> {
  const { BufferJSON, proto } = runtime;
  const stored = await store.creds(sessionId);
  const creds: AuthenticationCreds = stored === undefined ? runtime.initAuthCreds() : JSON.parse(stored, BufferJSON.reviver);
  const now = () => new Date().toISOString();

  const keys: SignalKeyStore = {
    async get<T extends keyof SignalDataTypeMap>(type: T, ids: string[]) {
      const found: { [id: string]: SignalDataTypeMap[T] } = {};
      for (const id of ids) {
        const json = await store.key(sessionId, type, id);
        if (json === undefined) continue;
        let value = JSON.parse(json, BufferJSON.reviver);
        if (type === 'app-state-sync-key') value = proto.Message.AppStateSyncKeyData.fromObject(value);
        found[id] = value;
      }
      return found;
    },
    async set(data: SignalDataSet) {
      const changes: { type: string; id: string; json: string | null }[] = [];
      for (const [type, values] of Object.entries(data)) {
        for (const [id, value] of Object.entries(values ?? {})) {
          changes.push({ type, id, json: value === null || value === undefined ? null : JSON.stringify(value, BufferJSON.replacer) });
        }
      }
      await store.setKeys(sessionId, changes);
    },
  };

  return {
    state: { creds, keys },
    saveCreds() {
      return store.saveCreds(sessionId, JSON.stringify(creds, BufferJSON.replacer), isPaired(creds), now());
    },
  };
}
