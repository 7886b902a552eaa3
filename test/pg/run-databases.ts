/**
 * The databases one run of the tests (or of the benchmarks) makes on the test PostgreSQL server,
 * and their removal when it ends. freshDatabase names each after the run (`wharf_test_<run>_...`;
 * the run's id is WHARF_TEST_RUN, set here by vitest's global setup and by bench/run.ts, inherited
 * by their workers) and notes the server's URL in a file of the run; the run's end drops the
 * databases named after it, and no other run's (worktrees share the server). Without this a
 * developer's server kept every database ever made: 410 after one day, their autovacuum visits
 * costing the idle server about 5% of a core (BENCHMARKS.md, issue 16 part 11).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** This run's id, made (and handed to the processes started from now on) if there is none. */
export function runId(): string {
  process.env.WHARF_TEST_RUN ??= randomBytes(4).toString('hex');
  return process.env.WHARF_TEST_RUN;
}

const noted = (run: string) => path.join(os.tmpdir(), `wharf-test-run-${run}.url`);

/** The name of a new database of this run; notes the server it is made on. */
export function runDatabaseName(serverUrl: string, unique: string): string {
  const run = runId();
  const file = noted(run);
  if (!fs.existsSync(file)) fs.writeFileSync(file, serverUrl);
  return `wharf_test_${run}_${unique}`;
}

/** Drops every database the run made (none when it made none); how many. */
export async function dropRunDatabases(run = process.env.WHARF_TEST_RUN): Promise<number> {
  if (!run) return 0;
  const file = noted(run);
  let url: string;
  try {
    url = fs.readFileSync(file, 'utf8');
  } catch {
    return 0;
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`wharf\\_test\\_${run}\\_%`]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(datname)} WITH (FORCE)`);
    fs.rmSync(file, { force: true });
    return rows.length;
  } finally {
    await client.end();
  }
}

/** vitest's global setup: one run id for every project and worker. */
export function setup(): void {
  runId();
}

/** vitest's global teardown, once every test file has finished, and bench/run.ts's end: a cleanup that fails (the server gone) is said, never fails the run. */
export async function teardown(): Promise<void> {
  await dropRunDatabases().catch((err: unknown) => {
    process.stderr.write(`run-databases: the run's databases were not dropped: ${(err as Error).message}\n`);
  });
}
