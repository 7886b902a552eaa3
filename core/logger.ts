/**
 * JSON logs to stdout through pino, one line per event. Credentials are redacted wherever a log
 * call might carry them. No transports: they use worker threads, which a single executable
 * cannot load.
 */
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Paths whose values never reach a log line. */
const REDACT_PATHS = [
  'authorization',
  'cookie',
  'token',
  'password',
  'secret',
  'apiKey',
  'api_key',
  'refresh_token',
  'access_token',
  '*.authorization',
  '*.cookie',
  '*.token',
  '*.password',
  '*.secret',
  '*.apiKey',
  '*.api_key',
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
  'req.headers.authorization',
  'req.headers.cookie',
];

const common = {
  base: { service: 'wharf' },
  timestamp: pino.stdTimeFunctions.isoTime,
  formatters: { level: (label: string) => ({ level: label }) },
};

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ ...common, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination ?? pino.destination({ dest: 1, sync: false }));
}

/** The fields of the one line written per request. */
export interface AccessEntry {
  requestId: string;
  method: string;
  path: string;
  status: number;
  durationMs: number;
}

/**
 * The writer of the one line per request, on the same stream as `log` and in the same JSON
 * shape. That line has a fixed set of fields (method, path without query, status, duration,
 * request id) and never a credential, so it is built directly instead of through pino's
 * serializer and redaction, which cost more than the rest of the request (BENCHMARKS.md).
 */
export function accessLogger(log: Logger): (entry: AccessEntry) => void {
  const stream = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  // Lines of one event-loop turn go out in one write: under load that is one write for many
  // requests instead of one each, and nothing waits longer than the current turn.
  let pending = '';
  const flush = () => {
    const chunk = pending;
    pending = '';
    stream.write(chunk);
  };
  // The time as pino writes it, built once per millisecond: under load many lines share one.
  let stampMs = -1;
  let stamp = '';
  return function writeAccessLine(e) {
    if (!log.isLevelEnabled('info')) return;
    if (!pending) setImmediate(flush);
    const now = Date.now();
    if (now !== stampMs) {
      stampMs = now;
      stamp = new Date(now).toISOString();
    }
    pending += `{"level":"info","time":"${stamp}","service":"wharf","request_id":${quoted(e.requestId)},"method":${quoted(e.method)},"path":${quoted(e.path)},"status":${e.status},"duration_ms":${e.durationMs},"msg":"request"}\n`;
  };
}

/** What JSON.stringify escapes in a string: quotes, backslashes, control characters, lone surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds.
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * A string as JSON: between quotes when nothing in it needs an escape (ids, methods and nearly
 * every path), without JSON.stringify's call into the runtime (0.16 µs for a line's three), else
 * JSON.stringify.
 */
export function quoted(text: string): string {
  return ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}
