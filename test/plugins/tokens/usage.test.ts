// lastUsedAt in batches (plugins/tokens/usage.ts) on both engines: many uses of a token within a
// window are one write of the latest time, written within the window without any read, at once
// by a flush, never moved backwards, kept for the next flush when a write fails, and written by
// a graceful stop of the server (the plugin's close) even when the window has not passed.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbHandle } from '../../../core/db.ts';
import { openPostgres } from '../../../core/db-postgres.ts';
import { openSqlite } from '../../../core/db-sqlite.ts';
import { createLogger } from '../../../core/logger.ts';
import { migrate } from '../../../core/migrations.ts';
import { migrations } from '../../../plugins/tokens/migrations.ts';
import { TokensStore } from '../../../plugins/tokens/store.ts';
import { LastUsed } from '../../../plugins/tokens/usage.ts';
import { startApp, tempDir } from '../../helpers/app.ts';
import { signIn } from '../../helpers/identity.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { createApp, createToken } from '../../helpers/storage.ts';

const log = createLogger('silent');

describe.each(['sqlite', 'postgres'] as const)('lastUsedAt in batches on %s', (engine) => {
  let db: DbHandle;
  let store: TokensStore;
  const lastUsed = (id: string) => db.value<string | null>('SELECT last_used_at FROM tokens_app_tokens WHERE id = ?', [id]);

  beforeAll(async () => {
    db =
      engine === 'sqlite' ? openSqlite(path.join(tempDir(), 'usage.db')) : await openPostgres(await freshDatabase(), { poolSize: 3, connectTimeoutMs: 5000 });
    await migrate(db, [{ plugin: 'tokens', migrations }]);
    store = new TokensStore(db);
    for (const id of ['a', 'b', 'c', 'd'])
      await store.insert({ id, appId: 'app', name: id, hash: `hash-${id}`, prefix: 'svc_live_abcdefg', now: '2026-11-25T10:00:00.000Z' });
  });
  afterAll(async () => {
    await db?.close();
  });

  it('keeps uses in memory until a flush, then writes each token once with its latest time', async () => {
    const usage = new LastUsed(store, 60_000, log);
    const before = new Date().toISOString();
    await usage.touch('a');
    await usage.touch('b');
    await new Promise((r) => setTimeout(r, 5));
    await usage.touch('a');
    const latest = new Date().toISOString();
    expect(await lastUsed('a')).toBeNull();
    expect(await lastUsed('b')).toBeNull();
    await usage.flush();
    const a = (await lastUsed('a'))!;
    const b = (await lastUsed('b'))!;
    expect(a).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(b >= before && b < a && a <= latest).toBe(true);
    // Nothing left: a second flush writes nothing.
    await db.run('UPDATE tokens_app_tokens SET last_used_at = NULL WHERE id = ?', ['b']);
    await usage.flush();
    expect(await lastUsed('b')).toBeNull();
  });

  it('writes within the window without a flush, and never moves a time backwards', async () => {
    const usage = new LastUsed(store, 50, log);
    await usage.touch('c');
    await expect.poll(() => lastUsed('c'), { timeout: 5000 }).not.toBeNull();
    const future = '2999-01-01T00:00:00.000Z';
    await db.run('UPDATE tokens_app_tokens SET last_used_at = ? WHERE id = ?', [future, 'c']);
    await usage.touch('c');
    await usage.flush();
    expect(await lastUsed('c')).toBe(future);
  });

  it('keeps the times of a failed write for the next flush', async () => {
    let fail = true;
    const flaky = new Proxy(store, {
      get(target, name) {
        if (name === 'touchMany' && fail) return async () => Promise.reject(new Error('database is locked'));
        const value = Reflect.get(target, name, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const usage = new LastUsed(flaky, 60_000, log);
    await usage.touch('d');
    await usage.flush();
    expect(await lastUsed('d')).toBeNull();
    fail = false;
    await usage.flush();
    expect(await lastUsed('d')).not.toBeNull();
  });
});

describe('lastUsedAt and a graceful stop', () => {
  it('a validation within the window is written when the server stops', async () => {
    const dataDir = tempDir();
    // The longest window: the stop comes well before it passes.
    const toml = '[plugins.tokens]\nlast_used_flush_ms = 1000\n';
    const first = await startApp(toml, { dataDir });
    let tokenId: string;
    const before = new Date().toISOString();
    try {
      const owner = await signIn(first);
      const mine = await createApp(first, owner, 'usage');
      const token = await createToken(first, owner, mine.id, 'usage');
      tokenId = (await first.running.data.value<string>("SELECT id FROM tokens_app_tokens WHERE name = 'usage'"))!;
      const res = await first.request('POST', '/api/tokens/validate', { body: { token } });
      expect(res.status).toBe(200);
    } finally {
      await first.close();
    }
    const second = await startApp(toml, { dataDir });
    try {
      const stored = await second.running.data.value<string>('SELECT last_used_at FROM tokens_app_tokens WHERE id = ?', [tokenId!]);
      expect(stored! >= before).toBe(true);
    } finally {
      await second.close();
    }
  });
});
