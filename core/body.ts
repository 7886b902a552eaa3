/**
 * Request bodies: JSON and urlencoded forms read up to a limit, JSON bounded in nesting. Declared
 * routes read the body after authorizing (core/api.ts), so a caller without a credential is
 * refused before its body is judged.
 */
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { toWharfError, WharfError } from './errors.ts';

const JSON_TYPES = ['application/json', 'application/*+json'];
const FORM_TYPE = 'application/x-www-form-urlencoded';
const BODY_READ = Symbol('wharf.bodyRead');
/**
 * How deep a JSON body may nest. No request needs more than a handful of levels, and a value
 * nested thousands deep parses but then overflows the stack of whatever walks it (stringify,
 * the log, a schema).
 */
const MAX_JSON_DEPTH = 64;

/** The deepest nesting of arrays and objects in JSON text (brackets inside strings do not count). */
function jsonDepth(raw: Buffer): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/** Whether the request has a body at all (a length above 0, or chunked): without one, {@link readBody} answers `none`. */
export function hasBody(ctx: Context): boolean {
  return ctx.request.length > 0 || ctx.get('transfer-encoding') !== '';
}

/**
 * The body's type among those read here, or false. What nearly every API client sends, exactly
 * `application/json` (with `charset=utf-8`), is known without parsing the header (type-is
 * parses and normalises it on every call); anything else goes through Koa's `is`.
 */
function typeOf(ctx: Context): string | false {
  const header = ctx.get('content-type');
  if (header === 'application/json' || header === 'application/json; charset=utf-8') return 'application/json';
  return ctx.request.is(...JSON_TYPES, FORM_TYPE) || false;
}

/**
 * Reads a JSON or urlencoded form body up to `limit` bytes into `ctx.request.body` (and a JSON
 * body's exact bytes into `ctx.request.rawBody`): 413 past the limit, 400 for malformed JSON.
 * Other content types are left unread for handlers that stream (uploads), and answered
 * `unread`. Declared routes call it after authorizing, so a caller without a credential is refused
 * before its body is judged. Reads once; later calls answer what the first found.
 */
export async function readBody(ctx: Context, limit: number): Promise<'none' | 'read' | 'unread'> {
  const state = ctx.state as { [BODY_READ]?: 'none' | 'read' | 'unread' };
  if (state[BODY_READ]) return state[BODY_READ];
  const sent = hasBody(ctx);
  const type = sent ? typeOf(ctx) : false;
  state[BODY_READ] = !sent ? 'none' : type ? 'read' : 'unread';
  if (!type) return state[BODY_READ];
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { limit, length: ctx.request.length });
  } catch (err) {
    throw toWharfError(err);
  }
  if (type === FORM_TYPE) {
    ctx.request.body = Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
  } else if (raw.length > 0) {
    ctx.request.rawBody = raw;
    if (jsonDepth(raw) > MAX_JSON_DEPTH) throw new WharfError('invalid_json', `Malformed JSON body: nested deeper than ${MAX_JSON_DEPTH} levels`);
    try {
      ctx.request.body = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      // V8's message quotes the body around the error, and a body can hold a password: only the
      // position is told (to the caller and to the log).
      const position = /at position (\d+)/.exec((err as Error).message)?.[1];
      throw new WharfError('invalid_json', position ? `Malformed JSON body (at position ${position})` : 'Malformed JSON body');
    }
  }
  return 'read';
}
