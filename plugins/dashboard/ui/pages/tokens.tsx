/** Personal access tokens: create (shown once), list, revoke. */
import { useState } from 'preact/hooks';
import { DISPLAY_NAME_MAX } from '../../../../core/limits.ts';
import { api } from '../api.ts';
import { Card, Confirm, Empty, ErrorBox, Field, Loading, ShownOnce } from '../components.tsx';
import { ago, when } from '../format.ts';
import { useAction, useLoad } from '../hooks.ts';
import { useMe } from '../session.ts';
import type { Pat } from '../types.ts';

export function PersonalTokens() {
  const { me, org } = useMe();
  const tokens = useLoad((signal) => api<{ data: Pat[] }>('GET', '/api/personal-access-tokens', undefined, { signal }).then((r) => r.data), []);
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('');
  const [shown, setShown] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<Pat | null>(null);
  const create = useAction(async () => {
    const body: Record<string, unknown> = { name };
    if (expires) body.expires_at = new Date(`${expires}T23:59:59`).toISOString();
    const { data } = await api<{ data: Pat & { token: string } }>('POST', '/api/personal-access-tokens', body);
    setShown(data.token);
    setName('');
    setExpires('');
    await tokens.reload();
  });
  const revoke = useAction(async (pat: Pat) => {
    await api('DELETE', `/api/personal-access-tokens/${pat.id}`);
    setRevoking(null);
    await tokens.reload();
  });
  const manager = org?.role === 'owner' || org?.role === 'admin';
  return (
    <>
      <h1 tabIndex={-1}>Personal access tokens</h1>
      <p class="lead">
        A personal access token (<code>wpat_…</code>) manages messaging sessions for you in <strong>{org?.name}</strong> from scripts and SDKs: create, connect,
        webhooks, deliveries. {manager ? 'As a manager you see every token of the organization.' : 'You see your own tokens.'}
      </p>
      <Card title="Create a token">
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            void create.run();
          }}
        >
          <Field label="Name">
            <input required maxLength={DISPLAY_NAME_MAX} value={name} placeholder="e.g. deploy script" onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <Field label="Expires" hint="Empty: never">
            <input type="date" value={expires} min={new Date().toISOString().slice(0, 10)} onInput={(e) => setExpires(e.currentTarget.value)} />
          </Field>
          <button type="submit" disabled={create.busy}>
            {create.busy ? 'Creating…' : 'Create token'}
          </button>
        </form>
        <ErrorBox error={create.error} />
        {shown && <ShownOnce label="New personal access token" value={shown} onDone={() => setShown(null)} />}
      </Card>
      <Card title="Tokens">
        <ErrorBox error={tokens.error} />
        {!tokens.data && !tokens.error && <Loading what="tokens" />}
        {tokens.data?.length === 0 && <Empty>No tokens yet.</Empty>}
        {tokens.data && tokens.data.length > 0 && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Ends in</th>
                <th scope="col">Last used</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.data.map((t) => (
                <tr key={t.id}>
                  <td data-label="Name">
                    {t.name}
                    {t.user_id !== me.user.id && <div class="muted">another member's</div>}
                  </td>
                  <td data-label="Ends in" class="mono">
                    {t.hint}
                  </td>
                  <td data-label="Last used" title={when(t.last_used_at)}>
                    {ago(t.last_used_at)}
                  </td>
                  <td data-label="Created">{when(t.created_at)}</td>
                  <td data-label="Expires">{t.expires_at ? when(t.expires_at) : 'never'}</td>
                  <td class="row-actions">
                    <button
                      type="button"
                      class="small danger"
                      aria-label={`Revoke ${t.name}`}
                      onClick={() => {
                        revoke.clear();
                        setRevoking(t);
                      }}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      <Confirm
        open={revoking !== null}
        title={`Revoke ${revoking?.name ?? ''}?`}
        action="Revoke"
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => revoking && void revoke.run(revoking)}
        onClose={() => setRevoking(null)}
      >
        <p>Requests with this token fail from the next one on.</p>
      </Confirm>
    </>
  );
}
