/** Webhook deliveries: dispatch records with filters, one dispatch with every attempt, and redelivery. */
import { useEffect } from 'preact/hooks';
import { api, query } from '../api.ts';
import { Badge, Card, Empty, ErrorBox, Field, Loading, Pager } from '../components.tsx';
import { ago, when } from '../format.ts';
import { link, setParams, useAction, useLoad, useRoute } from '../hooks.ts';
import type { Attempt, Dispatch, Paginated, Session } from '../types.ts';

/** Reads again every few seconds while something is still pending (a delivery being tried, a redelivery). */
function useRefreshWhile(active: boolean, reload: () => Promise<void>) {
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => void reload(), 2000);
    return () => clearInterval(t);
  }, [active, reload]);
}

/** `datetime-local` value -> ISO 8601 (the API takes either ISO or Unix ms). */
function isoOf(local: string): string | undefined {
  if (!local) return undefined;
  const ms = Date.parse(local);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

export function Deliveries() {
  const { params } = useRoute();
  const filters = {
    session: params.get('session') ?? '',
    status: params.get('status') ?? '',
    event: params.get('event') ?? '',
    from: params.get('from') ?? '',
    to: params.get('to') ?? '',
    page: Number(params.get('page') ?? '1') || 1,
  };
  const sessions = useLoad((signal) => api<{ data: Session[] }>('GET', '/api/whatsapp-sessions', undefined, { signal }).then((r) => r.data), []);
  const events = useLoad((signal) => api<{ data: string[] }>('GET', '/api/webhook-events', undefined, { signal }).then((r) => r.data), []);
  const list = useLoad(
    (signal) =>
      api<{ data: Paginated<Dispatch> }>(
        'GET',
        `/api/dispatches${query({
          session_id: filters.session,
          status: filters.status,
          event: filters.event,
          from: isoOf(filters.from),
          to: isoOf(filters.to),
          page: filters.page,
          per_page: 20,
        })}`,
        undefined,
        { signal },
      ).then((r) => r.data),
    [filters.session, filters.status, filters.event, filters.from, filters.to, filters.page],
    { keep: true },
  );
  useRefreshWhile(list.data?.data.some((d) => d.status === 'pending') ?? false, list.reload);
  const set = (key: string, value: string) => setParams({ [key]: value, page: null });

  return (
    <>
      <h1 tabIndex={-1}>Webhook deliveries</h1>
      <p class="lead">Every event a session's webhook subscribed to, with each attempt to deliver it. An event that matched nothing leaves no record.</p>
      <Card
        title="Dispatches"
        actions={
          <button type="button" class="small secondary" onClick={() => void list.reload()}>
            Refresh
          </button>
        }
      >
        <form class="toolbar" onSubmit={(e) => e.preventDefault()} aria-label="Filters">
          <Field label="Session" class="compact">
            <select value={filters.session} onChange={(e) => set('session', e.currentTarget.value)}>
              <option value="">All sessions</option>
              {sessions.data?.map((s) => (
                <option key={s.id} value={String(s.id)}>
                  {s.name} ({s.id})
                </option>
              ))}
            </select>
          </Field>
          <Field label="Status" class="compact">
            <select value={filters.status} onChange={(e) => set('status', e.currentTarget.value)}>
              <option value="">Any status</option>
              <option value="pending">pending</option>
              <option value="delivered">delivered</option>
              <option value="abandoned">abandoned</option>
            </select>
          </Field>
          <Field label="Event" class="compact">
            <select value={filters.event} onChange={(e) => set('event', e.currentTarget.value)}>
              <option value="">Any event</option>
              {events.data?.map((name) => (
                <option key={name}>{name}</option>
              ))}
            </select>
          </Field>
          <Field label="From" class="compact">
            <input type="datetime-local" value={filters.from} onChange={(e) => set('from', e.currentTarget.value)} />
          </Field>
          <Field label="To" class="compact">
            <input type="datetime-local" value={filters.to} onChange={(e) => set('to', e.currentTarget.value)} />
          </Field>
        </form>
        <ErrorBox error={list.error ?? sessions.error} />
        {!list.data && !list.error && <Loading what="deliveries" />}
        {list.data?.data.length === 0 && <Empty>No dispatch records match.</Empty>}
        {list.data && list.data.data.length > 0 && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Dispatch</th>
                <th scope="col">Event</th>
                <th scope="col">Session</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((d) => (
                <tr key={d.id}>
                  <td data-label="Dispatch">
                    <a href={link('deliveries', d.id)}>#{d.id}</a>
                    {d.redelivery_of ? <span class="muted"> (redelivers #{d.redelivery_of})</span> : null}
                  </td>
                  <td data-label="Event" class="mono">
                    {d.event}
                  </td>
                  <td data-label="Session">{sessions.data?.find((s) => s.id === d.session_id)?.name ?? d.session_id}</td>
                  <td data-label="Status">
                    <Badge status={d.status} />
                    {d.in_flight ? <span class="muted"> sending</span> : null}
                  </td>
                  <td data-label="Attempts">
                    {d.attempt_count} of {d.max_attempts}
                  </td>
                  <td data-label="Last answer">{d.last_status_code ? `HTTP ${d.last_status_code}` : (d.last_error ?? '—')}</td>
                  <td data-label="Created" title={when(d.created_at)}>
                    {ago(d.created_at)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {list.data && <Pager page={list.data.current_page} pages={list.data.last_page} total={list.data.total} onPage={(p) => setParams({ page: p })} />}
      </Card>
    </>
  );
}

export function DispatchDetail({ dispatchId }: { dispatchId: string }) {
  const dispatch = useLoad(
    (signal) =>
      api<{ data: Dispatch & { attempts: Attempt[]; payload: unknown } }>('GET', `/api/dispatches/${encodeURIComponent(dispatchId)}`, undefined, {
        signal,
      }).then((r) => r.data),
    [dispatchId],
  );
  useRefreshWhile(dispatch.data?.status === 'pending', dispatch.reload);
  const sessionId = dispatch.data?.session_id;
  // The session's name (the dispatch carries its id); a session deleted since keeps its number.
  const sessionName = useLoad(
    (signal) =>
      sessionId === undefined
        ? Promise.resolve(undefined)
        : api<{ data: Session }>('GET', `/api/whatsapp-sessions/${sessionId}`, undefined, { signal }).then(
            (r) => r.data.name,
            () => undefined,
          ),
    [sessionId],
  );
  const redeliver = useAction(async () => {
    const { data } = await api<{ data: Dispatch }>('POST', `/api/dispatches/${encodeURIComponent(dispatchId)}/redeliver`, {});
    location.hash = link('deliveries', data.id);
  });
  const d = dispatch.data;
  return (
    <>
      <p class="crumbs">
        <a href={link('deliveries')}>Webhook deliveries</a> /
      </p>
      <div class="title-row">
        <h1 tabIndex={-1}>Dispatch #{dispatchId}</h1>
        {d && <Badge status={d.status} />}
      </div>
      <ErrorBox error={dispatch.error} />
      {!d && !dispatch.error && <Loading what="the dispatch" />}
      {d && (
        <>
          <Card title="Delivery">
            <dl class="kv">
              <dt>Event</dt>
              <dd class="mono">{d.event}</dd>
              <dt>Session</dt>
              <dd>
                <a href={link('sessions', d.session_id)}>{sessionName.data ?? `Session ${d.session_id}`}</a>
              </dd>
              <dt>URL</dt>
              <dd class="mono wrap">{d.url}</dd>
              <dt>webhook-id</dt>
              <dd class="mono">{d.webhook_id}</dd>
              <dt>Attempts</dt>
              <dd>
                {d.attempt_count} of {d.max_attempts}
                {d.next_attempt_at ? `, next ${ago(d.next_attempt_at)}` : ''}
              </dd>
              {d.redelivery_of && (
                <>
                  <dt>Redelivers</dt>
                  <dd>
                    <a href={link('deliveries', d.redelivery_of)}>#{d.redelivery_of}</a>
                  </dd>
                </>
              )}
              <dt>Created</dt>
              <dd>{when(d.created_at)}</dd>
              <dt>Finished</dt>
              <dd>{d.finished_at ? when(d.finished_at) : '—'}</dd>
            </dl>
            <button type="button" disabled={d.status === 'pending' || redeliver.busy} onClick={() => void redeliver.run()}>
              Redeliver
            </button>
            {d.status === 'pending' && <span class="muted"> Still being tried: it can be redelivered once it is delivered or abandoned.</span>}
            <ErrorBox error={redeliver.error} />
          </Card>
          <Card title="Attempts">
            {d.attempts.length === 0 && <Empty>No attempt made yet.</Empty>}
            {d.attempts.length > 0 && (
              <table class="list">
                <thead>
                  <tr>
                    <th scope="col">#</th>
                    <th scope="col">Started</th>
                    <th scope="col">Took</th>
                    <th scope="col">Answer</th>
                    <th scope="col">Body</th>
                  </tr>
                </thead>
                <tbody>
                  {d.attempts.map((a) => (
                    <tr key={a.number}>
                      <td data-label="#">{a.number}</td>
                      <td data-label="Started">{when(a.started_at)}</td>
                      <td data-label="Took">{a.duration_ms} ms</td>
                      <td data-label="Answer">{a.status_code ? `HTTP ${a.status_code}` : (a.error ?? '—')}</td>
                      <td data-label="Body" class="mono wrap">
                        {a.response ?? ''}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </Card>
          <Card title="Payload">
            <pre class="code">{JSON.stringify(d.payload, null, 2)}</pre>
          </Card>
        </>
      )}
    </>
  );
}
