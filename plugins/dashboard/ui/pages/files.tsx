/** An app's files: search, sort, pages, download, delete one or many, and upload from the browser with progress. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { Card, Confirm, Empty, ErrorBox, Field, Loading, Pager } from '../components.tsx';
import { humanBytes } from '../../../../client/bytes.ts';
import { when } from '../format.ts';
import { useAction, useLoad } from '../hooks.ts';
import type { Pagination, StoredFile } from '../types.ts';
import { type Upload, uploadFiles } from '../upload.ts';

export function Files({ appId, onChange }: { appId: string; onChange(): void }) {
  const [search, setSearch] = useState('');
  const [typed, setTyped] = useState('');
  const [dir, setDir] = useState<'desc' | 'asc'>('desc');
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(10);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirming, setConfirming] = useState<StoredFile[] | null>(null);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const nextId = useRef(1);
  const [prefix, setPrefix] = useState('');
  const [dragging, setDragging] = useState(false);

  // Search as you type, a moment after the typing stops.
  useEffect(() => {
    const t = setTimeout(() => {
      setSearch(typed);
      setPage(1);
    }, 300);
    return () => clearTimeout(t);
  }, [typed]);

  const list = useLoad(
    (signal) =>
      api<{ files: StoredFile[]; pagination: Pagination }>('GET', `/api/files${query({ appId, search, dir, page, pageSize })}`, undefined, { signal }),
    [appId, search, dir, page, pageSize],
    { keep: true },
  );
  useEffect(() => setSelected(new Set()), [list.data]);

  const download = useAction(async (file: StoredFile) => {
    const { url } = await api<{ url: string }>('GET', `/api/files/download${query({ fileId: file.id })}`);
    // The presigned URL answers with Content-Disposition: attachment, so this downloads and stays here.
    const a = document.createElement('a');
    a.href = url;
    a.rel = 'noopener';
    document.body.append(a);
    a.click();
    a.remove();
  });
  const remove = useAction(async (files: StoredFile[]) => {
    await api('DELETE', '/api/files', files.length === 1 ? { fileId: files[0]!.id } : { fileIds: files.map((f) => f.id) });
    setConfirming(null);
    await list.reload();
    onChange();
  });

  async function upload(files: File[]) {
    if (files.length === 0) return;
    const first = nextId.current;
    nextId.current += files.length;
    await uploadFiles(appId, files, prefix, first, (batch) => {
      setUploads((all) => [...all.filter((u) => u.id < first || u.id >= first + files.length), ...batch].sort((a, b) => a.id - b.id));
    });
    await list.reload();
    onChange();
  }
  const files = list.data?.files ?? [];
  const allChosen = files.length > 0 && files.every((f) => selected.has(f.id));
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };

  return (
    <Card title="Files" id="files">
      <fieldset
        class={`drop ${dragging ? 'over' : ''}`}
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault();
          setDragging(false);
          void upload([...(e.dataTransfer?.files ?? [])]);
        }}
      >
        <legend class="sr">Upload</legend>
        <label class="button">
          Upload files…
          <input
            type="file"
            multiple
            class="visually-hidden"
            aria-label="Choose files to upload"
            onChange={(e) => {
              const chosen = [...(e.currentTarget.files ?? [])];
              e.currentTarget.value = '';
              void upload(chosen);
            }}
          />
        </label>
        <span class="muted drop-hint">or drop them here: they go straight to the app's bucket.</span>
        <Field label="Folder (key prefix)" class="compact">
          <input value={prefix} placeholder="optional, e.g. photos/2026" onInput={(e) => setPrefix(e.currentTarget.value)} />
        </Field>
      </fieldset>
      {uploads.length > 0 && (
        <div class="uploads">
          <ul aria-label="Uploads">
            {uploads.map((u) => (
              <li key={u.id} class={`upload u-${u.state}`}>
                <span class="name">{u.name}</span>
                <progress max={Math.max(u.size, 1)} value={u.size === 0 && u.state === 'done' ? 1 : u.loaded} aria-label={`Upload of ${u.name}`} />
                <span class="state">
                  {u.state === 'waiting' && 'waiting'}
                  {u.state === 'sending' && `${Math.floor((u.loaded / Math.max(u.size, 1)) * 100)}% of ${humanBytes(u.size)}`}
                  {u.state === 'recording' && 'recording…'}
                  {u.state === 'done' && `done, ${humanBytes(u.size)}`}
                  {u.state === 'failed' && <span role="alert">failed: {u.error}</span>}
                </span>
              </li>
            ))}
          </ul>
          <button
            type="button"
            class="small secondary"
            disabled={uploads.some((u) => u.state === 'waiting' || u.state === 'sending' || u.state === 'recording')}
            onClick={() => setUploads([])}
          >
            Clear the list
          </button>
        </div>
      )}

      <div class="toolbar">
        <Field label="Search names" class="compact">
          <input type="search" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} placeholder="part of the name, case-sensitive (not the key)" />
        </Field>
        <Field label="Sort" class="compact">
          <select
            value={dir}
            onChange={(e) => {
              setDir(e.currentTarget.value as 'asc' | 'desc');
              setPage(1);
            }}
          >
            <option value="desc">Newest first</option>
            <option value="asc">Oldest first</option>
          </select>
        </Field>
        <Field label="Per page" class="compact">
          <select
            value={pageSize}
            onChange={(e) => {
              setPageSize(Number(e.currentTarget.value));
              setPage(1);
            }}
          >
            {[10, 25, 50, 100].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </Field>
        <button
          type="button"
          class="danger small"
          disabled={selected.size === 0}
          onClick={() => {
            remove.clear();
            setConfirming(files.filter((f) => selected.has(f.id)));
          }}
        >
          Delete selected ({selected.size})
        </button>
      </div>

      <ErrorBox error={list.error ?? download.error} />
      {!list.data && !list.error && <Loading what="files" />}
      {list.data && files.length === 0 && <Empty>{search ? `No file name contains “${search}”.` : 'No files yet: upload some above.'}</Empty>}
      {files.length > 0 && (
        <table class="list files">
          <thead>
            <tr>
              <th scope="col">
                <input
                  type="checkbox"
                  aria-label="Select every file on this page"
                  checked={allChosen}
                  onChange={() => setSelected(allChosen ? new Set() : new Set(files.map((f) => f.id)))}
                />
              </th>
              <th scope="col">Name</th>
              <th scope="col">Size</th>
              <th scope="col">Type</th>
              <th scope="col">Uploaded</th>
              <th scope="col">
                <span class="sr">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.id}>
                <td>
                  <input type="checkbox" aria-label={`Select ${f.name}`} checked={selected.has(f.id)} onChange={() => toggle(f.id)} />
                </td>
                <td data-label="Name">
                  <div class="cell">
                    <span class="fname">{f.name}</span>
                    <div class="muted mono key">{f.key}</div>
                  </div>
                </td>
                <td data-label="Size" class="nowrap">
                  {humanBytes(f.size)}
                </td>
                <td data-label="Type" class="mono">
                  {f.type}
                </td>
                <td data-label="Uploaded">{when(f.uploadedAt)}</td>
                <td class="row-actions">
                  <button type="button" class="small secondary" onClick={() => void download.run(f)} aria-label={`Download ${f.name}`}>
                    Download
                  </button>
                  <button
                    type="button"
                    class="small danger"
                    onClick={() => {
                      remove.clear();
                      setConfirming([f]);
                    }}
                    aria-label={`Delete ${f.name}`}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data && <Pager page={list.data.pagination.page} pages={list.data.pagination.totalPages} total={list.data.pagination.total} onPage={setPage} />}
      <Confirm
        open={confirming !== null}
        title={confirming?.length === 1 ? `Delete ${confirming[0]!.name}?` : `Delete ${confirming?.length ?? 0} files?`}
        action="Delete"
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => confirming && void remove.run(confirming)}
        onClose={() => setConfirming(null)}
      >
        <p>The objects are removed from the bucket, then their records. This cannot be undone.</p>
      </Confirm>
    </Card>
  );
}
