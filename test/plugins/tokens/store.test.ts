// The tokens plugin's store on both engines, through its migrations: the same answers on SQLite
// and PostgreSQL (the HTTP behaviour is covered by test/plugins/storage/tokens.test.ts, which
// needs the storage plugin, SQLite-only for now).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConstraintError, type DbHandle } from '../../../core/db.ts';
import { openPostgres } from '../../../core/db-postgres.ts';
import { openSqlite } from '../../../core/db-sqlite.ts';
import { migrate } from '../../../core/migrations.ts';
import { migrations } from '../../../plugins/tokens/migrations.ts';
import { TokensStore } from '../../../plugins/tokens/store.ts';
import { tempDir } from '../../helpers/app.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

describe.each(['sqlite', 'postgres'] as const)('the tokens store on %s', (engine) => {
  let db: DbHandle;
  let store: TokensStore;

  beforeAll(async () => {
    db =
      engine === 'sqlite' ? openSqlite(path.join(tempDir(), 'tokens.db')) : await openPostgres(await freshDatabase(), { poolSize: 3, connectTimeoutMs: 5000 });
    await migrate(db, [{ plugin: 'tokens', migrations }]);
    store = new TokensStore(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  const token = (id: string, appId: string, hash: string) => ({
    id,
    appId,
    name: `token ${id}`,
    hash,
    prefix: 'svc_live_abcdefg',
    now: '2026-11-25T10:00:00.000Z',
  });

  it('stores, finds by hash and id, lists newest first, refuses a duplicate hash, deletes', async () => {
    await store.insert(token('t1', 'app-a', 'h1'));
    await store.insert(token('t2', 'app-a', 'h2'));
    await store.insert(token('t3', 'app-b', 'h3'));
    expect(await store.byHash('h2')).toEqual({ id: 't2', appId: 'app-a' });
    expect(await store.byHash('nope')).toBeUndefined();
    expect(await store.byId('t1')).toEqual({
      id: 't1',
      appId: 'app-a',
      name: 'token t1',
      tokenPrefix: 'svc_live_abcdefg',
      lastUsedAt: null,
      createdAt: '2026-11-25T10:00:00.000Z',
    });
    expect((await store.ofApp('app-a')).map((t) => t.id)).toEqual(['t2', 't1']);
    await expect(store.insert(token('t4', 'app-a', 'h1'))).rejects.toBeInstanceOf(ConstraintError);
    await store.delete('t1');
    expect(await store.byId('t1')).toBeUndefined();
    await store.deleteOfApp('app-b');
    expect(await store.ofApp('app-b')).toEqual([]);
    expect((await store.ofApp('app-a')).map((t) => t.id)).toEqual(['t2']);
  });

  it('writes last-use times only forward, in one batch', async () => {
    await store.touchMany([['t2', '2026-11-25T12:00:00.000Z']]);
    await store.touchMany([
      ['t2', '2026-11-25T11:00:00.000Z'],
      ['missing', '2026-11-25T13:00:00.000Z'],
    ]);
    expect((await store.byId('t2'))?.lastUsedAt).toBe('2026-11-25T12:00:00.000Z');
  });
});
