/** One app: usage, files, API tokens (create shown once, list, revoke), and the connection details SDKs need. */
import { useState } from 'preact/hooks';
import { DISPLAY_NAME_MAX } from '../../../../core/limits.ts';
import { api, query } from '../api.ts';
import { Card, Command, Confirm, CopyButton, Empty, ErrorBox, Field, Loading, Secret, ShownOnce, Usage } from '../components.tsx';
import { humanBytes } from '../../../../client/bytes.ts';
import { ago, count, when } from '../format.ts';
import { link, useAction, useLoad } from '../hooks.ts';
import type { ApiToken, App } from '../types.ts';
import { EditApp } from './apps.tsx';
import { Files } from './files.tsx';

export function AppDetail({ appId }: { appId: string }) {
  const app = useLoad((signal) => api<{ app: App }>('GET', `/api/apps${query({ appId })}`, undefined, { signal }).then((r) => r.app), [appId]);
  const [editing, setEditing] = useState(false);
  const [newToken, setNewToken] = useState<string | null>(null);

  if (!app.data) {
    return (
      <>
        <p class="crumbs">
          <a href={link('apps')}>Apps</a>
        </p>
        <h1 tabIndex={-1}>App</h1>
        <ErrorBox error={app.error} />
        {!app.error && <Loading what="the app" />}
      </>
    );
  }
  const a = app.data;
  return (
    <>
      <p class="crumbs">
        <a href={link('apps')}>Apps</a> /
      </p>
      <div class="title-row">
        <h1 tabIndex={-1}>{a.name}</h1>
        <button type="button" class="secondary small" onClick={() => setEditing(true)}>
          Rename or change the limit
        </button>
      </div>
      <div class="facts">
        <Usage used={a.usedBytes} limit={a.storageLimit} />
        <span>
          {count(a.fileCount, 'file')}
          {a.unregisteredCount > 0
            ? `, plus ${count(a.unregisteredCount, 'object')} (${humanBytes(a.unregisteredBytes)}) written to the bucket without a record`
            : ''}
          {a.pendingBytes ? `, plus ${humanBytes(a.pendingBytes)} in unfinished multipart uploads (finish or abort them to free it)` : ''}
        </span>
        <span>
          Bucket <code>{a.bucketName}</code>
        </span>
      </div>
      <ErrorBox error={app.error} />
      <Files appId={a.id} onChange={() => void app.reload()} />
      <Tokens app={a} onCreated={setNewToken} />
      <Connection app={a} token={newToken} />
      {editing && <EditApp app={a} apps={app} onClose={() => setEditing(false)} />}
    </>
  );
}

function Tokens({ app, onCreated }: { app: App; onCreated(token: string): void }) {
  const tokens = useLoad(
    (signal) => api<{ tokens: ApiToken[] }>('GET', `/api/tokens${query({ appId: app.id })}`, undefined, { signal }).then((r) => r.tokens),
    [app.id],
  );
  const [name, setName] = useState('');
  const [shown, setShown] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<ApiToken | null>(null);
  const create = useAction(async () => {
    const { token } = await api<{ token: string }>('POST', '/api/tokens', { appId: app.id, name });
    setShown(token);
    setName('');
    onCreated(token);
    await tokens.reload();
  });
  const revoke = useAction(async (token: ApiToken) => {
    await api('DELETE', '/api/tokens', { tokenId: token.id });
    setRevoking(null);
    await tokens.reload();
  });
  return (
    <Card title="API tokens" id="tokens">
      <p class="muted">
        A token lets your backend or SDK reach this app's files (<code>Authorization: Bearer svc_live_…</code>). Only its hash is kept: it is shown once.
      </p>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <Field label="Token name">
          <input required maxLength={DISPLAY_NAME_MAX} value={name} placeholder="e.g. production backend" onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={create.busy}>
          {create.busy ? 'Creating…' : 'Create token'}
        </button>
      </form>
      <ErrorBox error={create.error} />
      {shown && <ShownOnce label="New API token" value={shown} onDone={() => setShown(null)} />}
      <ErrorBox error={tokens.error} />
      {!tokens.data && !tokens.error && <Loading what="tokens" />}
      {tokens.data?.length === 0 && <Empty>No tokens yet.</Empty>}
      {tokens.data && tokens.data.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Token</th>
              <th scope="col">Last used</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="sr">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.data.map((t) => (
              <tr key={t.id}>
                <td data-label="Name">{t.name}</td>
                <td data-label="Token" class="mono">
                  {t.tokenPrefix}…
                </td>
                <td data-label="Last used" title={when(t.lastUsedAt)}>
                  {ago(t.lastUsedAt)}
                </td>
                <td data-label="Created">{when(t.createdAt)}</td>
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
      <Confirm
        open={revoking !== null}
        title={`Revoke ${revoking?.name ?? ''}?`}
        action="Revoke"
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => revoking && void revoke.run(revoking)}
        onClose={() => setRevoking(null)}
      >
        <p>Requests with this token fail from now on.</p>
      </Confirm>
    </Card>
  );
}

interface Validation {
  appId: string;
  bucketName: string;
  storage: { endPoint: string; port: number; useSSL: boolean; accessKey: string; secretKey: string };
}

/** What an SDK is configured with: this instance, and the storage details `POST /api/tokens/validate` gives a token. */
function Connection({ app, token }: { app: App; token: string | null }) {
  const [typed, setTyped] = useState('');
  const used = typed.trim() || token || '';
  const validate = useAction((t: string) => api<Validation>('POST', '/api/tokens/validate', { token: t }, { keepSignedIn: true }));
  const [details, setDetails] = useState<Validation | null>(null);
  const [reveal, setReveal] = useState(false);
  // The block shows the secrets masked until revealed; "Copy all" copies them as they are.
  const envOf = (hide: boolean) =>
    details
      ? [
          `WHARF_URL=${location.origin}`,
          `WHARF_APP_TOKEN=${hide ? `${used.slice(0, 12)}…` : used}`,
          `S3_ENDPOINT=${details.storage.useSSL ? 'https' : 'http'}://${details.storage.endPoint}:${details.storage.port}`,
          `S3_BUCKET=${details.bucketName}`,
          `S3_ACCESS_KEY=${details.storage.accessKey}`,
          `S3_SECRET_KEY=${hide ? '••••••••' : details.storage.secretKey}`,
        ].join('\n')
      : '';
  return (
    <Card title="Connection details for SDKs" id="connection">
      <dl class="kv">
        <dt>API URL</dt>
        <dd>
          <code>{location.origin}</code> <CopyButton text={location.origin} />
        </dd>
        <dt>App id</dt>
        <dd>
          <code>{app.id}</code> <CopyButton text={app.id} />
        </dd>
        <dt>Bucket</dt>
        <dd>
          <code>{app.bucketName}</code>
        </dd>
      </dl>
      <p class="muted">
        An SDK trades its API token for the store's endpoint and keys with <code>POST /api/tokens/validate</code>. Give a token to see what it gets:
      </p>
      <form
        class="inline"
        onSubmit={async (e) => {
          e.preventDefault();
          setDetails((await validate.run(used)) ?? null);
        }}
      >
        <Field label="API token">
          <input
            type="password"
            autocomplete="off"
            value={typed}
            placeholder={token ? 'the token created above' : 'svc_live_…'}
            onInput={(e) => setTyped(e.currentTarget.value)}
          />
        </Field>
        <button type="submit" disabled={!used || validate.busy}>
          Show storage details
        </button>
      </form>
      <ErrorBox error={validate.error} />
      {details && (
        <>
          <dl class="kv">
            <dt>Endpoint</dt>
            <dd>
              <code>
                {details.storage.useSSL ? 'https' : 'http'}://{details.storage.endPoint}:{details.storage.port}
              </code>
            </dd>
            <dt>Access key</dt>
            <dd>
              <code>{details.storage.accessKey}</code>
            </dd>
            <dt>Secret key</dt>
            <dd>
              <Secret value={details.storage.secretKey} label="Secret key" />
            </dd>
          </dl>
          <p>As environment variables:</p>
          <pre class="code">{envOf(!reveal)}</pre>
          <div class="actions">
            <button type="button" class="small secondary" aria-pressed={reveal} onClick={() => setReveal(!reveal)}>
              {reveal ? 'Hide secrets' : 'Reveal secrets'}
            </button>
            <CopyButton text={envOf(false)} label="Copy all" />
          </div>
          <p class="muted">
            From the command line, in the folder where you ran <code>npm start</code>:{' '}
            <Command>{`npx wharf files upload FILE --token $WHARF_APP_TOKEN --instance ${location.origin}`}</Command> (with the single binary:{' '}
            <Command>{`./wharf files upload …`}</Command>).
          </p>
        </>
      )}
    </Card>
  );
}
