// Test helper: a real PostgreSQL for the tests.
//
// - POSTGRES_URL set: use that server (postgres://user:password@host:port/db; the user must be
//   allowed to create databases) after checking that it answers.
// - otherwise: `bash test/pg/postgres.sh up` brings up (or finds) the project's PostgreSQL 15 on
//   127.0.0.1:5499, installing Debian's package first when it is missing. The script is
//   idempotent and serialised with flock, so concurrent test workers and worktrees share one server.
//
// Tests never meet on it: each test file (or test) gets a database of its own (freshDatabase).
// Never skips: if no PostgreSQL can be had, ensurePostgres() throws with the script's output.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const SCRIPT = fileURLToPath(new URL('../pg/postgres.sh', import.meta.url));
const UP_TIMEOUT_MS = 10 * 60_000; // a cold CI machine runs apt-get first
const TAIL_LINES = 60;

let pending: Promise<string> | undefined;

/** The URL of a reachable PostgreSQL (its maintenance database), password included; memoised per process. */
export function ensurePostgres(): Promise<string> {
  pending ??= resolveUrl().catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

async function resolveUrl(): Promise<string> {
  const url = process.env.POSTGRES_URL || (await runScript());
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(`ensurePostgres: PostgreSQL at ${url.replace(/\/\/[^@]*@/, '//')} does not answer: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
  return url;
}

function runScript(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [SCRIPT, 'up'],
      { timeout: UP_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const lines = `${stdout}\n${stderr}`.trim().split('\n');
        const output = `--- last ${Math.min(lines.length, TAIL_LINES)} lines of output ---\n${lines.slice(-TAIL_LINES).join('\n')}`;
        if (err) {
          const how = err.killed ? `was killed after ${UP_TIMEOUT_MS / 1000}s` : `failed (exit ${String(err.code ?? err.signal)})`;
          return reject(
            new Error(
              `ensurePostgres: could not start the test PostgreSQL: \`bash ${SCRIPT} up\` ${how}. Set POSTGRES_URL to use an existing server instead.\n${output}`,
            ),
          );
        }
        const m = /^url=(\S+)$/m.exec(stdout);
        if (!m?.[1]) return reject(new Error(`ensurePostgres: ${SCRIPT} up succeeded but printed no url=… line\n${output}`));
        resolve(m[1]);
      },
    );
  });
}

/** A new, empty database on the test server; its URL. Nobody else uses it. */
export async function freshDatabase(): Promise<string> {
  const url = await ensurePostgres();
  const name = `wharf_test_${randomUUID().replaceAll('-', '')}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * The engine the tests of the data layer's users run on: SQLite by default; a fresh PostgreSQL
 * database when WHARF_TEST_DATABASE is "postgres" (the vitest project "on postgres"). The
 * WHARF_* variables for an app, empty for SQLite.
 */
export async function databaseEnv(): Promise<Record<string, string>> {
  return process.env.WHARF_TEST_DATABASE === 'postgres' ? { WHARF_DATABASE__URL: await freshDatabase() } : {};
}
