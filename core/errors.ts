/**
 * One error type for the whole server, a closed set of codes with one status each, and one
 * formatter per wire envelope. Handlers throw {@link WharfError}; the route group they live in
 * decides how the error is written (never the throw site).
 */

/** Every error the server can answer with. Add a code here, and its status below, or not at all. */
export type ErrorCode =
  | 'bad_request'
  | 'invalid_json'
  | 'validation_failed'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'conflict'
  | 'not_connected'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'headers_too_large'
  | 'rate_limited'
  | 'internal'
  | 'unavailable';

/** The code-to-status table. */
const STATUS_OF: Readonly<Record<ErrorCode, number>> = Object.freeze({
  bad_request: 400,
  invalid_json: 400,
  validation_failed: 422,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  not_connected: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
});

/** Whether a string names an error code (one read off the wire, say). */
export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(STATUS_OF, value);
}

/** Field name -> the messages of every rule it failed (the messaging API's `errors`). */
export type FieldErrors = Record<string, string[]>;

export interface WharfErrorOptions {
  /** Per-field validation messages, written as `errors` by the messaging envelope. */
  fields?: FieldErrors;
  /** Seconds until a retry may succeed (429, 503); also sent as `Retry-After`. */
  retryAfter?: number;
  /** Extra response headers (for example `Allow` on a 405). */
  headers?: Record<string, string>;
  cause?: unknown;
}

export class WharfError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly fields: FieldErrors | undefined;
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, options: WharfErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'WharfError';
    this.code = code;
    this.status = STATUS_OF[code];
    this.fields = options.fields;
    this.retryAfter = options.retryAfter;
    this.headers = options.headers;
  }
}

const CODE_OF_STATUS = new Map<number, ErrorCode>((Object.entries(STATUS_OF) as [ErrorCode, number][]).reverse().map(([code, status]) => [status, code]));

/**
 * Turns anything thrown into a WharfError. Errors from libraries that carry an HTTP status
 * (http-errors from Koa, the router and raw-body) keep their status when it is a client error;
 * everything else is an internal error whose message is never shown to the caller.
 */
export function toWharfError(err: unknown): WharfError {
  if (err instanceof WharfError) return err;
  const e = err as { status?: unknown; statusCode?: unknown; type?: unknown; expose?: unknown; message?: unknown };
  const status = typeof e?.status === 'number' ? e.status : typeof e?.statusCode === 'number' ? e.statusCode : 0;
  if (e?.type === 'entity.too.large' || status === 413) {
    return new WharfError('payload_too_large', 'Request body is too large', { cause: err });
  }
  // A refusal the caller may retry (core/db.ts ContentionError: the database busy with
  // conflicting writes, nothing changed): 503 with its Retry-After, not a 500.
  if (status === 503 && e.expose === true && typeof e.message === 'string') {
    const retryAfter = (err as { retryAfter?: unknown }).retryAfter;
    return new WharfError('unavailable', e.message, { retryAfter: typeof retryAfter === 'number' ? retryAfter : undefined, cause: err });
  }
  if (status >= 400 && status < 500) {
    const code = CODE_OF_STATUS.get(status) ?? 'bad_request';
    const message = e.expose !== false && typeof e.message === 'string' ? e.message : 'Bad request';
    return new WharfError(code, message, { cause: err });
  }
  return new WharfError('internal', 'Internal server error', { cause: err });
}

/** The wire shapes of PRODUCT.md. Chosen per route group. */
export type Envelope = 'plain' | 'messaging';

/** What a formatter needs: the error and the request id to name on a 5xx. */
export type Formatter = (err: WharfError, requestId: string) => Record<string, unknown>;

/** Codes the messaging API answers in its "validation and authentication" shape. */
const MESSAGING_MIDDLEWARE_CODES: ReadonlySet<ErrorCode> = new Set([
  'unauthorized',
  'forbidden',
  'validation_failed',
  'invalid_json',
  'payload_too_large',
  'unsupported_media_type',
  'method_not_allowed',
  'bad_request',
  'request_timeout',
  'headers_too_large',
]);

/** The message a caller may see: 5xx messages are replaced by one naming the request id. */
function publicMessage(err: WharfError, requestId: string): string {
  if (err.status === 500) return `Internal server error (request id ${requestId})`;
  if (err.status >= 500) return `${err.message} (request id ${requestId})`;
  return err.message;
}

export const formatters: Readonly<Record<Envelope, Formatter>> = Object.freeze({
  /** File storage, identity and CLI routes: `{ error }`. */
  plain(err, requestId) {
    return { error: publicMessage(err, requestId) };
  },
  /**
   * Messaging routes: `{ success: false, message, errors? }` for authentication and validation
   * (decided before a handler runs), `{ success: false, error, message }` for what a handler
   * decides: `error` is the spec's, and the same text in `message` is what WasenderAPI's SDKs read.
   */
  messaging(err, requestId) {
    const message = publicMessage(err, requestId);
    if (MESSAGING_MIDDLEWARE_CODES.has(err.code)) {
      return err.fields ? { success: false, message, errors: err.fields } : { success: false, message };
    }
    return { success: false, error: message, message };
  },
});

/** Rate-limited answers use this shape on every route group. */
export function rateLimitBody(err: WharfError): { message: string; retry_after: number } {
  return { message: err.message, retry_after: err.retryAfter ?? 1 };
}
