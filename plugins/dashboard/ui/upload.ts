/**
 * Uploading from the browser the way the file-storage API intends: phase 1 asks for presigned
 * URLs for every file (`POST /api/files/upload`), each file's bytes go straight to the object
 * store with a PUT to its URL (XMLHttpRequest, for upload progress; a few at a time), and each
 * file is recorded with phase 2 (`action: "complete"`) once the store has it.
 */
import { api, ApiError } from './api.ts';

export type UploadState = 'waiting' | 'sending' | 'recording' | 'done' | 'failed';

export interface Upload {
  id: number;
  name: string;
  size: number;
  loaded: number;
  state: UploadState;
  error?: string;
}

interface Presigned {
  key: string;
  name: string;
  size: number;
  type: string;
  presignedUrl: string;
}

/** Files sent at once. */
const PARALLEL = 3;

/** The S3 error message of an XML error body, if it is one. */
function s3Message(xhr: XMLHttpRequest): string {
  const text = xhr.responseText ?? '';
  const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1];
  return code || message ? `${code ?? ''}${code && message ? ': ' : ''}${message ?? ''}` : text.slice(0, 200);
}

/** PUTs `file` to a presigned URL with its declared type (signed into the URL), reporting progress. */
function put(url: string, file: File, type: string, onProgress: (loaded: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', url);
    xhr.setRequestHeader('Content-Type', type);
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve();
      else reject(new ApiError(xhr.status, `The store refused the upload (${xhr.status}${s3Message(xhr) ? `, ${s3Message(xhr)}` : ''})`));
    };
    xhr.onerror = () =>
      reject(new ApiError(0, `The store at ${new URL(url).origin} did not answer (is it reachable from this browser, and does it allow this origin?)`));
    xhr.send(file);
  });
}

/**
 * Uploads `files` to the app; `onChange` gets the list of uploads each time one moves. Resolves
 * when every file is done or failed; an error of phase 1 fails them all with its message.
 */
export async function uploadFiles(appId: string, files: File[], prefix: string, firstId: number, onChange: (uploads: Upload[]) => void): Promise<Upload[]> {
  const uploads: Upload[] = files.map((f, i) => ({ id: firstId + i, name: f.name, size: f.size, loaded: 0, state: 'waiting' }));
  const changed = () => onChange(uploads.map((u) => ({ ...u })));
  changed();
  const typeOf = (f: File) => f.type || 'application/octet-stream';
  let presigned: Presigned[];
  try {
    const answer = await api<{ uploads: Presigned[] }>('POST', '/api/files/upload', {
      appId,
      ...(prefix.trim() ? { prefix: prefix.trim() } : {}),
      files: files.map((f) => ({ name: f.name, size: f.size, type: typeOf(f) })),
    });
    presigned = answer.uploads;
  } catch (err) {
    for (const u of uploads) Object.assign(u, { state: 'failed', error: (err as Error).message });
    changed();
    return uploads;
  }

  let next = 0;
  async function worker() {
    while (next < files.length) {
      const i = next++;
      const file = files[i]!;
      const upload = uploads[i]!;
      const target = presigned[i]!;
      try {
        upload.state = 'sending';
        changed();
        await put(target.presignedUrl, file, target.type, (loaded) => {
          upload.loaded = loaded;
          changed();
        });
        upload.loaded = file.size;
        upload.state = 'recording';
        changed();
        await api('POST', '/api/files/upload', {
          appId,
          action: 'complete',
          files: [{ key: target.key, name: target.name, size: target.size, type: target.type }],
        });
        upload.state = 'done';
      } catch (err) {
        upload.state = 'failed';
        upload.error = (err as Error).message;
      }
      changed();
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL, files.length) }, worker));
  return uploads;
}
