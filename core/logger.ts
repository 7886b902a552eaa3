/**
 * JSON logs to stdout through pino, one line per event. Credentials are redacted wherever a log
 * call might carry them. No transports: they use worker threads, which a single executable
 * cannot load.
 */
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Paths whose values never reach a log line. */
export const REDACT_PATHS = [
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

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'wharf' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
