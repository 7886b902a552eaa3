/**
 * Where a whatsapp session's pairing lives: Baileys' credentials and Signal keys in the sessions
 * plugin's tables, encrypted with the data dir's key and bound to their row; a set of key changes
 * stored whole or not at all (a failure inside the write, even through Baileys' own transaction
 * layer, leaves the keys as they were); a paired session resumed after a restart without a scan;
 * and Baileys not loaded at all by a server that has no whatsapp session to run.
 */
import { Boom } from '@hapi/boom';
import type { SignalDataTypeMap } from 'baileys';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { databaseAuthState } from '../../../../plugins/sessions/networks/whatsapp/auth-state.ts';
import type { WhatsAppNetwork } from '../../../../plugins/sessions/networks/whatsapp/index.ts';
import type { WhatsAppRuntime } from '../../../../plugins/sessions/networks/whatsapp/load.ts';
import { ScopedDb } from '../../../../plugins/sessions/scoped-db.ts';
import { WhatsAppStore } from '../../../../plugins/sessions/networks/whatsapp/store.ts';
import type { Sessions } from '../../../../plugins/sessions/service.ts';
import { type TestApp, tempDir } from '../../../helpers/app.ts';
import { FakeWhatsApp, mockedBaileys } from '../../../helpers/fake-whatsapp.ts';
import { call, connectedWhatsApp, eventsOf, startMessagingApp, statusOf, type Tenant, tenant, until, WHATSAPP_TEST_TOML, whatsappSession } from '../helpers.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const network = (fake.network = new FakeWhatsApp());

let app: TestApp;
let t: Tenant;
let runtime: WhatsAppRuntime;

beforeAll(async () => {
  app = await startMessagingApp(WHATSAPP_TEST_TOML);
  t = await tenant(app);
  runtime = (await import('../../../../plugins/sessions/networks/whatsapp/runtime.ts')) as WhatsAppRuntime;
});
afterAll(() => app?.close());

const adapterOf = (a: TestApp) => (a.running.services.sessions as Sessions).network({ type: 'whatsapp' } as never) as WhatsAppNetwork;

function keyPair(seed: number): SignalDataTypeMap['pre-key'] {
  return { public: Uint8Array.from({ length: 32 }, (_, i) => (i + seed) % 256), private: Uint8Array.from({ length: 32 }, (_, i) => (i * seed) % 256) };
}

describe('credentials and keys at rest', () => {
  it('are encrypted, bound to their row, and read back byte for byte', async () => {
    const s = await connectedWhatsApp(app, t.pat, network);
    const db = app.running.data;
    const account = (await db.one<{ creds_enc: string }>('SELECT creds_enc FROM sessions_whatsapp_accounts WHERE session_id = ?', [s.id]))!;
    expect(account.creds_enc).toMatch(/^v1\./);
    expect(account.creds_enc).not.toMatch(/noiseKey|signedIdentityKey|advSecretKey/);
    const store = new WhatsAppStore(new ScopedDb(db), app.running.keys);
    const auth = await databaseAuthState(store, s.id, runtime);
    // The credentials Baileys made come back whole: keys as bytes, the paired account.
    expect(auth.state.creds.noiseKey.private).toBeInstanceOf(Uint8Array);
    expect(auth.state.creds.noiseKey.private).toHaveLength(32);
    expect(auth.state.creds.me?.id).toBe(`${s.phone.slice(1)}:12@s.whatsapp.net`);

    await auth.state.keys.set({ 'pre-key': { '7': keyPair(7) }, 'app-state-sync-key': { AAAA: { keyData: Uint8Array.of(1, 2, 3), timestamp: 5 } } });
    const raw = (await db.value<string>("SELECT value_enc FROM sessions_whatsapp_keys WHERE session_id = ? AND type = 'pre-key' AND id = '7'", [s.id]))!;
    expect(raw).toMatch(/^v1\./);
    expect(await auth.state.keys.get('pre-key', ['7', '8'])).toEqual({
      '7': { public: Buffer.from(keyPair(7).public), private: Buffer.from(keyPair(7).private) },
    });
    const appState = (await auth.state.keys.get('app-state-sync-key', ['AAAA'])).AAAA!;
    expect(appState).toBeInstanceOf(runtime.proto.Message.AppStateSyncKeyData);
    expect(Buffer.from(appState.keyData!)).toEqual(Buffer.from([1, 2, 3]));
    // A ciphertext moved to another row does not decrypt there.
    await db.run("INSERT INTO sessions_whatsapp_keys (session_id, type, id, value_enc) VALUES (?, 'pre-key', '9', ?)", [s.id, raw]);
    await expect(Promise.resolve().then(() => auth.state.keys.get('pre-key', ['9']))).rejects.toThrow();
    // Deleting is a null.
    await auth.state.keys.set({ 'pre-key': { '7': null, '9': null } });
    expect(await auth.state.keys.get('pre-key', ['7', '9'])).toEqual({});
  });
});

describe('a set of key changes', () => {
  it('is stored whole or not at all: a failure part-way leaves every key as it was', async () => {
    const s = await whatsappSession(app, t.pat);
    let writes = 0;
    let failAt = Number.POSITIVE_INFINITY;
    const keys = app.running.keys;
    // The data-dir key fails on one write: as a crash, a full disk or a bug would, mid-transaction.
    const flaky = {
      encrypt: (plain: string, context: string) => {
        if (++writes === failAt) throw new Error('disk I/O error');
        return keys.encrypt(plain, context);
      },
      decrypt: (enc: string, context: string) => keys.decrypt(enc, context),
    };
    const store = new WhatsAppStore(new ScopedDb(app.running.data), flaky);
    const auth = await databaseAuthState(store, s.id, runtime);
    const before = { 'pre-key': { '1': keyPair(1), '2': keyPair(2) }, session: { '4915112345678.0': Uint8Array.of(9, 9, 9) } };
    await auth.state.keys.set(before);
    failAt = writes + 3;
    await expect(
      Promise.resolve().then(() =>
        auth.state.keys.set({
          'pre-key': { '1': null, '3': keyPair(3) },
          session: { '4915112345678.0': Uint8Array.of(1), '4915187654321.0': Uint8Array.of(2) },
        }),
      ),
    ).rejects.toThrow('disk I/O error');
    expect(Object.keys(await auth.state.keys.get('pre-key', ['1', '2', '3'])).sort()).toEqual(['1', '2']);
    const sessions = await auth.state.keys.get('session', ['4915112345678.0', '4915187654321.0']);
    expect(Object.keys(sessions)).toEqual(['4915112345678.0']);
    expect(Buffer.from(sessions['4915112345678.0']!)).toEqual(Buffer.from([9, 9, 9]));
  });

  it("through Baileys' own transaction layer: a commit that fails leaves the keys as they were", async () => {
    const s = await whatsappSession(app, t.pat);
    let fail = false;
    const keys = app.running.keys;
    const store = new WhatsAppStore(new ScopedDb(app.running.data), {
      encrypt: (plain: string, context: string) => {
        if (fail && context.endsWith(':session:b.0')) throw new Error('crash inside keys.set');
        return keys.encrypt(plain, context);
      },
      decrypt: (enc: string, context: string) => keys.decrypt(enc, context),
    });
    const auth = await databaseAuthState(store, s.id, runtime);
    await auth.state.keys.set({ session: { 'a.0': Uint8Array.of(1) } });
    const { addTransactionCapability } = await import('baileys');
    const logger = app.running.log.child({}, { level: 'silent' });
    const transactional = addTransactionCapability(auth.state.keys, logger, { maxCommitRetries: 2, delayBetweenTriesMs: 1 });
    fail = true;
    await expect(
      transactional.transaction(async () => {
        await transactional.set({ session: { 'a.0': Uint8Array.of(2), 'b.0': Uint8Array.of(3) }, 'pre-key': { '5': keyPair(5) } });
      }, 'test'),
    ).rejects.toThrow('crash inside keys.set');
    fail = false;
    const after = await auth.state.keys.get('session', ['a.0', 'b.0']);
    expect(Object.keys(after)).toEqual(['a.0']);
    expect(Buffer.from(after['a.0']!)).toEqual(Buffer.from([1]));
    expect(await auth.state.keys.get('pre-key', ['5'])).toEqual({});
  });
});

describe('a restart', () => {
  it('resumes a connected session without a scan, leaves one disconnected by request alone, and says a session being paired does not resume', async () => {
    const dataDir = tempDir();
    const first = await startMessagingApp(WHATSAPP_TEST_TOML, { dataDir });
    const owner = await tenant(first);
    const resumed = await connectedWhatsApp(first, owner.pat, network);
    const stopped = await connectedWhatsApp(first, owner.pat, network);
    expect((await call(first, owner.pat, 'POST', `/api/whatsapp-sessions/${stopped.id}/disconnect`)).status).toBe(200);
    const pairing = await whatsappSession(first, owner.pat);
    expect((await call(first, owner.pat, 'POST', `/api/whatsapp-sessions/${pairing.id}/connect`, {})).body.data.status).toBe('need_scan');
    await first.close();

    const second = await startMessagingApp(WHATSAPP_TEST_TOML, { dataDir });
    try {
      await until(async () => (await statusOf(second, resumed.id)) === 'connected', 'resumed', 10_000);
      expect(await statusOf(second, stopped.id)).toBe('disconnected');
      // Stopping said so; starting resumed it.
      expect((await eventsOf(second, resumed.id)).slice(-3).map((e) => e.payload.data)).toEqual([
        { status: 'disconnected', reason: 'server stopping; reconnects when it starts' },
        { status: 'connecting', reason: 'server started: resuming' },
        { status: 'connected', reason: 'connected' },
      ]);
      // Nobody is there to scan a QR code: the session being paired stays disconnected, and was told so.
      expect(await statusOf(second, pairing.id)).toBe('disconnected');
      expect((await eventsOf(second, pairing.id)).slice(-1).map((e) => e.payload.data)).toEqual([
        { status: 'disconnected', reason: 'server stopping while the session was not paired yet; connect again to pair' },
      ]);
      // It sends at once, with the keys it had.
      expect((await call(second, resumed.apiKey, 'GET', '/api/user')).body.data.id).toBe(`${resumed.phone.slice(1)}@s.whatsapp.net`);
    } finally {
      await second.close();
    }
  });
});

describe('Baileys', () => {
  it('is not loaded by a server without a whatsapp session to run, even one with never-connected whatsapp sessions', async () => {
    const idle = await startMessagingApp(WHATSAPP_TEST_TOML);
    try {
      const owner = await tenant(idle);
      await whatsappSession(idle, owner.pat);
      await call(idle, owner.pat, 'POST', '/api/sandbox-sessions', { name: 'Box' });
      const adapter = adapterOf(idle);
      // The supervisor has run (every 2 s): nothing to resume, nothing loaded.
      await new Promise((r) => setTimeout(r, 2500));
      expect(adapter.loaded).toBe(false);
    } finally {
      await idle.close();
    }
    expect(adapterOf(app).loaded).toBe(true);
  });
});
