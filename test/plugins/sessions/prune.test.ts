/** The sessions plugin's hourly prune: every kind of row it keeps goes by its own age limit, and nothing younger. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../../core/db-sqlite.ts';
import { migrate } from '../../../core/migrations.ts';
import { loadKeys } from '../../../core/keys.ts';
import { migrations } from '../../../plugins/sessions/migrations.ts';
import { ScopedDb } from '../../../plugins/sessions/scoped-db.ts';
import { SessionsStore } from '../../../plugins/sessions/store.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-prune-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('SessionsStore.prune', () => {
  it('deletes events, message logs, session logs and audit logs older than their cutoffs, each by its own', async () => {
    const data = openSqlite(':memory:');
    await migrate(data, [{ plugin: 'sessions', migrations }]);
    const store = new SessionsStore(new ScopedDb(data), loadKeys(dir));
    const id = await store.insertSession(
      { orgId: 'org-1', type: 'sandbox', status: 'disconnected', phoneNumber: '+15550001001', name: 'Prune' },
      { apiKey: 'k'.repeat(64), apiKeyHash: 'h'.repeat(64), webhookSecret: 's'.repeat(32) },
      '2026-01-01T00:00:00.000Z',
    );
    const actor = { kind: 'pat', id: '1', userId: 'u1', address: '127.0.0.1' } as const;
    const message = (...args: unknown[]) =>
      data.run(
        "INSERT INTO sessions_messages (session_id, key_id, jid, recipient, type, status, remote_key, created_at, updated_at) VALUES (?, ?, '1@s.whatsapp.net', '+1', 'text', 'sent', '{}', ?, ?)",
        args,
      );
    for (const at of ['2026-01-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', '2026-06-01T00:00:00.000Z']) {
      await store.insertEvents(data, [{ sessionId: id, orgId: 'org-1', event: 'session.status', raw: '{}', createdAt: at }], []);
      await store.statusLog(id, 'connection', 'connecting', 'attempt', at);
      await store.audit(id, 'org-1', 'session.connect', actor, null, at);
      await message(id, `key-${at}`, at, at);
    }
    const count = async (table: string) => await data.value<number>(`SELECT COUNT(*) AS n FROM ${table}`);

    const removed = await store.prune({
      events: '2026-02-01T00:00:00.000Z',
      messages: '2026-04-01T00:00:00.000Z',
      statusLogs: '2026-07-01T00:00:00.000Z',
      auditLogs: '2025-12-01T00:00:00.000Z',
    });
    expect(removed).toEqual({ events: 1, messages: 2, statusLogs: 3, auditLogs: 0 });
    expect([await count('sessions_events'), await count('sessions_messages'), await count('sessions_status_logs'), await count('sessions_audit_logs')]).toEqual(
      [2, 1, 0, 3],
    );
    expect((await store.statusLogs(id, 1, 10)).total).toBe(0);
    expect((await store.auditLogs(id, 'org-1', 1, 10)).rows.map((r) => r.created_at)).toEqual([
      '2026-06-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
      '2026-01-01T00:00:00.000Z',
    ]);
    // The session itself is never pruned.
    expect((await store.session(id))?.name).toBe('Prune');
    await data.close();
  });
});
