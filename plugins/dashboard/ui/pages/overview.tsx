/** The overview: the organization's apps, sessions, storage used, and recent failed deliveries. */
import { api } from '../api.ts';
import { Badge, Card, Empty, ErrorBox, Loading, Usage } from '../components.tsx';
import { humanBytes } from '../../../../client/bytes.ts';
import { ago, count } from '../format.ts';
import { link, useLoad } from '../hooks.ts';
import { useMe } from '../session.ts';
import type { App, Dispatch, Paginated, Session } from '../types.ts';

export function Overview() {
  const { org } = useMe();
  const apps = useLoad((signal) => api<{ apps: App[] }>('GET', '/api/apps', undefined, { signal }).then((r) => r.apps), []);
  const sessions = useLoad((signal) => api<{ data: Session[] }>('GET', '/api/whatsapp-sessions', undefined, { signal }).then((r) => r.data), []);
  const failed = useLoad(
    (signal) => api<{ data: Paginated<Dispatch> }>('GET', '/api/dispatches?status=abandoned&per_page=5', undefined, { signal }).then((r) => r.data),
    [],
  );
  const retrying = useLoad(
    (signal) =>
      api<{ data: Paginated<Dispatch> }>('GET', '/api/dispatches?status=pending&per_page=50', undefined, { signal }).then((r) =>
        r.data.data.filter((d) => d.attempt_count > 0),
      ),
    [],
  );
  const used = apps.data?.reduce((sum, a) => sum + a.usedBytes, 0) ?? 0;
  const files = apps.data?.reduce((sum, a) => sum + a.fileCount, 0) ?? 0;
  const connected = sessions.data?.filter((s) => s.status === 'connected').length ?? 0;

  return (
    <>
      <h1 tabIndex={-1}>{org?.name ?? 'Overview'}</h1>
      <div class="stats">
        <a class="stat" href={link('apps')}>
          <strong>{apps.data?.length ?? '–'}</strong> {apps.data?.length === 1 ? 'app' : 'apps'}
        </a>
        <a class="stat" href={link('apps')}>
          <strong>{apps.data ? humanBytes(used) : '–'}</strong> stored in {count(files, 'file')}
        </a>
        <a class="stat" href={link('sessions')}>
          <strong>{sessions.data?.length ?? '–'}</strong> messaging {sessions.data?.length === 1 ? 'session' : 'sessions'}, {connected} connected
        </a>
        <a class="stat" href={link('deliveries')}>
          <strong>{failed.data?.total ?? '–'}</strong> abandoned {failed.data?.total === 1 ? 'delivery' : 'deliveries'}
        </a>
      </div>

      <div class="grid2">
        <Card title="Apps" actions={<a href={link('apps')}>All apps</a>}>
          <ErrorBox error={apps.error} />
          {!apps.data && !apps.error && <Loading what="apps" />}
          {apps.data?.length === 0 && (
            <Empty>
              No apps yet. <a href={link('apps')}>Create one</a>: it gets its own bucket, API tokens and a place to upload files.
            </Empty>
          )}
          <ul class="rows usage-rows">
            {apps.data?.slice(0, 6).map((a) => (
              <li key={a.id}>
                <a href={link('apps', a.id)}>{a.name}</a>
                <Usage used={a.usedBytes} limit={a.storageLimit} />
              </li>
            ))}
          </ul>
        </Card>

        <Card title="Messaging sessions" actions={<a href={link('sessions')}>All sessions</a>}>
          <ErrorBox error={sessions.error} />
          {!sessions.data && !sessions.error && <Loading what="sessions" />}
          {sessions.data?.length === 0 && (
            <Empty>
              No sessions yet. <a href={link('sessions')}>Create a sandbox session</a> to try webhooks without a phone.
            </Empty>
          )}
          <ul class="rows">
            {sessions.data?.slice(0, 6).map((s) => (
              <li key={s.id}>
                <a href={link('sessions', s.id)}>{s.name}</a> <span class="muted">{s.type}</span> <Badge status={s.status} />
              </li>
            ))}
          </ul>
        </Card>
      </div>

      <Card title="Recent failed deliveries" actions={<a href={`${link('deliveries')}?status=abandoned`}>All abandoned</a>}>
        <ErrorBox error={failed.error ?? retrying.error} />
        {failed.data && retrying.data && failed.data.data.length + retrying.data.length === 0 && (
          <Empty>No failed webhook deliveries. Every event your receivers subscribed to got a 2xx answer.</Empty>
        )}
        <ul class="rows">
          {[...(retrying.data ?? []), ...(failed.data?.data ?? [])].map((d) => (
            <li key={d.id}>
              <a href={link('deliveries', d.id)}>
                #{d.id} {d.event}
              </a>{' '}
              <Badge status={d.status} /> <span class="muted">{sessions.data?.find((s) => s.id === d.session_id)?.name ?? `session ${d.session_id}`}</span>{' '}
              <span class="muted">
                {d.last_status_code ? `HTTP ${d.last_status_code}` : (d.last_error ?? '')} · {ago(d.created_at)}
              </span>
            </li>
          ))}
        </ul>
      </Card>
    </>
  );
}
