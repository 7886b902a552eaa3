/**
 * One messaging session: its status live, pairing (QR code or pairing code), connect, disconnect
 * and restart, the API key, the webhook settings, a sandbox's "receive a message" form, its logs.
 */
import { useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { Badge, Card, Confirm, Empty, ErrorBox, Field, Loading, Pager, Secret, StatusReason } from '../components.tsx';
import { when } from '../format.ts';
import { link, useAction, useLoad } from '../hooks.ts';
import { liveText, useSessionEvents } from '../live.ts';
import { QrCode } from '../qr.tsx';
import { useMe } from '../session.ts';
import type { Member, Paginated, Session, SessionStatus } from '../types.ts';
import { WebhookSettings } from './webhook.tsx';

interface Pairing {
  qrCode?: string;
  pairingCode?: string;
  message?: string;
}

export function SessionDetail({ sessionId }: { sessionId: string }) {
  const base = `/api/whatsapp-sessions/${encodeURIComponent(sessionId)}`;
  const session = useLoad((signal) => api<{ data: Session }>('GET', base, undefined, { signal }).then((r) => r.data), [sessionId]);
  const [pairing, setPairing] = useState<Pairing | null>(null);
  const [deleting, setDeleting] = useState(false);

  const live = useSessionEvents({ sessionId, events: ['session.status', 'qrcode.updated'] }, (e) => {
    if (e.event === 'session.status') {
      const status = e.data?.status as SessionStatus | undefined;
      const reason = typeof e.data?.reason === 'string' ? e.data.reason : null;
      if (status) session.set((s) => s && { ...s, status, status_reason: reason });
      if (status && status !== 'need_scan') setPairing(null);
    } else if (e.event === 'qrcode.updated') {
      const qr = e.data?.qr;
      if (typeof qr === 'string') setPairing({ qrCode: qr });
    }
  });

  const remove = useAction(async () => {
    await api('DELETE', base);
    location.hash = link('sessions');
  });

  if (!session.data) {
    return (
      <>
        <p class="crumbs">
          <a href={link('sessions')}>Messaging sessions</a> /
        </p>
        <h1 tabIndex={-1}>Session {sessionId}</h1>
        <ErrorBox error={session.error} />
        {!session.error && <Loading what="the session" />}
      </>
    );
  }
  const s = session.data;
  return (
    <>
      <p class="crumbs">
        <a href={link('sessions')}>Messaging sessions</a> /
      </p>
      <div class="title-row">
        <h1 tabIndex={-1}>{s.name}</h1>
        <span data-testid="session-status">
          <Badge status={s.status} />
        </span>
      </div>
      <div class="facts">
        <span>{s.type === 'sandbox' ? 'Sandbox' : 'WhatsApp'}</span>
        <span class="mono">{s.phone_number}</span>
        <span>Session id {s.id}</span>
        <span class={`live l-${live.state}`}>{liveText(live)}</span>
      </div>

      <Connection
        session={s}
        base={base}
        pairing={pairing}
        onPairing={setPairing}
        onAnswer={(status, reason) => session.set((old) => old && { ...old, status, status_reason: reason })}
      />
      <ApiKey session={s} base={base} onKey={(api_key) => session.set((old) => old && { ...old, api_key })} />
      <WebhookSettings session={s} base={base} onSaved={(updated) => session.set(() => updated)} />
      {s.type === 'sandbox' && <Receive session={s} />}
      <Logs base={base} session={s} />

      <Card title="Delete the session">
        <p>Its API key stops working at once and its webhook gets no more events.</p>
        <button type="button" class="danger" onClick={() => setDeleting(true)}>
          Delete {s.name}
        </button>
      </Card>
      <Confirm
        open={deleting}
        title={`Delete ${s.name}?`}
        action="Delete the session"
        typed={s.name}
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onClose={() => setDeleting(false)}
      />
    </>
  );
}

function Connection(props: {
  session: Session;
  base: string;
  pairing: Pairing | null;
  onPairing(p: Pairing | null): void;
  /** A connect, disconnect or restart answered: its status and what it said. */
  onAnswer(status: SessionStatus, reason: string | null): void;
}) {
  const { session: s, base, pairing } = props;
  const act = useAction(async (what: 'connect' | 'disconnect' | 'restart') => {
    const answer = await api<{ data: { status: SessionStatus } & Pairing }>('POST', `${base}/${what}`, {});
    props.onPairing(answer.data.qrCode || answer.data.pairingCode ? answer.data : null);
    props.onAnswer(answer.data.status, answer.data.message ?? null);
    return answer.data;
  });
  // A page opened while a session waits for its scan shows the current QR code.
  const qr = useLoad(
    async (signal) =>
      s.status === 'need_scan' && !pairing
        ? api<{ data: { qrCode: string } }>('GET', `${base}/qrcode`, undefined, { signal }).then((r) => r.data.qrCode)
        : null,
    [s.status === 'need_scan'],
  );
  const shownQr = pairing?.qrCode ?? (s.status === 'need_scan' ? qr.data : null);
  const sandbox = s.type === 'sandbox';
  return (
    <Card title="Connection" id="connection">
      <p>
        Status: <Badge status={s.status} />
        {sandbox && <span class="muted"> A sandbox session is connected from its creation.</span>}
      </p>
      <div class="actions">
        <button type="button" disabled={act.busy || s.status === 'connected'} onClick={() => void act.run('connect')}>
          Connect
        </button>
        <button type="button" class="secondary" disabled={act.busy || s.status === 'disconnected'} onClick={() => void act.run('disconnect')}>
          Disconnect
        </button>
        <button type="button" class="secondary" disabled={act.busy || s.status !== 'connected'} onClick={() => void act.run('restart')}>
          Restart
        </button>
      </div>
      <ErrorBox error={act.error ?? (s.status === 'need_scan' ? qr.error : undefined)} />
      <StatusReason session={s} all />
      {shownQr && (
        <div class="pairing">
          <QrCode value={shownQr} label="QR code to pair the phone" />
          <p>On the phone: WhatsApp → Settings → Linked devices → Link a device, and scan this code. It changes every few seconds; this page follows.</p>
        </div>
      )}
      {pairing?.pairingCode && (
        <div class="pairing">
          <p>
            Pairing code: <code class="big">{pairing.pairingCode}</code>
          </p>
          <p>On the phone: WhatsApp → Linked devices → Link with phone number instead, and type this code.</p>
        </div>
      )}
    </Card>
  );
}

function ApiKey({ session, base, onKey }: { session: Session; base: string; onKey(key: string): void }) {
  const [confirming, setConfirming] = useState(false);
  const regenerate = useAction(async () => {
    const { api_key } = await api<{ api_key: string }>('POST', `${base}/regenerate-key`, {});
    onKey(api_key);
    setConfirming(false);
  });
  return (
    <Card title="API key" id="api-key">
      <p class="muted">
        Acts as this account: sending, contacts, groups (<code>Authorization: Bearer wsk_…</code>). Keep it on your server.
      </p>
      <Secret value={session.api_key} label="Session API key" />
      <button
        type="button"
        class="secondary small"
        onClick={() => {
          regenerate.clear();
          setConfirming(true);
        }}
      >
        Regenerate
      </button>
      <Confirm
        open={confirming}
        title="Regenerate the API key?"
        action="Regenerate"
        busy={regenerate.busy}
        error={regenerate.error}
        onConfirm={() => void regenerate.run()}
        onClose={() => setConfirming(false)}
      >
        <p>The current key stops working at once.</p>
      </Confirm>
    </Card>
  );
}

/** Makes a sandbox session receive a text (`POST /api/sandbox/receive` with the session's key). */
function Receive({ session }: { session: Session }) {
  const [from, setFrom] = useState('+14155550123');
  const [text, setText] = useState('Hello from the dashboard');
  const [pushName, setPushName] = useState('');
  const [chat, setChat] = useState<'personal' | 'group' | 'newsletter'>('personal');
  const [groupJid, setGroupJid] = useState('');
  const receive = useAction(async () => {
    const body: Record<string, unknown> = { from, text, chat };
    if (pushName.trim()) body.pushName = pushName.trim();
    if (chat === 'group' && groupJid.trim()) body.groupJid = groupJid.trim();
    const answer = await api<{ data: { key: { id: string } } }>('POST', '/api/sandbox/receive', body, { bearer: session.api_key });
    return answer.data.key;
  });
  const [received, setReceived] = useState<{ id: string } | null>(null);
  return (
    <Card title="Receive a message" id="receive">
      <p class="muted">Makes this sandbox account receive a text, as if someone sent it: the webhook gets the events.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setReceived((await receive.run()) ?? null);
        }}
      >
        <div class="inline">
          <Field label="From">
            <input name="from" type="tel" required value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
          </Field>
          <Field label="Sender name">
            <input name="pushName" value={pushName} placeholder="optional" onInput={(e) => setPushName(e.currentTarget.value)} />
          </Field>
          <Field label="Chat">
            <select name="chat" value={chat} onChange={(e) => setChat(e.currentTarget.value as typeof chat)}>
              <option value="personal">personal</option>
              <option value="group">group</option>
              <option value="newsletter">newsletter</option>
            </select>
          </Field>
          {chat === 'group' && (
            <Field label="Group JID">
              <input name="groupJid" value={groupJid} placeholder="optional, …@g.us" onInput={(e) => setGroupJid(e.currentTarget.value)} />
            </Field>
          )}
        </div>
        <Field label="Text">
          <textarea name="text" required rows={2} value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </Field>
        <ErrorBox error={receive.error} />
        <button type="submit" disabled={receive.busy}>
          {receive.busy ? 'Sending…' : 'Receive it'}
        </button>
      </form>
      {received && (
        <p role="status" class="ok">
          Received: message <code>{received.id}</code>. <a href={`${link('deliveries')}?session=${session.id}`}>See its deliveries</a>
        </p>
      )}
    </Card>
  );
}

interface MessageRow {
  id: number;
  to: string;
  type: string;
  status: string;
  error: string | null;
  created_at: string;
}
interface AuditRow {
  id: number;
  action: string;
  actor: { kind: string; id: string | null; user_id: string | null };
  ip: string | null;
  created_at: string;
}
interface StatusRow {
  id: number;
  event_type: string;
  status: string;
  reason: string | null;
  occurred_at: string;
}

/**
 * Who did an audited action, in words: a person by name (or email), the session's API key by the
 * session's name. The API records ids (`session` = a dashboard sign-in, whose id is the user's;
 * `pat` = a personal access token, with its user); names come from the organization's members.
 */
function actorText(actor: AuditRow['actor'], session: Session, members: Member[] | undefined): string {
  const person = (userId: string | null) => {
    if (!userId) return 'someone';
    const member = members?.find((m) => m.userId === userId);
    return member ? (member.name ?? member.email ?? 'a member') : 'a former member';
  };
  switch (actor.kind) {
    case 'session':
    case 'oauth':
      return person(actor.user_id ?? actor.id);
    case 'pat':
      return `${person(actor.user_id)}, with a personal access token`;
    case 'sessionKey':
      return actor.id === String(session.id) ? `The API key of ${session.name}` : 'The API key of another session';
    case 'system':
      return 'Wharf itself';
    default:
      return actor.kind;
  }
}

function Logs({ base, session }: { base: string; session: Session }) {
  const { org } = useMe();
  const members = useLoad(
    (signal) => (org ? api<{ members: Member[] }>('GET', `/api/orgs/${org.id}/members`, undefined, { signal }).then((r) => r.members) : Promise.resolve([])),
    [org?.id],
  );
  const [tab, setTab] = useState<'message-logs' | 'audit-logs' | 'session-logs'>('message-logs');
  const [page, setPage] = useState(1);
  const logs = useLoad(
    (signal) => api<{ data: Paginated<MessageRow | AuditRow | StatusRow> }>('GET', `${base}/${tab}${query({ page, per_page: 10 })}`, undefined, { signal }),
    [base, tab, page],
  );
  const rows = logs.data?.data.data ?? [];
  const tabs = [
    ['message-logs', 'Messages'],
    ['audit-logs', 'Audit'],
    ['session-logs', 'Connection'],
  ] as const;
  // What each log lists: received messages are not in the message log, they go to the webhook.
  const about = {
    'message-logs': 'Messages this session sent. Messages it receives are not listed here: they are delivered to its webhook (see its deliveries).',
    'audit-logs': 'Actions on this session: who did what, and from where.',
    'session-logs': "Changes of the connection's status.",
  } as const;
  return (
    <Card
      title="Logs"
      id="logs"
      actions={
        <button type="button" class="small secondary" onClick={() => void logs.reload()}>
          Refresh
        </button>
      }
    >
      <div role="tablist" class="tabs" aria-label="Logs">
        {tabs.map(([id, label]) => (
          <button
            key={id}
            type="button"
            role="tab"
            aria-selected={tab === id}
            onClick={() => {
              setTab(id);
              setPage(1);
            }}
          >
            {label}
          </button>
        ))}
      </div>
      <div role="tabpanel">
        <ErrorBox error={logs.error} />
        {!logs.data && !logs.error && <Loading what="the log" />}
        <p class="muted">{about[tab]}</p>
        {logs.data && rows.length === 0 && <Empty>{tab === 'message-logs' ? 'No messages sent yet.' : 'Nothing logged yet.'}</Empty>}
        {rows.length > 0 && tab === 'message-logs' && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Sent</th>
                <th scope="col">To</th>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {(rows as MessageRow[]).map((r) => (
                <tr key={r.id}>
                  <td data-label="Sent">{when(r.created_at)}</td>
                  <td data-label="To" class="mono">
                    {r.to}
                  </td>
                  <td data-label="Type">{r.type}</td>
                  <td data-label="Status">
                    {r.status}
                    {r.error ? `: ${r.error}` : ''}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {rows.length > 0 && tab === 'audit-logs' && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Action</th>
                <th scope="col">By</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {(rows as AuditRow[]).map((r) => (
                <tr key={r.id}>
                  <td data-label="When">{when(r.created_at)}</td>
                  <td data-label="Action" class="mono">
                    {r.action}
                  </td>
                  <td data-label="By">{actorText(r.actor, session, members.data)}</td>
                  <td data-label="From" class="mono">
                    {r.ip ?? ''}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {rows.length > 0 && tab === 'session-logs' && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Status</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {(rows as StatusRow[]).map((r) => (
                <tr key={r.id}>
                  <td data-label="When">{when(r.occurred_at)}</td>
                  <td data-label="Status">
                    <Badge status={r.status} />
                  </td>
                  <td data-label="Reason">{r.reason ?? r.event_type}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {logs.data && <Pager page={logs.data.data.current_page} pages={logs.data.data.last_page} total={logs.data.data.total} onPage={setPage} />}
      </div>
    </Card>
  );
}
