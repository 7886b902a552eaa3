/**
 * Dispatch records through the API: credentials (PAT or signed-in user; a session key is 403),
 * filters by session, status, event and time, pagination, the detail with every attempt,
 * redelivery (a new series, the same event id), the organization boundary, bad queries (422),
 * and pruning after the configured number of days.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type TestApp } from '../../helpers/app.ts';
import {
  answer,
  call,
  dispatchesOf,
  eventually,
  FAST_TOML,
  hookedSession,
  receive,
  Receiver,
  type SessionInfo,
  startWebhooksApp,
  type Tenant,
  tenant,
} from './helpers.ts';

let app: TestApp;
let t: Tenant;
let ok: Receiver;
let failing: Receiver;
let s: SessionInfo;
let broken: SessionInfo;
let startedAt: number;

beforeAll(async () => {
  app = await startWebhooksApp();
  t = await tenant(app);
  ok = await Receiver.start(answer(200, 'ok'));
  failing = await Receiver.start(answer(500, 'nope'));
  startedAt = Date.now();
  s = await hookedSession(app, t.pat, ok.url(), ['messages.received', 'messages-personal']);
  broken = await hookedSession(app, t.pat, failing.url(), ['messages.received']);
  for (let i = 0; i < 3; i++) await receive(app, s, `ok ${i}`);
  await receive(app, broken, 'fails');
  await eventually(
    async () => (await dispatchesOf(app, t.pat, broken.id)).every((d) => d.status === 'abandoned'),
    10_000,
    'the failing dispatch to be abandoned',
  );
  await eventually(async () => (await dispatchesOf(app, t.pat, s.id)).filter((d) => d.status === 'delivered').length === 6, 10_000, 'six deliveries');
});
afterAll(async () => {
  await app?.close();
  await ok?.close();
  await failing?.close();
});

describe('GET /api/dispatches', () => {
  it('needs an account credential: 401 without, 403 with a session key, 200 with a PAT or a dashboard session', async () => {
    const none = await call(app, undefined, 'GET', '/api/dispatches');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ success: false, message: 'Authentication required' });
    const key = await call(app, s.apiKey, 'GET', '/api/dispatches');
    expect(key.status).toBe(403);
    expect(key.body).toEqual({ success: false, message: 'This operation requires a personal access token' });
    // The credential is checked before the query: a bad query without one is still 401.
    expect((await call(app, undefined, 'GET', '/api/dispatches?status=nonsense')).status).toBe(401);
    const cookie = await app.request('GET', `/api/dispatches?session_id=${s.id}`, { headers: t.headers });
    expect(cookie.status).toBe(200);
    expect(cookie.body.data.total).toBe(6);
  });

  it('lists the fields of each record, newest first, and filters by session, status and event', async () => {
    const all = await call(app, t.pat, 'GET', '/api/dispatches?per_page=100');
    expect(all.status).toBe(200);
    const rows = all.body.data.data as any[];
    expect(rows.map((d) => d.id)).toEqual([...rows.map((d) => d.id)].sort((a, b) => b - a));
    // The sandbox session.status events were not subscribed: only the seven matching events.
    expect(all.body.data.total).toBe(7);
    const failed = rows.find((d) => d.session_id === broken.id)!;
    expect(failed).toStrictEqual({
      id: expect.any(Number),
      event_id: expect.any(Number),
      webhook_id: expect.stringMatching(/^msg_/),
      session_id: broken.id,
      event: 'messages.received',
      url: failing.url(),
      status: 'abandoned',
      in_flight: false,
      attempt_count: 5,
      max_attempts: 5,
      last_status_code: 500,
      last_error: 'the receiver answered 500',
      next_attempt_at: null,
      redelivery_of: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      finished_at: expect.any(String),
    });
    expect(Date.parse(failed.created_at)).toBeGreaterThanOrEqual(startedAt);
    expect(Date.parse(failed.finished_at)).toBeGreaterThanOrEqual(Date.parse(failed.created_at));

    const bySession = await call(app, t.pat, 'GET', `/api/dispatches?session_id=${s.id}&per_page=100`);
    expect(bySession.body.data.total).toBe(6);
    expect(bySession.body.data.data.every((d: any) => d.session_id === s.id && d.status === 'delivered')).toBe(true);
    const abandoned = await call(app, t.pat, 'GET', '/api/dispatches?status=abandoned');
    expect(abandoned.body.data.data.map((d: any) => d.id)).toEqual([failed.id]);
    const views = await call(app, t.pat, 'GET', '/api/dispatches?event=messages-personal.received');
    expect(views.body.data.total).toBe(3);
    expect(views.body.data.data.every((d: any) => d.event === 'messages-personal')).toBe(true);
    const pending = await call(app, t.pat, 'GET', '/api/dispatches?status=pending');
    expect(pending.body.data).toMatchObject({ total: 0, data: [], from: null, to: null, last_page: 1 });
  });

  it('filters by time (ISO 8601 or Unix ms) and paginates', async () => {
    const future = await call(app, t.pat, 'GET', `/api/dispatches?from=${Date.now() + 60_000}`);
    expect(future.body.data.total).toBe(0);
    const past = await call(app, t.pat, 'GET', `/api/dispatches?to=${new Date(startedAt - 1000).toISOString()}`);
    expect(past.body.data.total).toBe(0);
    const window = await call(app, t.pat, 'GET', `/api/dispatches?from=${new Date(startedAt).toISOString()}&to=${Date.now() + 1000}`);
    expect(window.body.data.total).toBe(7);

    const page1 = await call(app, t.pat, 'GET', '/api/dispatches?per_page=3&page=1');
    const page3 = await call(app, t.pat, 'GET', '/api/dispatches?per_page=3&page=3');
    expect(page1.body.data).toMatchObject({ current_page: 1, per_page: 3, total: 7, from: 1, to: 3, last_page: 3 });
    expect(page3.body.data).toMatchObject({ current_page: 3, from: 7, to: 7 });
    expect(page3.body.data.data).toHaveLength(1);
    expect(page1.body.data.data[0].id).toBeGreaterThan(page3.body.data.data[0].id);
  });

  it('answers 422 naming each bad query field', async () => {
    const res = await call(app, t.pat, 'GET', '/api/dispatches?status=lost&event=nope&from=yesterday&per_page=1000&colour=red');
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.message).toBe('The given data was invalid.');
    expect(Object.keys(res.body.errors).sort()).toEqual(['colour', 'event', 'from', 'per_page', 'status']);
    expect(res.body.errors.event[0]).toContain('unknown event');
  });

  it("shows nothing of another organization's sessions; their dispatch is a 404", async () => {
    const other = await tenant(app);
    const list = await call(app, other.pat, 'GET', '/api/dispatches');
    expect(list.body.data.total).toBe(0);
    const bySession = await call(app, other.pat, 'GET', `/api/dispatches?session_id=${s.id}`);
    expect(bySession.body.data.total).toBe(0);
    const id = (await dispatchesOf(app, t.pat, s.id))[0].id;
    for (const [method, path] of [
      ['GET', `/api/dispatches/${id}`],
      ['POST', `/api/dispatches/${id}/redeliver`],
    ] as const) {
      const res = await call(app, other.pat, method, path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ success: false, error: 'Dispatch not found', message: 'Dispatch not found' });
    }
    expect((await call(app, t.pat, 'GET', '/api/dispatches/999999')).status).toBe(404);
    expect((await call(app, t.pat, 'GET', '/api/dispatches/abc')).status).toBe(404);
  });
});

describe('GET /api/dispatches/{id}', () => {
  it('has every attempt with status code, duration, error and the first KiB of the answer, and the payload', async () => {
    const [record] = await dispatchesOf(app, t.pat, broken.id);
    const res = await call(app, t.pat, 'GET', `/api/dispatches/${record.id}`);
    expect(res.status).toBe(200);
    expect(res.body.data.id).toBe(record.id);
    expect(res.body.data.attempts).toHaveLength(5);
    res.body.data.attempts.forEach((a: any, i: number) => {
      expect(a).toStrictEqual({
        number: i + 1,
        started_at: expect.any(String),
        duration_ms: expect.any(Number),
        status_code: 500,
        error: 'the receiver answered 500',
        response: 'nope',
      });
    });
    expect(res.body.data.payload).toMatchObject({ event: 'messages.received', sessionId: broken.id, data: { message: { conversation: 'fails' } } });
    expect(failing.requests[0]!.json).toStrictEqual(res.body.data.payload);
  });
});

describe('POST /api/dispatches/{id}/redeliver', () => {
  it('starts a new series with the same event id and webhook-id, to the current URL', async () => {
    const [record] = await dispatchesOf(app, t.pat, broken.id);
    // The receiver is fixed: the session now points at a working one.
    expect((await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${broken.id}`, { webhook_url: ok.url('/fixed') })).status).toBe(200);
    const res = await call(app, t.pat, 'POST', `/api/dispatches/${record.id}/redeliver`);
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({
      event_id: record.event_id,
      webhook_id: record.webhook_id,
      redelivery_of: record.id,
      status: 'pending',
      attempt_count: 0,
      url: ok.url('/fixed'),
    });
    expect(res.body.data.id).not.toBe(record.id);
    const delivered = await eventually(
      async () => {
        const d = (await call(app, t.pat, 'GET', `/api/dispatches/${res.body.data.id}`)).body.data;
        return d.status === 'delivered' ? d : null;
      },
      5000,
      'the redelivery',
    );
    expect(delivered).toMatchObject({ attempt_count: 1, last_status_code: 200 });
    const got = ok.requests.filter((r) => r.path === '/fixed');
    expect(got).toHaveLength(1);
    expect(got[0]!.headers['webhook-id']).toBe(record.webhook_id);
    expect(got[0]!.body.equals(failing.requests[0]!.body)).toBe(true);
    // The original keeps its own history.
    const original = (await call(app, t.pat, 'GET', `/api/dispatches/${record.id}`)).body.data;
    expect(original).toMatchObject({ status: 'abandoned', attempt_count: 5 });
  });

  it('refuses a pending dispatch and a session without an enabled webhook (409)', async () => {
    const hang = await Receiver.start(() => {
      // never answers
    });
    try {
      const h = await hookedSession(app, t.pat, hang.url(), ['messages.received']);
      await receive(app, h, 'pending');
      const [pending] = await eventually(
        async () => {
          const list = await dispatchesOf(app, t.pat, h.id);
          return list.length && list[0].in_flight ? list : null;
        },
        5000,
        'an attempt in flight',
      );
      expect(pending.status).toBe('pending');
      const res = await call(app, t.pat, 'POST', `/api/dispatches/${pending.id}/redeliver`);
      expect(res.status).toBe(409);
      expect(res.body.error).toMatch(/still pending/);

      const [done] = await dispatchesOf(app, t.pat, s.id);
      await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { webhook_enabled: false });
      const disabled = await call(app, t.pat, 'POST', `/api/dispatches/${done.id}/redeliver`);
      expect(disabled.status).toBe(409);
      expect(disabled.body).toEqual({
        success: false,
        error: `Session ${s.id} has its webhook disabled (webhook_enabled is false)`,
        message: `Session ${s.id} has its webhook disabled (webhook_enabled is false)`,
      });
      await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}`, { webhook_enabled: true });
      expect((await call(app, t.pat, 'POST', `/api/dispatches/${done.id}/redeliver`, { extra: 1 })).status).toBe(422);
    } finally {
      await hang.close();
    }
  });
});

describe('pruning', () => {
  it('deletes finished records older than retention_days (with their attempts), never pending ones', async () => {
    const dataDir = tempDir();
    const hang = await Receiver.start(() => {
      // never answers: its dispatch stays pending
    });
    const first = await startWebhooksApp(FAST_TOML.replace('timeout_ms = 1000', 'timeout_ms = 60000'), { dataDir });
    let second: TestApp | undefined;
    try {
      const owner = await tenant(first);
      const done = await hookedSession(first, owner.pat, ok.url('/prune'), ['messages.received']);
      const stuck = await hookedSession(first, owner.pat, hang.url(), ['messages.received']);
      await receive(first, done, 'old news');
      await receive(first, stuck, 'still pending');
      await eventually(async () => (await dispatchesOf(first, owner.pat, done.id))[0]?.status === 'delivered', 5000, 'the delivery');
      await first.close();
      await expect(first.running.data.ping()).rejects.toThrow();
      await new Promise((r) => setTimeout(r, 1100));
      // 0.00001 days is 0.864 s: the delivered record is older than that now.
      second = await startWebhooksApp(`${FAST_TOML}retention_days = 0.00001\n`, { dataDir });
      const rows = await second.running.data.all<{ session_id: number; status: string }>('SELECT session_id, status FROM webhooks_dispatches ORDER BY id');
      expect(rows).toEqual([{ session_id: stuck.id, status: 'pending' }]);
      expect(await second.running.data.value('SELECT COUNT(*) AS n FROM webhooks_attempts WHERE dispatch_id NOT IN (SELECT id FROM webhooks_dispatches)')).toBe(
        0,
      );
      expect(second.logs.some((l) => l.msg === 'pruned old webhook dispatch records' && l.removed === 1)).toBe(true);
    } finally {
      await second?.close();
      await hang.close();
    }
  });
});

describe('the OpenAPI document', () => {
  it('describes the dispatch operations and the rotation, with the PAT scheme', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    for (const [path, method] of [
      ['/api/dispatches', 'get'],
      ['/api/dispatches/{id}', 'get'],
      ['/api/dispatches/{id}/redeliver', 'post'],
      ['/api/whatsapp-sessions/{id}/rotate-webhook-secret', 'post'],
      ['/api/messaging-sessions/{id}/rotate-webhook-secret', 'post'],
    ] as const) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.security).toEqual([{ personalAccessToken: [] }]);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '403', '404'].filter((s) => path.includes('{id}') || s !== '404')));
    }
    const params = doc.paths['/api/dispatches'].get.parameters.map((p: { name: string }) => p.name);
    expect(params).toEqual(expect.arrayContaining(['page', 'per_page', 'session_id', 'status', 'event', 'from', 'to']));
  });
});
