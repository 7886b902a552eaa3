/** Apps: create (name, storage limit), rename, change the limit, delete (typed confirmation); usage bars. */
import { useState } from 'preact/hooks';
import { DISPLAY_NAME_MAX, STORAGE_LIMIT_MAX } from '../../../../core/limits.ts';
import { ApiError, api } from '../api.ts';
import { Card, Confirm, Dialog, Empty, ErrorBox, Field, Loading, Usage } from '../components.tsx';
import { humanBytes } from '../../../../client/bytes.ts';
import { grouped, when } from '../format.ts';
import { link, type Loaded, useAction, useLoad } from '../hooks.ts';
import type { App } from '../types.ts';

const UNIT = { MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4 } as const;
type Unit = keyof typeof UNIT;

/** A storage limit as the form holds it: a number and a unit, or none. */
export function LimitInput(props: { amount: string; unit: Unit; onAmount(v: string): void; onUnit(v: Unit): void }) {
  return (
    <div class="limit">
      <Field label="Storage limit">
        <input
          type="number"
          min="0"
          step="any"
          inputMode="decimal"
          placeholder="no limit"
          value={props.amount}
          onInput={(e) => props.onAmount(e.currentTarget.value)}
        />
      </Field>
      <Field label="Unit">
        <select value={props.unit} onChange={(e) => props.onUnit(e.currentTarget.value as Unit)}>
          {Object.keys(UNIT).map((u) => (
            <option key={u}>{u}</option>
          ))}
        </select>
      </Field>
    </div>
  );
}

/**
 * Bytes of an amount and unit; null for no limit. Throws what is wrong, in words, for an amount
 * the server would refuse or misread: not a number, negative, more than the server's maximum,
 * or more than nothing but under one byte (which would round to a 0 B limit).
 */
export function limitBytes(amount: string, unit: Unit): number | null {
  if (amount.trim() === '') return null;
  const value = Number(amount);
  const refuse = (why: string) => new ApiError(0, `Storage limit: ${why}. Nothing was saved.`);
  if (!Number.isFinite(value)) throw refuse('not a number');
  if (value < 0) throw refuse('must not be negative');
  const n = Math.round(value * UNIT[unit]);
  if (n > STORAGE_LIMIT_MAX) throw refuse(`too big: at most ${grouped(STORAGE_LIMIT_MAX)} bytes (${humanBytes(STORAGE_LIMIT_MAX)})`);
  if (value > 0 && n < 1) throw refuse('under one byte: give at least 1 byte, 0 for no storage at all, or leave it empty for no limit');
  return n;
}

function limitParts(limit: number | null): { amount: string; unit: Unit } {
  if (limit === null) return { amount: '', unit: 'GiB' };
  const unit: Unit = limit >= UNIT.TiB && limit % UNIT.TiB === 0 ? 'TiB' : limit >= UNIT.GiB && limit % UNIT.GiB === 0 ? 'GiB' : 'MiB';
  return { amount: String(Number((limit / UNIT[unit]).toFixed(3))), unit };
}

export function Apps() {
  const apps = useLoad((signal) => api<{ apps: App[] }>('GET', '/api/apps', undefined, { signal }).then((r) => r.apps), []);
  const [editing, setEditing] = useState<App | null>(null);
  const [deleting, setDeleting] = useState<App | null>(null);
  const remove = useAction(async (app: App) => {
    await api('DELETE', '/api/apps', { appId: app.id });
    setDeleting(null);
    await apps.reload();
  });

  return (
    <>
      <h1 tabIndex={-1}>Apps</h1>
      <p class="lead">Each app owns one storage bucket, its API tokens and its files.</p>
      <CreateApp onCreated={(app) => (location.hash = link('apps', app.id))} />
      <Card title="Your apps">
        <ErrorBox error={apps.error} />
        {!apps.data && !apps.error && <Loading what="apps" />}
        {apps.data?.length === 0 && <Empty>No apps yet: create the first one above.</Empty>}
        {apps.data && apps.data.length > 0 && (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Usage</th>
                <th scope="col">Files</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="sr">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {apps.data.map((a) => (
                <tr key={a.id}>
                  <td data-label="Name">
                    <a href={link('apps', a.id)}>{a.name}</a>
                    <div class="muted mono">{a.bucketName}</div>
                  </td>
                  <td data-label="Usage">
                    <Usage used={a.usedBytes} limit={a.storageLimit} />
                  </td>
                  <td data-label="Files">{grouped(a.fileCount)}</td>
                  <td data-label="Created">{when(a.createdAt)}</td>
                  <td class="row-actions">
                    <button type="button" class="small secondary" onClick={() => setEditing(a)} aria-label={`Edit ${a.name}`}>
                      Edit
                    </button>
                    <button
                      type="button"
                      class="small danger"
                      onClick={() => {
                        remove.clear();
                        setDeleting(a);
                      }}
                      aria-label={`Delete ${a.name}`}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      {editing && <EditApp app={editing} apps={apps} onClose={() => setEditing(null)} />}
      <Confirm
        open={deleting !== null}
        title={`Delete ${deleting?.name ?? ''}?`}
        action="Delete the app"
        typed={deleting?.name ?? ''}
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => deleting && void remove.run(deleting)}
        onClose={() => setDeleting(null)}
      >
        <p>Its bucket is emptied and removed, with every file ({deleting?.fileCount ?? 0} recorded), and its API tokens stop working. This cannot be undone.</p>
      </Confirm>
    </>
  );
}

function CreateApp({ onCreated }: { onCreated(app: App): void }) {
  const [name, setName] = useState('');
  const [amount, setAmount] = useState('');
  const [unit, setUnit] = useState<Unit>('GiB');
  const create = useAction(async () => {
    const app = await api<App>('POST', '/api/apps', { name, storageLimit: limitBytes(amount, unit) });
    onCreated(app);
  });
  return (
    <Card title="Create an app">
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <Field label="Name">
          <input name="name" required maxLength={DISPLAY_NAME_MAX} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <LimitInput amount={amount} unit={unit} onAmount={setAmount} onUnit={setUnit} />
        <button type="submit" disabled={create.busy}>
          {create.busy ? 'Creating…' : 'Create app'}
        </button>
      </form>
      <ErrorBox error={create.error} />
    </Card>
  );
}

/** Rename and change the limit (PATCH /api/apps), in a dialog. */
export function EditApp({ app, apps, onClose }: { app: App; apps: Pick<Loaded<unknown>, 'reload'>; onClose(): void }) {
  const initial = limitParts(app.storageLimit);
  const [name, setName] = useState(app.name);
  const [amount, setAmount] = useState(initial.amount);
  const [unit, setUnit] = useState<Unit>(initial.unit);
  const save = useAction(async () => {
    await api('PATCH', '/api/apps', { appId: app.id, name, storageLimit: limitBytes(amount, unit) });
    await apps.reload();
    onClose();
  });
  return (
    <Dialog open title={`Edit ${app.name}`} onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void save.run();
        }}
      >
        <Field label="Name">
          <input required maxLength={DISPLAY_NAME_MAX} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <LimitInput amount={amount} unit={unit} onAmount={setAmount} onUnit={setUnit} />
        <p class="muted">Lowering the limit below what is stored is allowed: uploads are then refused until files are deleted.</p>
        <ErrorBox error={save.error} />
        <div class="actions">
          <button type="submit" disabled={save.busy}>
            {save.busy ? 'Saving…' : 'Save'}
          </button>
          <button type="button" class="secondary" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}
