/**
 * The data layer on SQLite: better-sqlite3 behind the async `Db`. Statements are prepared once
 * and cached; a query runs synchronously inside the call (the promise is already settled), so
 * the cost over a direct better-sqlite3 call is one promise (bench/db-layers.ts measures it).
 *
 * One connection serves the process, shared with the synchronous `ctx.db` of plugins not yet
 * ported. A transaction holds that connection across awaits, so transactions run one at a time
 * (BEGIN IMMEDIATE, which also waits for another process's writer), and a query made outside
 * the transaction while one is open waits for it to end instead of landing inside it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ConstraintError, type Database, type Db, type DbHandle, openDatabase, type OpenOptions, type Params, type TransactionOptions } from './db.ts';

type Statement = BetterSqlite3.Statement<unknown[], unknown>;

export function openSqlite(file: string, options: OpenOptions = {}): SqliteDb {
  return new SqliteDb(openDatabase(file, options));
}

function translateError(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_CONSTRAINT')) return err;
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return new ConstraintError('unique', (err as Error).message, { cause: err });
  }
  if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY') return new ConstraintError('foreign_key', (err as Error).message, { cause: err });
  return err;
}

/** The queries themselves, on the connection, without waiting for anything. */
class Queries {
  readonly engine = 'sqlite' as const;
  readonly #raw: Database;
  readonly #statements = new Map<string, Statement>();
  /** Statements of `value`: they return the first column only (pluck). */
  readonly #plucked = new Map<string, Statement>();

  constructor(raw: Database) {
    this.#raw = raw;
  }

  statement(sql: string, cache = this.#statements): Statement {
    let s = cache.get(sql);
    if (!s) {
      s = this.#raw.prepare(sql);
      if (cache === this.#plucked) s.pluck(true);
      cache.set(sql, s);
    }
    return s;
  }

  one<T>(sql: string, params?: Params): T | undefined {
    try {
      const s = this.statement(sql);
      return (Array.isArray(params) ? s.get(...params) : params ? s.get(params) : s.get()) as T | undefined;
    } catch (err) {
      throw translateError(err);
    }
  }

  all<T>(sql: string, params?: Params): T[] {
    try {
      const s = this.statement(sql);
      return (Array.isArray(params) ? s.all(...params) : params ? s.all(params) : s.all()) as T[];
    } catch (err) {
      throw translateError(err);
    }
  }

  value<T>(sql: string, params?: Params): T | undefined {
    try {
      const s = this.statement(sql, this.#plucked);
      return (Array.isArray(params) ? s.get(...params) : params ? s.get(params) : s.get()) as T | undefined;
    } catch (err) {
      throw translateError(err);
    }
  }

  run(sql: string, params?: Params): { changes: number } {
    try {
      const s = this.statement(sql);
      const result = Array.isArray(params) ? s.run(...params) : params ? s.run(params) : s.run();
      return { changes: result.changes };
    } catch (err) {
      throw translateError(err);
    }
  }

  exec(sql: string): void {
    try {
      this.#raw.exec(sql);
    } catch (err) {
      throw translateError(err);
    }
  }
}

/** Inside a transaction: straight to the connection. A nested transaction joins this one. */
class SqliteTx implements Db {
  readonly engine = 'sqlite' as const;
  readonly #q: Queries;

  constructor(q: Queries) {
    this.#q = q;
  }

  async one<T>(sql: string, params?: Params) {
    return this.#q.one<T>(sql, params);
  }
  async all<T>(sql: string, params?: Params) {
    return this.#q.all<T>(sql, params);
  }
  async value<T>(sql: string, params?: Params) {
    return this.#q.value<T>(sql, params);
  }
  async run(sql: string, params?: Params) {
    return this.#q.run(sql, params);
  }
  async exec(sql: string) {
    this.#q.exec(sql);
  }
  transaction<T>(fn: (tx: Db) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    return fn(this);
  }
}

export class SqliteDb implements DbHandle {
  readonly engine = 'sqlite' as const;
  /** The synchronous connection (`ctx.db` of plugins not yet ported; contract 1.0 migrations). */
  readonly raw: Database;
  readonly #q: Queries;
  readonly #tx: SqliteTx;
  /** Settles when the transaction in progress ends; null when none is. */
  #busy: Promise<void> | null = null;

  constructor(raw: Database) {
    this.raw = raw;
    this.#q = new Queries(raw);
    this.#tx = new SqliteTx(this.#q);
  }

  async #idle(): Promise<void> {
    while (this.#busy) await this.#busy;
  }

  async one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined> {
    while (this.#busy) await this.#busy;
    return this.#q.one<T>(sql, params);
  }

  async all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]> {
    while (this.#busy) await this.#busy;
    return this.#q.all<T>(sql, params);
  }

  async value<T = unknown>(sql: string, params?: Params): Promise<T | undefined> {
    while (this.#busy) await this.#busy;
    return this.#q.value<T>(sql, params);
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    while (this.#busy) await this.#busy;
    return this.#q.run(sql, params);
  }

  async exec(sql: string): Promise<void> {
    while (this.#busy) await this.#busy;
    this.#q.exec(sql);
  }

  /** `options.lock` changes nothing here: transactions already run one at a time in the process. */
  async transaction<T>(fn: (tx: Db) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    // The check and the claim in one turn: callers that waited for the same transaction to end
    // resume one by one, and each finds the connection free or taken (an `await this.#idle()`
    // here would let two of them through before either claims it).
    while (this.#busy) await this.#busy;
    let release!: () => void;
    this.#busy = new Promise((resolve) => (release = resolve));
    try {
      this.#q.exec('BEGIN IMMEDIATE');
      let result: T;
      try {
        result = await fn(this.#tx);
      } catch (err) {
        if (this.raw.inTransaction) this.#q.exec('ROLLBACK');
        throw err;
      }
      this.#q.exec('COMMIT');
      return result;
    } finally {
      this.#busy = null;
      release();
    }
  }

  async ping(): Promise<boolean> {
    return (await this.value<number>('SELECT 1')) === 1;
  }

  async close(): Promise<void> {
    await this.#idle();
    this.raw.close();
  }
}
