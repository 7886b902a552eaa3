/**
 * `GET /api/session-events`: the organization's session events as server-sent events, read here
 * over real HTTP as a browser's fetch would. Credentials (every kind), the organization scope,
 * the filters, heartbeats, the stream's end (client gone, age, server shutdown) and bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import { bearer, call, sandboxSession, startMessagingApp, type Tenant, tenant } from './helpers.ts';

let app: TestApp;
let ada: Tenant;
let bob: Tenant;

beforeAll(async () => {
  app = await startMessagingApp('[plugins.sessions]\nevent_stream_heartbeat_seconds = 1\nevent_stream_max_seconds = 3\n');
  ada = await tenant(app, { orgName: 'Ada Events' });
  bob = await tenant(app, { orgName: 'Bob Events' });
});
afterAll(() => app?.close());

interface Received {
  id?: string;
  event?: string;
  data?: any;
  comment?: string;
}

/** An open stream: the records read so far, a wait for one, and the way to hang up. */
interface Stream {
  status: number;
  type: string | null;
  records: Received[];
  /** Resolves with the first record (already read or coming) that `match` accepts. */
  next(match: (r: Received) => boolean, timeoutMs?: number): Promise<Received>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

async function open(path: string, headers: Record<string, string>): Promise<Stream> {
  const controller = new AbortController();
  const res = await app.fetch(path, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const records: Received[] = [];
  const waiters: { match: (r: Received) => boolean; resolve: (r: Received) => void }[] = [];
  const push = (r: Received) => {
    records.push(r);
    for (const w of [...waiters]) {
      if (w.match(r)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(r);
      }
    }
  };
  const ended = (async () => {
    if (!res.body || res.status !== 200) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const r: Received = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) r.comment = line.slice(1).trim();
            else if (line.startsWith('id: ')) r.id = line.slice(4);
            else if (line.startsWith('event: ')) r.event = line.slice(7);
            else if (line.startsWith('data: ')) r.data = JSON.parse(line.slice(6));
          }
          push(r);
        }
      }
    } catch {
      // Aborted by close().
    }
  })();
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    records,
    ended,
    next(match, timeoutMs = 5000) {
      const found = records.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching record in ${timeoutMs} ms; got ${JSON.stringify(records)}`)), timeoutMs);
        waiters.push({
          match,
          resolve: (r) => {
            clearTimeout(timer);
            resolve(r);
          },
        });
      });
    },
    close: () => controller.abort(),
  };
}

async function openStreams(): Promise<number> {
  const text = await (await app.fetch('/metrics')).text();
  return Number(/^wharf_session_event_streams (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('GET /api/session-events', () => {
  it('answers 401 without a credential and 403 for a session API key, in the messaging envelope', async () => {
    const none = await call(app, undefined, 'GET', '/api/session-events');
    expect(none.status).toBe(401);
    expect(none.body).toStrictEqual({ success: false, message: 'Authentication required' });
    const session = await sandboxSession(app, ada.pat);
    const key = await call(app, session.apiKey, 'GET', '/api/session-events');
    expect(key.status).toBe(403);
    expect(key.body).toStrictEqual({ success: false, message: 'This operation requires a personal access token' });
  });

  it('refuses unknown event names (422) and a session of another organization (404), before streaming', async () => {
    const bad = await call(app, ada.pat, 'GET', '/api/session-events?events=session.status,nope');
    expect(bad.status).toBe(422);
    expect(bad.body.errors.events[0]).toContain('unknown event "nope"');
    const notNumber = await call(app, ada.pat, 'GET', '/api/session-events?session_id=abc');
    expect(notNumber.status).toBe(422);
    const bobs = await sandboxSession(app, bob.pat);
    const foreign = await call(app, ada.pat, 'GET', `/api/session-events?session_id=${bobs.id}`);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toStrictEqual({ success: false, error: 'Session not found', message: 'Session not found' });
  });

  it("streams the caller's organization's events to a PAT, and nothing of another organization", async () => {
    const stream = await open('/api/session-events?events=session.status', bearer(ada.pat));
    try {
      expect(stream.status).toBe(200);
      expect(stream.type).toBe('text/event-stream; charset=utf-8');
      await stream.next((r) => r.comment?.startsWith('events of organization') ?? false);
      const theirs = await sandboxSession(app, bob.pat, { name: 'Not for Ada' });
      const mine = await sandboxSession(app, ada.pat, { name: 'For Ada' });
      const record = await stream.next((r) => r.event === 'session.status');
      expect(record.data).toMatchObject({ event: 'session.status', sessionId: mine.id, data: { status: 'connected' } });
      expect(typeof record.data.timestamp).toBe('number');
      expect(Number(record.id)).toBeGreaterThan(0);
      expect(stream.records.some((r) => r.data?.sessionId === theirs.id)).toBe(false);
    } finally {
      stream.close();
    }
  });

  it('streams to the dashboard cookie too, filtered to one session and to the events asked for', async () => {
    const first = await sandboxSession(app, ada.pat, { name: 'Watched' });
    const other = await sandboxSession(app, ada.pat, { name: 'Not watched' });
    const stream = await open(`/api/session-events?session_id=${first.id}&events=messages.received`, ada.headers);
    try {
      expect(stream.status).toBe(200);
      await stream.next((r) => r.comment === `events of session ${first.id}`);
      for (const s of [other, first]) {
        const res = await call(app, s.apiKey, 'POST', '/api/sandbox/receive', { from: '+14155550100', text: `hello ${s.id}` });
        expect(res.status).toBe(200);
      }
      const record = await stream.next((r) => r.event !== undefined);
      expect(record.event).toBe('messages.received');
      expect(record.data.sessionId).toBe(first.id);
      expect(record.data.data.message.conversation).toBe(`hello ${first.id}`);
      // messages.upsert of the same message, and the other session's, were not sent.
      await new Promise((r) => setTimeout(r, 200));
      expect(stream.records.filter((r) => r.event).map((r) => `${r.event} ${r.data.sessionId}`)).toEqual([`messages.received ${first.id}`]);
    } finally {
      stream.close();
    }
  });

  it('sends heartbeats while idle, ends a stream at its age limit, and lets go of a client that hangs up', async () => {
    const before = await openStreams();
    const stream = await open('/api/session-events', bearer(ada.pat));
    expect(await openStreams()).toBe(before + 1);
    await stream.next((r) => r.comment === 'heartbeat', 2500);
    // event_stream_max_seconds = 3: the server ends it.
    const started = Date.now();
    await stream.ended;
    expect(Date.now() - started).toBeLessThan(4000);
    await until(async () => (await openStreams()) === before);

    const gone = await open('/api/session-events', bearer(ada.pat));
    expect(await openStreams()).toBe(before + 1);
    gone.close();
    await until(async () => (await openStreams()) === before);
  });
});

describe('GET /api/session-events at shutdown', () => {
  it('ends open streams when the server stops, so closing does not wait for its drain timeout', async () => {
    const own = await startMessagingApp('[server]\nshutdown_timeout_ms = 8000\n');
    const user = await tenant(own);
    const res = await own.fetch('/api/session-events', { headers: bearer(user.pat) });
    expect(res.status).toBe(200);
    const reading = (async () => {
      for await (const _ of res.body!) {
        // Drain until the server ends the stream.
      }
    })();
    const started = Date.now();
    await own.close();
    await reading;
    expect(Date.now() - started).toBeLessThan(4000);
  });
});
