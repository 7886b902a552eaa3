/** Messaging sessions: create (WhatsApp or sandbox), and the list with each status live. */
import { useState } from 'preact/hooks';
import { DISPLAY_NAME_MAX } from '../../../../core/limits.ts';
import { api } from '../api.ts';
import { Badge, Card, Empty, ErrorBox, Field, Loading, StatusReason } from '../components.tsx';
import { when } from '../format.ts';
import { link, useAction, useLoad } from '../hooks.ts';
import { liveText, useSessionEvents } from '../live.ts';
import type { Session, SessionStatus } from '../types.ts';

export function Sessions() {
  const sessions = useLoad((signal) => api<{ data: Session[] }>('GET', '/api/whatsapp-sessions', undefined, { signal }).then((r) => r.data), []);
  const live = useSessionEvents({ events: ['session.status'] }, (e) => {
    const status = e.data?.status as SessionStatus | undefined;
    if (!status) return;
    if (!sessions.data?.some((s) => s.id === e.sessionId)) {
      // A session this page has not seen (created elsewhere): read the list again.
      void sessions.reload();
      return;
    }
    const reason = typeof e.data?.reason === 'string' ? e.data.reason : null;
    sessions.set((list) => list?.map((s) => (s.id === e.sessionId ? { ...s, status, status_reason: reason } : s)));
  });

  return (
    <>
      <h1 tabIndex={-1}>Messaging sessions</h1>
      <p class="lead">
        A session is one messaging account: a WhatsApp number, or a sandbox account for testing that needs no phone. Its events go to its webhook.
      </p>
      <CreateSession onCreated={(s) => (location.hash = link('sessions', s.id))} />
      <Card title="Sessions" actions={<span class={`live l-${live.state}`}>{liveText(live)}</span>}>
        <ErrorBox error={sessions.error} />
        {!sessions.data && !sessions.error && <Loading what="sessions" />}
        {sessions.data?.length === 0 && <Empty>No sessions yet.</Empty>}
        {sessions.data && sessions.data.length > 0 && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Type</th>
                <th scope="col">Number</th>
                <th scope="col">Status</th>
                <th scope="col">Webhook</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {sessions.data.map((s) => (
                <tr key={s.id}>
                  <td data-label="Name">
                    <a href={link('sessions', s.id)}>{s.name}</a>
                  </td>
                  <td data-label="Type">{s.type}</td>
                  <td data-label="Number" class="mono">
                    {s.phone_number}
                  </td>
                  <td data-label="Status">
                    <span data-session-status={s.id}>
                      <Badge status={s.status} />
                    </span>
                    <StatusReason session={s} />
                  </td>
                  <td data-label="Webhook">{s.webhook_url ? (s.webhook_enabled ? 'on' : 'off') : '—'}</td>
                  <td data-label="Created">{when(s.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </>
  );
}

function CreateSession({ onCreated }: { onCreated(s: Session): void }) {
  const [type, setType] = useState<'sandbox' | 'whatsapp'>('sandbox');
  const [name, setName] = useState('');
  const [phone, setPhone] = useState('');
  const [webhook, setWebhook] = useState('');
  const create = useAction(async () => {
    const body: Record<string, unknown> = { name };
    if (phone.trim()) body.phone_number = phone.trim();
    // A URL given at creation is meant to receive: subscribe to every event and enable it.
    if (webhook.trim()) Object.assign(body, { webhook_url: webhook.trim(), webhook_enabled: true, webhook_events: [] });
    const created =
      type === 'sandbox'
        ? await api<{ data: Session }>('POST', '/api/sandbox-sessions', body)
        : await api<{ data: Session }>('POST', '/api/whatsapp-sessions', { ...body, type: 'whatsapp' });
    onCreated(created.data);
  });
  return (
    <Card title="Create a session">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <fieldset class="choice">
          <legend>Network</legend>
          <label>
            <input type="radio" name="type" value="sandbox" checked={type === 'sandbox'} onChange={() => setType('sandbox')} /> Sandbox (always connected, for
            testing)
          </label>
          <label>
            <input type="radio" name="type" value="whatsapp" checked={type === 'whatsapp'} onChange={() => setType('whatsapp')} /> WhatsApp (pair a phone with a
            QR code)
          </label>
        </fieldset>
        <div class="inline">
          <Field label="Name">
            <input name="name" required maxLength={DISPLAY_NAME_MAX} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <Field label="Phone number" hint={type === 'sandbox' ? 'Optional: without one, a +1555… number is made up' : 'The account’s number, E.164'}>
            <input
              name="phone_number"
              type="tel"
              required={type === 'whatsapp'}
              placeholder="+14155550123"
              value={phone}
              onInput={(e) => setPhone(e.currentTarget.value)}
            />
          </Field>
          <Field label="Webhook URL" hint="Optional: receives every event">
            <input
              name="webhook_url"
              type="url"
              placeholder="https://example.com/hooks/wharf"
              value={webhook}
              onInput={(e) => setWebhook(e.currentTarget.value)}
            />
          </Field>
        </div>
        <ErrorBox error={create.error} />
        <button type="submit" disabled={create.busy}>
          {create.busy ? 'Creating…' : 'Create session'}
        </button>
      </form>
    </Card>
  );
}
