/**
 * The data layer on PostgreSQL: a `pg` pool behind the async `Db`. Placeholders are numbered
 * once per statement text (cached) and statements are prepared by name on each connection.
 * BIGINT and COUNT(*) come back as numbers (pg's default is a string), so rows look the same
 * as on SQLite. Transactions are SERIALIZABLE and retried on a serialization failure or a
 * deadlock (40001, 40P01), a bounded number of times with a short random backoff. A transaction
 * with `lock` keys first takes them: in this process (a queue per key, so waiters hold no
 * connection), then on the server (session-level advisory locks on its connection, before BEGIN).
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { ConstraintError, ContentionError, type Db, type DbHandle, numberPlaceholders, type Params, type TransactionOptions } from './db.ts';

export interface PostgresOptions {
  poolSize: number;
  connectTimeoutMs: number;
  /** Errors of idle connections (the server went away): logged, the pool replaces them. */
  onIdleError?(err: Error): void;
}

/** How many times a transaction runs at most when it keeps meeting serialization failures. */
export const MAX_TRANSACTION_ATTEMPTS = 8;
const RETRYABLE = new Set(['40001', '40P01']);
const INT8_OID = 20;

/**
 * The pg module, loaded when PostgreSQL is first opened: a server on SQLite never evaluates it
 * (it was 1-2% of the start's CPU in a profile of the binary, BENCHMARKS.md issue 16).
 */
let driver: typeof pg | undefined;
async function loadPg(): Promise<typeof pg> {
  return (driver ??= (await import('pg')).default);
}

function typesOf(module: typeof pg) {
  return {
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      if (oid === INT8_OID) return (value: string) => Number(value);
      return module.types.getTypeParser(oid, format as 'text');
    },
  };
}

/** Where a URL points, without its password: for messages. */
export function describePostgres(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'the configured URL';
  }
}

/**
 * Opens a pool and checks that the server answers (a connection). An unreachable
 * server, a refused password or a missing database is an Error with one line saying which.
 */
export async function openPostgres(url: string, options: PostgresOptions): Promise<PostgresDb> {
  const pg = await loadPg();
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    application_name: 'wharf',
    types: typesOf(pg),
  } as pg.PoolConfig);
  pool.on('error', (err) => options.onIdleError?.(err));
  const db = new PostgresDb(pool);
  try {
    // A connection is the check (the server answers, takes the password, has the database), and
    // stays in the pool for the start's first query: no `SELECT 1` round trip.
    (await pool.connect()).release();
  } catch (err) {
    await pool.end().catch(() => {});
    const reason = (err as Error).message || (err as { code?: string }).code || String(err);
    throw new Error(`cannot connect to PostgreSQL at ${describePostgres(url)}: ${reason}`, { cause: err });
  }
  return db;
}

function translateError(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (e?.code === '23505') return new ConstraintError('unique', e.message ?? 'unique violation', { constraint: e.constraint, cause: err });
  if (e?.code === '23503') return new ConstraintError('foreign_key', e.message ?? 'foreign key violation', { constraint: e.constraint, cause: err });
  return err;
}

interface Prepared {
  name: string;
  text: string;
  names: string[] | null;
}

const prepared = new Map<string, Prepared>();

function prepare(sql: string): Prepared {
  let p = prepared.get(sql);
  if (!p) {
    const { text, names } = numberPlaceholders(sql);
    p = { name: `wharf_${prepared.size}`, text, names };
    prepared.set(sql, p);
  }
  return p;
}

function values(p: Prepared, params: Params | undefined): unknown[] {
  if (!params) return [];
  if (Array.isArray(params)) return params as unknown[];
  const named = params as Record<string, unknown>;
  return (p.names ?? []).map((n) => named[n]);
}

/** Queries on a pool or on one client of it (inside a transaction). */
class PgQueries implements Db {
  readonly engine = 'postgres' as const;
  protected readonly target: pg.Pool | pg.PoolClient;

  constructor(target: pg.Pool | pg.PoolClient) {
    this.target = target;
  }

  protected async query(sql: string, params: Params | undefined): Promise<pg.QueryResult> {
    const p = prepare(sql);
    try {
      return await this.target.query({ name: p.name, text: p.text, values: values(p, params) });
    } catch (err) {
      throw translateError(err);
    }
  }

  async one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined> {
    return (await this.query(sql, params)).rows[0] as T | undefined;
  }

  async all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]> {
    return (await this.query(sql, params)).rows as T[];
  }

  async value<T = unknown>(sql: string, params?: Params): Promise<T | undefined> {
    const result = await this.query(sql, params);
    const row = result.rows[0] as Record<string, unknown> | undefined;
    return row === undefined ? undefined : (row[result.fields[0]!.name] as T);
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    return { changes: (await this.query(sql, params)).rowCount ?? 0 };
  }

  async exec(sql: string): Promise<void> {
    try {
      await this.target.query(sql);
    } catch (err) {
      throw translateError(err);
    }
  }

  transaction<T>(fn: (tx: Db) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    // Inside a transaction (the client of one): a nested call joins it (and the outer call's locks).
    return fn(this);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The advisory lock id (a signed 64-bit integer, as text) of a lock key: the first 8 bytes of its SHA-256. */
export function advisoryKey(key: string): string {
  return createHash('sha256').update(key).digest().readBigInt64BE(0).toString();
}

/**
 * Locks by key in this process: `acquire(keys)` resolves once every key is held (taken one after
 * another in the order given: callers pass them sorted), with the function that releases them.
 */
class KeyedQueue {
  readonly #tails = new Map<string, Promise<void>>();

  async acquire(keys: readonly string[]): Promise<() => void> {
    const releases: (() => void)[] = [];
    for (const key of keys) {
      const previous = this.#tails.get(key);
      let release!: () => void;
      const done = new Promise<void>((resolve) => (release = resolve));
      const tail = (previous ?? Promise.resolve()).then(() => done);
      this.#tails.set(key, tail);
      releases.push(() => {
        release();
        if (this.#tails.get(key) === tail) this.#tails.delete(key);
      });
      if (previous) await previous;
    }
    return () => {
      for (const release of releases.reverse()) release();
    };
  }
}

export class PostgresDb extends PgQueries implements DbHandle {
  readonly pool: pg.Pool;
  readonly #local = new KeyedQueue();

  constructor(pool: pg.Pool) {
    super(pool);
    this.pool = pool;
  }

  override async transaction<T>(fn: (tx: Db) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const keys = [...new Set(options.lock ?? [])].sort();
    if (keys.length === 0) return this.#retried(() => this.#withClient('BEGIN ISOLATION LEVEL SERIALIZABLE', fn));
    const unlock = await this.#local.acquire(keys);
    try {
      return await this.#locked(keys, fn);
    } finally {
      unlock();
    }
  }

  /** Runs `attempt` again after a serialization failure or a deadlock, at most MAX_TRANSACTION_ATTEMPTS times in all. */
  async #retried<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (!code || !RETRYABLE.has(code)) throw err;
        if (n >= MAX_TRANSACTION_ATTEMPTS) throw new ContentionError(n, { cause: err });
        await sleep(Math.random() * 5 * 2 ** n);
      }
    }
  }

  /**
   * The transaction on one connection that holds the advisory locks of `keys` (sorted) from before
   * BEGIN until after COMMIT or ROLLBACK, every attempt included. A connection whose locks could
   * not be released is closed (the server releases them with the session), never reused.
   */
  async #locked<T>(keys: readonly string[], fn: (tx: Db) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const ids = keys.map(advisoryKey);
    let held = 0;
    let broken = false;
    try {
      for (const id of ids) {
        await client.query('SELECT pg_advisory_lock($1::bigint)', [id]);
        held++;
      }
      return await this.#retried(() =>
        this.#inTransaction(client, 'BEGIN ISOLATION LEVEL SERIALIZABLE', fn).catch((err: unknown) => {
          broken = (err as { rollbackFailed?: boolean }).rollbackFailed === true;
          throw err;
        }),
      );
    } finally {
      for (const id of ids.slice(0, held).reverse()) {
        if (broken) break;
        await client.query('SELECT pg_advisory_unlock($1::bigint)', [id]).catch(() => {
          broken = true;
        });
      }
      client.release(broken);
    }
  }

  /**
   * Runs `fn` in one transaction (READ COMMITTED) while holding the session-level advisory lock
   * `key`: another caller with the same key (another instance migrating) waits for the lock.
   */
  async withAdvisoryLock<T>(key: number, fn: (tx: Db) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query('SELECT pg_advisory_lock($1)', [key]);
      try {
        return await this.#inTransaction(client, 'BEGIN', fn);
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [key]).catch(() => {
          broken = true;
        });
      }
    } finally {
      client.release(broken);
    }
  }

  async #withClient<T>(begin: string, fn: (tx: Db) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      return await this.#inTransaction(client, begin, fn).catch((err: unknown) => {
        broken = (err as { rollbackFailed?: boolean }).rollbackFailed === true;
        throw err;
      });
    } finally {
      client.release(broken);
    }
  }

  async #inTransaction<T>(client: pg.PoolClient, begin: string, fn: (tx: Db) => Promise<T>): Promise<T> {
    await client.query(begin);
    try {
      const result = await fn(new PgQueries(client));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        // The connection is gone: the server rolled back; the pool must not reuse this client.
        if (err && typeof err === 'object') Object.assign(err, { rollbackFailed: true });
      }
      throw err;
    }
  }

  /**
   * LISTENs on `channel` on a dedicated connection (not the pool's: a pooled connection goes back
   * to the pool between queries) and calls `fn` with each notification's payload. Returns the
   * function that stops listening. A broken connection is not reopened: `onError` is told, and
   * callers keep a periodic safety net (the webhooks dispatcher's resync).
   */
  async listen(channel: string, fn: (payload: string) => void, onError?: (err: Error) => void): Promise<() => Promise<void>> {
    const { Client } = await loadPg();
    const client = new Client(this.pool.options as pg.ClientConfig);
    client.on('error', (err) => onError?.(err));
    await client.connect();
    client.on('notification', (message) => {
      if (message.channel === channel) fn(message.payload ?? '');
    });
    await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
    return () => client.end().catch(() => {});
  }

  async ping(): Promise<boolean> {
    return (await this.value<number>('SELECT 1')) === 1;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
