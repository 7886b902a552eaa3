/**
 * Receivers that misbehave, each a real HTTP server: one that hangs, resets the connection,
 * redirects, answers 5xx with Retry-After, streams an endless body, answers slowly. Each gets a
 * clear attempt record; failures are retried on the schedule and abandoned after the last
 * attempt; and one stuck receiver never holds up another session's deliveries.
 */
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../../helpers/app.ts';
import {
  answer,
  call,
  dispatchesOf,
  eventually,
  hookedSession,
  receive,
  Receiver,
  type SessionInfo,
  startWebhooksApp,
  type Tenant,
  tenant,
} from './helpers.ts';

const TOML = `[plugins.webhooks]
allow_private_networks = true
timeout_ms = 1000
retry_schedule_seconds = [0.05, 0.1, 0.15, 0.2]
retry_jitter = 0
concurrency = 4
concurrency_per_session = 2
response_read_limit_bytes = 4096
shutdown_wait_ms = 0
`;

let app: TestApp;
let t: Tenant;
/**
 * The same settings, but attempts time out only after two minutes: for the cases where only
 * something other than the timeout may end an attempt (the cap on an endless body), or where none
 * may end during the test (the stuck session of the isolation case). Whatever the machine's load,
 * the 1 s timeout cannot then stand in for what is tested.
 */
let patient: TestApp;
let p: Tenant;
const receivers: Receiver[] = [];

beforeAll(async () => {
  app = await startWebhooksApp(TOML);
  t = await tenant(app);
  patient = await startWebhooksApp(TOML.replace('timeout_ms = 1000', 'timeout_ms = 120000'));
  p = await tenant(patient);
});
afterAll(async () => {
  await patient?.close();
  await app?.close();
  for (const r of receivers) await r.close();
});

async function receiverFor(behaviour: Receiver['behaviour']): Promise<Receiver> {
  const r = await Receiver.start(behaviour);
  receivers.push(r);
  return r;
}

/** A session subscribed to messages.received only, and the single dispatch one message produces, once finished. */
async function deliverOne(url: string, text = 'hi', on: { app: TestApp; t: Tenant } = { app, t }): Promise<{ session: SessionInfo; dispatch: any }> {
  const session = await hookedSession(on.app, on.t.pat, url, ['messages.received']);
  await receive(on.app, session, text);
  const dispatch = await eventually(
    async () => {
      const list = await call(on.app, on.t.pat, 'GET', `/api/dispatches?session_id=${session.id}`);
      const d = list.body.data.data[0];
      return d && d.status !== 'pending' ? d : null;
    },
    60_000,
    'the dispatch to finish',
  );
  const detail = await call(on.app, on.t.pat, 'GET', `/api/dispatches/${dispatch.id}`);
  expect(detail.status).toBe(200);
  return { session, dispatch: detail.body.data };
}

describe('a failing receiver', () => {
  it('that hangs: five timed-out attempts on the schedule, then abandoned and never retried by itself', async () => {
    const r = await receiverFor(() => {
      // never answers
    });
    // How late this process (the app's, in-process) ran its timers meanwhile: on a loaded machine a
    // timeout fires, and a retry starts, that much later than set. The upper bounds below allow it.
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const { dispatch } = await deliverOne(r.url());
    lag.disable();
    const lateMs = lag.max / 1e6;
    expect(dispatch).toMatchObject({ status: 'abandoned', attempt_count: 5, max_attempts: 5, last_status_code: null, next_attempt_at: null, in_flight: false });
    expect(dispatch.last_error).toBe('timed out after 1000 ms');
    expect(dispatch.attempts.map((a: any) => a.number)).toEqual([1, 2, 3, 4, 5]);
    for (const a of dispatch.attempts) {
      expect(a).toMatchObject({ status_code: null, error: 'timed out after 1000 ms', response: null });
      expect(a.duration_ms).toBeGreaterThanOrEqual(990);
      // Ended by the 1 s timeout (its error says so); later only by how late the process ran (the
      // longest stall, measured; several can add up, hence the margin).
      expect(a.duration_ms, `timers up to ${lateMs} ms late`).toBeLessThan(6000 + lateMs);
    }
    // The waits between attempts follow the schedule (50, 100, 150, 200 ms after each timeout):
    // never shorter; longer only by the timers' lateness and a claim from the database (which on a
    // loaded machine can take seconds on PostgreSQL; 5 s still tells milliseconds from seconds).
    const starts = dispatch.attempts.map((a: any) => Date.parse(a.started_at));
    const waits = starts.slice(1).map((s: number, i: number) => s - (starts[i] + dispatch.attempts[i].duration_ms));
    [50, 100, 150, 200].forEach((ms, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(ms - 5);
      expect(waits[i], `timers up to ${lateMs} ms late`).toBeLessThan(ms + 5000 + lateMs);
    });
    // Each attempt reached the receiver (it shares this process: an attempt whose timeout fired while
    // the process stalled for longer than the timeout may be cut before the receiver read it), and
    // nothing more comes after the last.
    const arrived = r.requests.length;
    if (lateMs < 500) expect(arrived).toBe(5);
    else expect(arrived).toBeGreaterThanOrEqual(1);
    expect(arrived).toBeLessThanOrEqual(5);
    await new Promise((res) => setTimeout(res, 600));
    expect(r.requests).toHaveLength(arrived);
  });

  it('that resets the connection: a failed attempt naming it, retried, then delivered', async () => {
    let n = 0;
    const r = await receiverFor((req, res) => {
      if (++n <= 2) return req.socket.destroy();
      answer(204, '')(req, res, undefined as never);
    });
    const { dispatch } = await deliverOne(r.url());
    expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 3, last_status_code: 204, last_error: null });
    expect(dispatch.attempts[0]).toMatchObject({ status_code: null, response: null });
    expect(dispatch.attempts[0].error).toMatch(/connection (reset|closed) by the receiver/);
    expect(dispatch.attempts[2]).toMatchObject({ status_code: 204, error: null });
  });

  it('that redirects: not followed, a failed attempt naming the target', async () => {
    const target = await receiverFor(answer(200));
    const r = await receiverFor(answer(302, 'moved', { location: target.url('/elsewhere') }));
    const { dispatch } = await deliverOne(r.url());
    expect(dispatch).toMatchObject({ status: 'abandoned', attempt_count: 5, last_status_code: 302 });
    expect(dispatch.last_error).toBe(`redirect not followed: the receiver answered 302 to ${target.url('/elsewhere')}`);
    expect(dispatch.attempts[0].response).toBe('moved');
    expect(target.requests).toEqual([]);
  });

  it('that answers 5xx with Retry-After: the wait lengthens, up to the longest in the schedule', async () => {
    let n = 0;
    const r = await receiverFor((req, res) => {
      if (++n <= 2) return answer(503, '{"error":"maintenance"}', { 'retry-after': '3600', 'content-type': 'application/json' })(req, res, undefined as never);
      answer(200, 'thanks')(req, res, undefined as never);
    });
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const { dispatch } = await deliverOne(r.url());
    lag.disable();
    expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 3, last_status_code: 200, last_error: null });
    expect(dispatch.attempts.map((a: any) => a.status_code)).toEqual([503, 503, 200]);
    expect(dispatch.attempts[0]).toMatchObject({ error: 'the receiver answered 503', response: '{"error":"maintenance"}' });
    expect(dispatch.attempts[2].response).toBe('thanks');
    // Without Retry-After the first wait is 50 ms; with it, the schedule's longest (200 ms), not an
    // hour (later only by how late this process, the app's, ran its timers, and a database claim).
    const gap = r.requests[1]!.at - r.requests[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(195);
    expect(gap, `timers up to ${lag.max / 1e6} ms late`).toBeLessThan(5000 + lag.max / 1e6);
  });

  it('that answers 4xx: retried like any failure (only 2xx succeeds)', async () => {
    const r = await receiverFor(answer(400, 'bad'));
    const { dispatch } = await deliverOne(r.url());
    expect(dispatch).toMatchObject({ status: 'abandoned', attempt_count: 5, last_status_code: 400, last_error: 'the receiver answered 400' });
    expect(r.requests).toHaveLength(5);
  });

  it('that streams an endless body: read up to the cap, the first KiB kept, the slot freed at once', async () => {
    const r = await receiverFor((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = 'x'.repeat(1000);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    // On the app whose attempts time out after two minutes: the attempt ends (within this test), so
    // the cap ended it, however slowly a loaded machine reads the 4 KiB.
    const { dispatch } = await deliverOne(r.url(), 'hi', { app: patient, t: p });
    expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 1, last_status_code: 200, last_error: null });
    expect(dispatch.attempts[0].response).toBe('x'.repeat(1024));
    expect(dispatch.attempts[0].error).toBe('answer body longer than 4096 bytes: cut off');
    expect(dispatch.attempts[0].duration_ms).toBeLessThan(60_000);
  });

  it('that is slow: an answer after the timeout fails, one before it succeeds', async () => {
    let n = 0;
    const r = await receiverFor((req, res) => {
      const delay = ++n === 1 ? 1500 : 100;
      setTimeout(() => answer(200, 'late')(req, res, undefined as never), delay);
    });
    const { dispatch } = await deliverOne(r.url());
    expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 2, last_status_code: 200 });
    expect(dispatch.attempts[0]).toMatchObject({ status_code: null, error: 'timed out after 1000 ms' });
    expect(dispatch.attempts[1].duration_ms).toBeGreaterThanOrEqual(95);
  });

  it('that answers in time while the process stalls past the timeout: delivered, not a timeout', async () => {
    // The app runs in this process: the receiver answers at once, then blocks the whole process
    // for longer than timeout_ms (what a loaded machine does to a process). When it runs again the
    // attempt's timer is due and the answer is waiting in the socket: the answer wins.
    const r = await receiverFor((req, res) => {
      answer(200, 'ok')(req, res, undefined as never);
      const until = Date.now() + 1500;
      while (Date.now() < until) {
        // stalled
      }
    });
    const { dispatch } = await deliverOne(r.url());
    expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 1, last_status_code: 200 });
    expect(dispatch.attempts[0]).toMatchObject({ status_code: 200, error: null });
  });

  it('that refuses connections: a failed attempt, "connection refused"', async () => {
    const server = net.createServer();
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise((res) => server.close(res));
    const { dispatch } = await deliverOne(`http://127.0.0.1:${port}/gone`);
    expect(dispatch).toMatchObject({ status: 'abandoned', attempt_count: 5, last_error: 'connection refused' });
  });
});

describe('isolation', () => {
  it("one hanging receiver never stalls another session's deliveries: they all go out while its attempts still hang", async () => {
    // On the app whose attempts time out after two minutes: no attempt of the stuck session ends
    // during this test, so the other session's deliveries can only go through the slots the stuck
    // one does not hold (two of the four). Had it taken every slot, they would wait for its
    // timeouts, past every wait here: no bound on how fast a loaded machine delivers.
    const stuck = await receiverFor(() => {
      // never answers
    });
    const fast = await receiverFor(answer(200));
    const slowSession = await hookedSession(patient, p.pat, stuck.url(), ['messages.received']);
    const fastSession = await hookedSession(patient, p.pat, fast.url(), ['messages.received']);
    for (let i = 0; i < 20; i++) await receive(patient, slowSession, `stuck ${i}`);
    await eventually(() => stuck.requests.length >= 2, 30_000, 'the stuck receiver to be hit');
    for (let i = 0; i < 10; i++) {
      await receive(patient, fastSession, `fast ${i}`);
      await eventually(() => fast.requests.length >= i + 1, 60_000, `fast delivery ${i}`);
    }
    // Meanwhile the stuck session held its two slots (the per-session limit), not the four overall,
    // and none of its attempts ended: the fast deliveries never waited for one of them.
    expect(stuck.requests).toHaveLength(2);
    const records = await dispatchesOf(patient, p.pat, slowSession.id);
    expect(records.filter((d) => d.in_flight)).toHaveLength(2);
    expect(records.every((d) => d.status === 'pending' && d.attempt_count === 0)).toBe(true);
  }, 180_000);

  it('a hanging receiver never has more than two attempts in flight at once, timeouts and retries included', async () => {
    const stuck = await receiverFor(() => {
      // never answers
    });
    const slowSession = await hookedSession(app, t.pat, stuck.url(), ['messages.received']);
    for (let i = 0; i < 20; i++) await receive(app, slowSession, `stuck ${i}`);
    // Read from the attempts the dispatcher recorded (start and duration on its own clock, not
    // arrival times at the receiver, which a loaded machine delays by varying amounts).
    await eventually(() => stuck.requests.length >= 4, 30_000, 'attempts after the first timeouts');
    const list = await call(app, t.pat, 'GET', `/api/dispatches?session_id=${slowSession.id}&per_page=100`);
    const intervals: [number, number][] = [];
    for (const d of list.body.data.data as { id: string }[]) {
      const detail = await call(app, t.pat, 'GET', `/api/dispatches/${d.id}`);
      for (const a of detail.body.data.attempts as { started_at: string; duration_ms: number; error: string | null }[]) {
        expect(a.error).toBe('timed out after 1000 ms');
        const start = Date.parse(a.started_at);
        // Half-open, less 5 ms for the rounding of start and duration to whole milliseconds.
        intervals.push([start, start + a.duration_ms - 5]);
      }
    }
    expect(intervals.length).toBeGreaterThanOrEqual(2);
    const overlapping = intervals.map(([s]) => intervals.filter(([s2, e2]) => s2 <= s && s < e2).length);
    expect(Math.max(...overlapping)).toBe(2);
    const pending = await call(app, t.pat, 'GET', `/api/dispatches?session_id=${slowSession.id}&status=pending&per_page=1`);
    expect(pending.body.data.total).toBeGreaterThan(10);
  });
});
