/**
 * The dashboard's one way to call Wharf: the public HTTP API, same origin, with the browser's
 * `__session` cookie (or a session API key as Bearer where an operation needs one). Every error
 * envelope of the API (`{error}`, `{success: false, message, errors?}`, `{message, retry_after}`)
 * becomes an {@link ApiError} with the server's own words, for the page to show where it happened.
 */

/** Field name -> what is wrong with it (the messaging API's 422 `errors`). */
export type FieldErrors = Record<string, string[]>;

export class ApiError extends Error {
  readonly status: number;
  readonly fields: FieldErrors | undefined;
  readonly retryAfter: number | undefined;

  constructor(status: number, message: string, fields?: FieldErrors, retryAfter?: number) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.fields = fields;
    this.retryAfter = retryAfter;
  }
}

export interface CallOptions {
  /** A Bearer credential instead of the cookie (a session API key for the sandbox). */
  bearer?: string;
  signal?: AbortSignal;
  /** A 401 is an answer to show, not the end of the sign-in (the sign-in form itself). */
  keepSignedIn?: boolean;
}

/** What the page does when the sign-in has ended (a 401 on a cookie request). */
let onSignedOut: () => void = () => {};
/** `X-Service-Org` for every cookie request (external OpenID mode, where the organization is chosen per request). */
let orgHeader: string | null = null;

export function setSignedOutHandler(fn: () => void): void {
  onSignedOut = fn;
}

export function setOrgHeader(org: string | null): void {
  orgHeader = org;
}

function headersFor(options: CallOptions, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { accept: 'application/json', ...extra };
  if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
  else if (orgHeader) headers['x-service-org'] = orgHeader;
  return headers;
}

/** The error a failed answer carries, in the words of whichever envelope it used. */
export async function errorOf(res: Response, options: CallOptions = {}): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let data: { error?: unknown; message?: unknown; errors?: FieldErrors; retry_after?: number } | undefined;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  const said = typeof data?.error === 'string' ? data.error : typeof data?.message === 'string' ? data.message : undefined;
  const message = said ?? `The server answered ${res.status} ${res.statusText}${text && !data ? `: ${text.slice(0, 200)}` : ''}`;
  if (res.status === 401 && !options.bearer && !options.keepSignedIn) onSignedOut();
  const retryAfter = typeof data?.retry_after === 'number' ? data.retry_after : undefined;
  return new ApiError(res.status, retryAfter !== undefined ? `${message} (try again in ${retryAfter} s)` : message, data?.errors, retryAfter);
}

/** Calls the API with a JSON body (if any) and returns the parsed answer; throws ApiError otherwise. */
export async function api<T = unknown>(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: headersFor(options, body === undefined ? {} : { 'content-type': 'application/json' }),
      body: body === undefined ? null : JSON.stringify(body),
      credentials: options.bearer ? 'omit' : 'same-origin',
      signal: options.signal ?? null,
    });
  } catch (err) {
    if (options.signal?.aborted) throw err;
    throw new ApiError(0, `The server did not answer: ${(err as Error).message}`);
  }
  if (!res.ok) throw await errorOf(res, options);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** `?a=1&b=2` of the defined, non-empty values. */
export function query(params: Record<string, string | number | boolean | null | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export type StreamState = { state: 'connecting' } | { state: 'open' } | { state: 'error'; error: ApiError; retrying: boolean };

/**
 * Reads a server-sent event stream with fetch (so it carries the same headers as every other call,
 * and its errors are the API's), calling `onEvent` for each event; reconnects after an end or a
 * network error, with backoff. A 4xx other than 429 stops it. Returns the function that stops it.
 */
export function eventStream(path: string, onEvent: (event: string, data: unknown) => void, onState: (state: StreamState) => void): () => void {
  const controller = new AbortController();
  let delay = 1000;
  const stopped = () => controller.signal.aborted;
  async function run() {
    while (!stopped()) {
      onState({ state: 'connecting' });
      try {
        const res = await fetch(path, { headers: headersFor({}, { accept: 'text/event-stream' }), credentials: 'same-origin', signal: controller.signal });
        if (!res.ok || !res.body) {
          const error = await errorOf(res);
          const retrying = res.status === 429 || res.status >= 500;
          onState({ state: 'error', error, retrying });
          if (!retrying) return;
          delay = Math.max(delay, (error.retryAfter ?? 0) * 1000);
        } else {
          onState({ state: 'open' });
          delay = 1000;
          await readEvents(res.body, onEvent);
          if (stopped()) return;
          // The server ends a stream after a while (so a revoked credential stops): reconnect at once.
          continue;
        }
      } catch (err) {
        if (stopped()) return;
        onState({ state: 'error', error: new ApiError(0, `The live connection dropped: ${(err as Error).message}`), retrying: true });
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 30_000);
    }
  }
  void run();
  return () => controller.abort();
}

/** Parses `text/event-stream` (comments, `event:`, `data:` lines, a blank line ends an event). */
async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (event: string, data: unknown) => void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream() as ReadableWritablePair<string, Uint8Array>).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
      }
      if (data.length === 0) continue;
      try {
        onEvent(event, JSON.parse(data.join('\n')));
      } catch {
        // Not JSON: not one of Wharf's events.
      }
    }
  }
}
