/** A session's webhook: URL, enabled, the events (all, none, or picked from the 22), signing mode, secret rotation. */
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api.ts';
import { Card, Confirm, ErrorBox, Field, Loading, Secret } from '../components.tsx';
import { when } from '../format.ts';
import { link, useAction, useLoad } from '../hooks.ts';
import type { Session } from '../types.ts';

const GROUPS: [string, string[]][] = [
  ['Messages', ['messages.received', 'messages.upsert', 'message.sent', 'messages.update', 'messages.delete', 'messages.reaction', 'message-receipt.update']],
  ['Filtered views', ['messages-personal', 'messages-group', 'messages-newsletter']],
  ['Session', ['session.status', 'qrcode.updated']],
  ['Chats', ['chats.upsert', 'chats.update', 'chats.delete']],
  ['Groups', ['groups.upsert', 'groups.update', 'group-participants.update']],
  ['Contacts', ['contacts.upsert', 'contacts.update']],
];
const VIEWS = ['messages-personal', 'messages-group', 'messages-newsletter'];

/** The names the API lists, in the groups above (a name this page does not know goes under Other). */
function grouped(names: string[]): [string, string[]][] {
  const known = new Set(GROUPS.flatMap(([, n]) => n));
  const groups = GROUPS.map(([title, list]) => [title, list.filter((n) => names.includes(n))] as [string, string[]]);
  groups.push(['Other', names.filter((n) => !known.has(n))]);
  return groups.filter(([, list]) => list.length > 0);
}

type Mode = 'all' | 'some' | 'none';

export function WebhookSettings({ session, base, onSaved }: { session: Session; base: string; onSaved(s: Session): void }) {
  const names = useLoad((signal) => api<{ data: string[] }>('GET', '/api/webhook-events', undefined, { signal }).then((r) => r.data), []);
  const signing = useLoad(
    (signal) => api<{ data: { mode: 'secret' | 'hmac' } }>('GET', `${base}/webhook-signing`, undefined, { signal }).then((r) => r.data.mode),
    [base],
  );
  const [url, setUrl] = useState(session.webhook_url ?? '');
  const [enabled, setEnabled] = useState(session.webhook_enabled);
  const [mode, setMode] = useState<Mode>(session.webhook_events === null ? 'none' : session.webhook_events.length === 0 ? 'all' : 'some');
  const [chosen, setChosen] = useState<Set<string>>(new Set(session.webhook_events ?? []));
  const [signMode, setSignMode] = useState<'secret' | 'hmac' | null>(null);
  const [saved, setSaved] = useState(false);
  const [rotating, setRotating] = useState(false);
  const [secret, setSecret] = useState<{ value: string; previousUntil: string | null } | null>(null);

  const mode2 = signMode ?? signing.data ?? 'secret';
  const save = useAction(async () => {
    setSaved(false);
    // The API reads an empty list as "every event": "Only these" with nothing ticked must not save as that.
    if (mode === 'some' && chosen.size === 0) {
      throw new ApiError(0, 'Nothing was saved: tick at least one event under "Only these", or choose "None" to subscribe to no event.');
    }
    const events = mode === 'all' ? [] : mode === 'none' ? null : [...chosen];
    const updated = await api<{ data: Session }>('PUT', base, { webhook_url: url.trim() || null, webhook_enabled: enabled, webhook_events: events });
    if (signing.data !== undefined && mode2 !== signing.data) {
      await api('PUT', `${base}/webhook-signing`, { mode: mode2 });
      await signing.reload();
    }
    onSaved(updated.data);
    setSaved(true);
  });
  const rotate = useAction(async () => {
    const { data } = await api<{ data: { webhook_secret: string; previous_secret_valid_until: string | null } }>('POST', `${base}/rotate-webhook-secret`, {});
    setSecret({ value: data.webhook_secret, previousUntil: data.previous_secret_valid_until });
    setRotating(false);
  });

  const toggle = (name: string) => {
    const next = new Set(chosen);
    if (next.has(name)) next.delete(name);
    else next.add(name);
    setChosen(next);
    setSaved(false);
  };
  const twice = mode === 'some' && chosen.has('messages.received') && VIEWS.some((v) => chosen.has(v));
  const currentSecret = secret?.value ?? session.webhook_secret ?? '';

  return (
    <Card title="Webhook" id="webhook" actions={<a href={`${link('deliveries')}?session=${session.id}`}>Deliveries of this session</a>}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void save.run();
        }}
        onInput={() => setSaved(false)}
      >
        <div class="inline">
          <Field label="URL" hint="Every matching event is POSTed here, signed, with retries">
            <input name="webhook_url" type="url" value={url} placeholder="https://example.com/hooks/wharf" onInput={(e) => setUrl(e.currentTarget.value)} />
          </Field>
          <label class="check">
            <input type="checkbox" name="webhook_enabled" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Enabled
          </label>
        </div>
        <fieldset class="choice">
          <legend>Events</legend>
          <label>
            <input type="radio" name="events-mode" checked={mode === 'all'} onChange={() => setMode('all')} /> All events
          </label>
          <label>
            <input type="radio" name="events-mode" checked={mode === 'some'} onChange={() => setMode('some')} /> Only these:
          </label>
          <label>
            <input type="radio" name="events-mode" checked={mode === 'none'} onChange={() => setMode('none')} /> None
          </label>
        </fieldset>
        {mode === 'some' && (
          <div class="events">
            <ErrorBox error={names.error} />
            {!names.data && !names.error && <Loading what="the event names" />}
            {names.data &&
              grouped(names.data).map(([title, list]) => (
                <fieldset key={title}>
                  <legend>{title}</legend>
                  {list.map((name) => (
                    <label key={name} class="event">
                      <input type="checkbox" name="event" value={name} checked={chosen.has(name)} onChange={() => toggle(name)} /> <code>{name}</code>
                    </label>
                  ))}
                </fieldset>
              ))}
            <p class="muted">
              The filtered views deliver the messages.received messages of one kind of chat only. Subscribed together with messages.received, each message
              arrives twice.
            </p>
            {twice && (
              <p class="warn" role="status">
                messages.received and a filtered view are both chosen: those messages will be delivered twice.
              </p>
            )}
          </div>
        )}
        <Field label="Signing" class="narrow">
          <select
            value={mode2}
            onChange={(e) => {
              setSignMode(e.currentTarget.value as 'secret' | 'hmac');
              setSaved(false);
            }}
          >
            <option value="secret">X-Webhook-Signature is the secret itself</option>
            <option value="hmac">HMAC-SHA256 of the body (and Standard Webhooks headers)</option>
          </select>
        </Field>
        <ErrorBox error={save.error ?? signing.error} />
        <button type="submit" disabled={save.busy}>
          {save.busy ? 'Saving…' : 'Save webhook settings'}
        </button>{' '}
        {saved && (
          <span role="status" class="ok">
            Saved.
          </span>
        )}
      </form>

      <h3>Secret</h3>
      {currentSecret && <Secret value={currentSecret} label="Webhook secret" />}
      {secret && (
        <p role="status" class="ok">
          New secret in use.{' '}
          {secret.previousUntil ? `Deliveries carry the old secret's signature too until ${when(secret.previousUntil)}.` : 'The old one no longer signs.'}
        </p>
      )}
      <button
        type="button"
        class="secondary small"
        onClick={() => {
          rotate.clear();
          setRotating(true);
        }}
      >
        Rotate the secret
      </button>
      <Confirm
        open={rotating}
        title="Rotate the webhook secret?"
        action="Rotate"
        busy={rotate.busy}
        error={rotate.error}
        onConfirm={() => void rotate.run()}
        onClose={() => setRotating(false)}
      >
        <p>A new secret signs deliveries from now on; for a grace period they carry the old one's signature as well, so receivers can switch.</p>
      </Confirm>
    </Card>
  );
}
