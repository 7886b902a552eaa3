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
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PLUGIN_CONTRACT } from '../../core/plugin.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { tempDir } from './app.ts';
import { runUpScript } from './fixture-script.ts';
import { runDatabaseName } from '../pg/run-databases.ts';

const SCRIPT = fileURLToPath(new URL('../pg/postgres.sh', import.meta.url));

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
  const url = process.env.POSTGRES_URL || (await runUpScript(SCRIPT, 'ensurePostgres', 'the test PostgreSQL', 'POSTGRES_URL'));
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

/** A new, empty database on the test server; its URL. Nobody else uses it; dropped when the run ends (test/pg/run-databases.ts). */
export async function freshDatabase(): Promise<string> {
  const url = await ensurePostgres();
  const name = runDatabaseName(url, randomUUID().replaceAll('-', ''));
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

/** Drops a database made by freshDatabase (its URL), closing its connections first (benchmarks: a million rows each). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: await ensurePostgres() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(new URL(databaseUrl).pathname.slice(1))} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** The built-in plugins that run on PostgreSQL: ported, and so is everything they depend on (the dashboard needs identity). */
export function postgresPlugins(): { runs: string[]; not: string[] } {
  const runs: string[] = [];
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of builtinPlugins) {
      if (runs.includes(p.name) || !p.engines?.includes('postgres') || !(p.dependsOn ?? []).every((d) => runs.includes(d))) continue;
      runs.push(p.name);
      grew = true;
    }
  }
  return { runs, not: builtinPlugins.map((p) => p.name).filter((name) => !runs.includes(name)) };
}

/**
 * The engine the tests of the data layer's users run on: SQLite by default; a fresh PostgreSQL
 * database when WHARF_TEST_DATABASE is "postgres" (the vitest project "on postgres"), with the
 * built-in plugins that do not run there yet disabled (the same database for the same `dataDir`).
 * The WHARF_* variables for an app or a command, empty for SQLite.
 */
export async function databaseEnv(dataDir?: string): Promise<Record<string, string>> {
  if (process.env.WHARF_TEST_DATABASE !== 'postgres') return {};
  const off = Object.fromEntries(postgresPlugins().not.map((name) => [`WHARF_PLUGINS__${name.toUpperCase()}__ENABLED`, 'false']));
  // One test server at a time uses a database: the rate limiter may count in memory, and the
  // embedded store (the fs driver, where a test does not use S3) may keep objects on its disk.
  return {
    ...off,
    WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
    WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
    WHARF_DATABASE__URL: await databaseOf(dataDir),
  };
}

const byDataDir = new Map<string, Promise<string>>();

/** One database per data dir, so that a test restarting a server or running a command on the same data dir finds its data. */
function databaseOf(dataDir: string | undefined): Promise<string> {
  if (dataDir === undefined) return freshDatabase();
  let url = byDataDir.get(dataDir);
  if (!url) byDataDir.set(dataDir, (url = freshDatabase()));
  return url;
}

/**
 * A `[plugins] dir` with one plugin from outside the tree, `legacy`, that declares no engines
 * (SQLite only, as every plugin before contract 1.1): every built-in plugin runs on PostgreSQL,
 * so this is how the tests meet a plugin that refuses it.
 */
export function legacyPluginDir(): string {
  const dir = tempDir('wharf-legacy-plugin-');
  fs.writeFileSync(
    path.join(dir, 'legacy.mjs'),
    `export default { contract: ${JSON.stringify(PLUGIN_CONTRACT)}, define: ({ plugin, z }) => plugin({ name: 'legacy', description: 'SQLite only', config: z.strictObject({}), setup() { return {}; } }) };\n`,
  );
  return dir;
}

/**
 * Records the statements sent on a connection while another of that connection's was still
 * unanswered (pipelined: nobody waited for an answer before sending them), until `restore`. pg's
 * Query is submitted (written), then answered by its ReadyForQuery or its error.
 */
export function pgSentBehind(): { texts: string[]; restore(): void } {
  const texts: string[] = [];
  const unanswered = new Map<unknown, number>();
  type Hook = (this: { text?: string }, ...args: unknown[]) => unknown;
  const proto = pg.Query.prototype as unknown as { submit: Hook; handleReadyForQuery: Hook; handleError: Hook };
  const originals = { submit: proto.submit, handleReadyForQuery: proto.handleReadyForQuery, handleError: proto.handleError };
  proto.submit = function submitted(con) {
    if ((unanswered.get(con) ?? 0) > 0) texts.push(this.text ?? '');
    unanswered.set(con, (unanswered.get(con) ?? 0) + 1);
    return originals.submit.call(this, con);
  };
  const answered = (con: unknown) => unanswered.set(con, (unanswered.get(con) ?? 1) - 1);
  proto.handleReadyForQuery = function ready(con) {
    answered(con);
    return originals.handleReadyForQuery.call(this, con);
  };
  proto.handleError = function failed(err, con) {
    answered(con);
    return originals.handleError.call(this, err, con);
  };
  return { texts, restore: () => Object.assign(proto, originals) };
}
