/**
 * Request validation with zod schemas. A failure is a WharfError carrying one message per
 * field: file-storage and identity routes answer 400 `{error}` naming the first problem,
 * messaging routes 422 with every field's messages. The same schemas describe the API in
 * OpenAPI, so what is documented is what is enforced.
 */
import { z } from 'zod';
import { type FieldErrors, WharfError } from './errors.ts';
import { DISPLAY_NAME_MAX } from './limits.ts';

function issueMessage(issue: z.core.$ZodIssue): string {
  const field = issue.path.map(String).join('.') || 'body';
  if (issue.code === 'invalid_type' && issue.input === undefined) return `${field} is required`;
  // A schema's own wording ("must be given once") beats the generic one.
  if (issue.code === 'invalid_type' && !issue.message.startsWith('Invalid input')) return `${field} ${issue.message}`;
  if (issue.code === 'invalid_type') return `${field} must be ${article(issue.expected)}`;
  if (issue.code === 'unrecognized_keys')
    return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `${[...issue.path, k].join('.')}`).join(', ')}`;
  return `${field}: ${issue.message.replace(/^Invalid input: /, '')}`;
}

function article(expected: string): string {
  const noun = expected === 'int' ? 'integer' : expected;
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`;
}

/**
 * Per-field messages of a failed parse, keyed by dotted path. The keys are the caller's own field
 * names (`constructor`, `__proto__`), so the map has no prototype.
 */
export function fieldErrors(error: z.ZodError): FieldErrors {
  const fields: FieldErrors = Object.create(null);
  for (const issue of error.issues) {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k].join('.')) : [issue.path.map(String).join('.') || 'body'];
    for (const key of keys) (fields[key] ??= []).push(issueMessage(issue));
  }
  return fields;
}

/**
 * Parses `input` or throws: `bad_request` (400) whose message names the first problem, or,
 * with `status: 422`, `validation_failed` with every field's messages.
 */
export function validate<S extends z.ZodType>(schema: S, input: unknown, options: { status?: 400 | 422 } = {}): z.output<S> {
  const result = schema.safeParse(input ?? {}, { reportInput: true });
  if (result.success) return result.data;
  throw refusal(fieldErrors(result.error), issueMessage(result.error.issues[0]!), options.status);
}

/** A request's fields refused: `bad_request` (400) with the `first` problem's message, or, with `status: 422`, `validation_failed`. */
export function refusal(fields: FieldErrors, first: string, status?: 400 | 422): WharfError {
  if (status === 422) return new WharfError('validation_failed', 'The given data was invalid.', { fields });
  return new WharfError('bad_request', first, { fields });
}

/**
 * A value built on its first call and kept. Route schemas are built this way or with `z.lazy`
 * (on a route's first request, or when the OpenAPI document is written), not when their modules
 * load: building every route's schemas was about a thousand zod constructions at each start,
 * for routes a given server may never serve (BENCHMARKS.md, issue 16 part 6). Config schemas
 * stay eager: they are what refuses a bad config at start.
 */
export function once<T>(build: () => T): () => T {
  let built: { value: T } | undefined;
  return () => (built ??= { value: build() }).value;
}

/** A UUID (any version), as record ids are written. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID field. */
export const uuid = z.string().regex(UUID, 'must be a UUID');

/** The largest integer a query parameter may be written as (15 digits). */
const MAX_DIGITS_15 = 999_999_999_999_999;

/** Text given at most once (a repeated parameter arrives as an array), checked with `schema`; empty = absent. */
function single<T extends z.ZodType<unknown, string>>(schema: T) {
  return z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string({ error: (issue) => (Array.isArray(issue.input) ? 'must be given once' : undefined) })
      .pipe(schema)
      .optional(),
  );
}

/**
 * Query parameters. A query parameter arrives as text, or as an array when the client repeats it
 * (refused: "must be given once"); an empty value counts as absent. Each is documented as what
 * it means (an integer, a UUID, an enum), which the preprocessing would otherwise hide.
 */
export const queryParam = {
  /** Text given at most once, then checked with `schema`. */
  one<T extends z.ZodType<unknown, string>>(schema: T) {
    const { $schema: _drop, ...documented } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    return single(schema).meta(documented);
  },
  /** A whole number from `min` to `max` written in decimal digits, or `fallback` when absent. */
  int(fallback: number, min: number, max: number) {
    // At most 15 digits: what the regex lets through, and every product with a page size stays exact.
    const top = Math.min(max, MAX_DIGITS_15);
    const message = `must be an integer from ${min} to ${top}`;
    return single(
      z
        .string()
        .regex(/^\d{1,15}$/, message)
        .transform(Number)
        .pipe(z.int().min(min, message).max(top, message)),
    )
      .transform((v) => v ?? fallback)
      .meta({ type: 'integer', minimum: min, maximum: top, default: fallback });
  },
};

/** C0 controls and DEL: no name needs them, SQLite cuts text at NUL, and a terminal obeys escape codes. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Text with no control characters (a name, a search term). */
export function plainText(schema: z.ZodString = z.string()) {
  return schema.refine((v) => !CONTROL.test(v), 'must not contain control characters');
}

/** A display name: trimmed, 1 to `max` characters, no control characters. */
export function displayName(max = DISPLAY_NAME_MAX) {
  return plainText(z.string().trim().min(1, 'must not be empty').max(max, `must be at most ${max} characters`));
}
