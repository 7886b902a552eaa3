/** Pieces every page uses: errors in place, copy buttons, secrets, dialogs, pagers, meters, badges. */
import { type ComponentChildren, cloneElement, type VNode } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import type { ApiError } from './api.ts';
import { humanBytes } from '../../../client/bytes.ts';
import { grouped } from './format.ts';

/** An API error where it happened: the server's message, and each field's complaints. */
export function ErrorBox({ error, id }: { error: ApiError | undefined; id?: string }) {
  if (!error) return null;
  const fields = error.fields ? Object.entries(error.fields) : [];
  return (
    <div class="error" role="alert" id={id}>
      <strong>{error.status ? `Error ${error.status}: ` : ''}</strong>
      {error.message}
      {fields.length > 0 && (
        <ul>
          {fields.flatMap(([field, messages]) =>
            messages.map((message) => (
              <li key={`${field}:${message}`} data-field={field}>
                {named(field, message)}
              </li>
            )),
          )}
        </ul>
      )}
    </div>
  );
}

/**
 * One field's complaint as the server wrote it: Wharf's messages start with the field's name
 * ("phone_number: must be…", "webhook_url points to…"), so the name is added only to one that does not.
 */
function named(field: string, message: string): string {
  return message.startsWith(field) ? message : `${field}: ${message}`;
}

/** Copies `text`; says whether it worked (the clipboard API needs a secure context, so there is a fallback). */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  async function copy() {
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.className = 'offscreen';
      document.body.append(area);
      area.select();
      ok = document.execCommand('copy');
      area.remove();
    }
    setState(ok ? 'copied' : 'failed');
    setTimeout(() => setState('idle'), 2500);
  }
  return (
    <button type="button" class="small secondary" onClick={copy}>
      <span aria-live="polite">{state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed: select it' : label}</span>
    </button>
  );
}

/** A secret, masked until revealed, with a copy button. */
export function Secret({ value, label }: { value: string; label: string }) {
  const [shown, setShown] = useState(false);
  return (
    <div class="secret">
      <span class="sr">{label}: </span>
      <code data-secret={shown ? 'shown' : 'hidden'}>{shown ? value : `${value.slice(0, Math.min(8, value.length - 4))}${'•'.repeat(12)}`}</code>
      <button type="button" class="small" aria-pressed={shown} onClick={() => setShown(!shown)}>
        {shown ? 'Hide' : 'Reveal'}
      </button>
      <CopyButton text={value} />
    </div>
  );
}

/** A value shown once (a new token): plain, selectable, with a copy button and a warning. */
export function ShownOnce({ label, value, onDone }: { label: string; value: string; onDone(): void }) {
  return (
    <div class="once" role="status">
      <p>
        <strong>{label}</strong> — copy it now: it is shown only this once.
      </p>
      <div class="secret">
        <code class="wrap" data-testid="shown-once">
          {value}
        </code>
        <CopyButton text={value} />
      </div>
      <button type="button" class="small secondary" onClick={onDone}>
        I have copied it
      </button>
    </div>
  );
}

/**
 * A modal dialog (the browser's own `<dialog>`: focus moves in, Escape closes, the page behind
 * is inert). `props.open` is the only truth: Escape asks `onClose` (the browser's `cancel` event,
 * dispatched before it would close) and the effect closes it. Listening to `close` instead lost
 * a quick reopen: that event is queued, and one arriving after the dialog was opened again closed it.
 */
export function Dialog(props: { open: boolean; title: string; onClose(): void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  /** What had the focus when the dialog opened; null while it is closed. */
  const opener = useRef<HTMLElement | null>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) {
      opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
      dialog.showModal();
    }
    if (!props.open && dialog.open) {
      // The browser gives the focus back itself on close().
      opener.current = null;
      dialog.close();
    }
  }, [props.open]);
  // Unmounted while open (a dialog rendered only while its state is set): the removal closed it
  // without giving the focus back, so it would be left on <body>.
  useEffect(
    () => () => {
      if (opener.current?.isConnected) opener.current.focus();
    },
    [],
  );
  return (
    <dialog
      ref={ref}
      aria-label={props.title}
      onCancel={(e) => {
        e.preventDefault();
        props.onClose();
      }}
    >
      {props.open && (
        <>
          <h2>{props.title}</h2>
          {props.children}
        </>
      )}
    </dialog>
  );
}

/**
 * Asks before a destructive action. With `typed`, the action waits until that exact text is
 * typed (deleting an app or a session). Errors of the action stay in the dialog.
 */
export function Confirm(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  action: string;
  typed?: string;
  busy?: boolean;
  error?: ApiError | undefined;
  onConfirm(): void;
  onClose(): void;
}) {
  const [text, setText] = useState('');
  useEffect(() => setText(''), [props.open]);
  const ready = !props.typed || text === props.typed;
  return (
    <Dialog open={props.open} title={props.title} onClose={props.onClose}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (ready && !props.busy) props.onConfirm();
        }}
      >
        {props.children}
        {props.typed !== undefined && (
          <label class="typed">
            Type <strong>{props.typed}</strong> to confirm
            <input value={text} onInput={(e) => setText(e.currentTarget.value)} autocomplete="off" spellcheck={false} required />
          </label>
        )}
        <ErrorBox error={props.error} />
        <div class="actions">
          <button type="submit" class="danger" disabled={!ready || props.busy}>
            {props.busy ? 'Working…' : props.action}
          </button>
          {/* Without a typed confirmation the focus starts on Cancel, so Enter alone destroys nothing. */}
          <button type="button" class="secondary" onClick={props.onClose} autofocus={props.typed === undefined}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** Previous / next through pages of a list. */
export function Pager({ page, pages, total, onPage }: { page: number; pages: number; total: number; onPage(page: number): void }) {
  if (total === 0) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="small secondary" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        ← Previous
      </button>
      <span>
        Page {grouped(page)} of {grouped(Math.max(1, pages))} · {grouped(total)} in all
      </span>
      <button type="button" class="small secondary" disabled={page >= pages} onClick={() => onPage(page + 1)}>
        Next →
      </button>
    </nav>
  );
}

/** Storage used against the limit, as a bar and in words. */
export function Usage({ used, limit }: { used: number; limit: number | null }) {
  const over = limit !== null && used > limit;
  return (
    <div class="usage">
      {limit !== null ? (
        <meter min={0} max={Math.max(limit, 1)} value={Math.min(used, limit)} high={limit * 0.8} optimum={0} aria-label="Storage used" />
      ) : (
        <meter min={0} max={1} value={0} aria-label="Storage used (no limit)" />
      )}
      <span class={over ? 'over' : ''}>
        {humanBytes(used)} {limit !== null ? `of ${humanBytes(limit)}` : 'used, no limit'}
        {over ? ' (over the limit)' : ''}
      </span>
    </div>
  );
}

const STATUS_WORDS: Record<string, string> = {
  connected: 'Connected',
  connecting: 'Connecting',
  disconnected: 'Disconnected',
  need_scan: 'Waiting for scan',
  logged_out: 'Logged out',
  expired: 'Expired',
  pending: 'Pending',
  delivered: 'Delivered',
  abandoned: 'Abandoned',
};

export function Badge({ status }: { status: string }) {
  return <span class={`badge s-${status}`}>{STATUS_WORDS[status] ?? status}</span>;
}

/**
 * Why a session has its status (the last failed attempt, a close, what a connect answered): kept
 * by the server, so it survives a reload. Lists show it only for a session that is not connected.
 */
export function StatusReason({ session, all = false }: { session: { id: number; status: string; status_reason: string | null }; all?: boolean }) {
  if (!session.status_reason || (!all && session.status === 'connected')) return null;
  return (
    <p class="muted reason" role={all ? 'status' : undefined} data-session-reason={session.id}>
      {session.status_reason}
    </p>
  );
}

/** Nothing to show yet, said plainly. */
export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/**
 * A labelled form control: the label names the control by `for` (so its accessible name is the
 * label alone, not the control's value too), with an optional hint tied by `aria-describedby`.
 */
export function Field({ label, hint, children, class: className }: { label: string; hint?: string; children: VNode; class?: string }) {
  const id = useId();
  const control = cloneElement(children, { id, ...(hint ? { 'aria-describedby': `${id}-hint` } : {}) });
  return (
    <div class={`field ${className ?? ''}`}>
      <label for={id}>{label}</label>
      {control}
      {hint && <small id={`${id}-hint`}>{hint}</small>}
    </div>
  );
}

/** A section of a page with its heading. */
export function Card(props: { title: string; id?: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const { title, actions, children, id } = props;
  const headingId = `${id ?? title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-title`;
  return (
    <section class="card" id={id} aria-labelledby={headingId}>
      <div class="card-head">
        <h2 id={headingId}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** A loading line that does not jump the layout. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" aria-busy="true">
      Loading {what}…
    </p>
  );
}

/**
 * A command to type, as code that wraps between words only: each word keeps together, so an
 * option such as `--instance` never breaks after its dashes.
 */
export function Command({ children }: { children: string }) {
  // A space between two spans is the only place a line may break.
  const words = children.split(' ').flatMap((word, i) => (i === 0 ? [<span key={i}>{word}</span>] : [' ', <span key={i}>{word}</span>]));
  return <code class="command">{words}</code>;
}
