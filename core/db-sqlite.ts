/**
 * The data layer on SQLite: better-sqlite3 behind the async `Db`. Statements are prepared once
 * and cached; a query runs synchronously inside the call (the promise is already settled), so
 * the cost over a direct better-sqlite3 call is one promise (bench/db-layers.ts measures it).
 *
 * One connection serves the process, shared with the synchronous `ctx.db` of plugins not yet
 * ported. A transaction holds that connection across awaits, so transactions run one at a time
 * (BEGIN IMMEDIATE, which also waits for another process's writer); those of one event-loop turn
 * share one COMMIT (group commit, see `SqliteDb.transaction`), and a query made outside a
 * transaction while one is open, or its COMMIT pending, waits for the COMMIT instead of landing
 * inside it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { type CheckpointOptions, Checkpoints } from './db-checkpoint.ts';
import { ConstraintError, type Database, type Db, type DbHandle, openDatabase, type OpenOptions, type Params, type TransactionOptions } from './db.ts';

type Statement = BetterSqlite3.Statement<unknown[], unknown>;

export interface SqliteOptions extends OpenOptions {
  /** Where WAL checkpoints run (core/db-checkpoint.ts): off the event loop by default. */
  checkpoint?: CheckpointOptions;
}

export function openSqlite(file: string, options: SqliteOptions = {}): SqliteDb {
  return new SqliteDb(openDatabase(file, options), options.checkpoint);
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

/** Transactions sharing one BEGIN ... COMMIT (see {@link SqliteDb.transaction}). */
interface Group {
  /** Settles once the group's COMMIT returned; rejects when it failed or the whole group was rolled back. */
  readonly done: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

function newGroup(): Group {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A group whose members all failed on their own has nobody waiting for it.
  done.catch(() => {});
  return { done, resolve, reject };
}

/** The savepoint each transaction of a group runs in. */
const SAVEPOINT = 'wharf_tx';

export class SqliteDb implements DbHandle {
  readonly engine = 'sqlite' as const;
  /** The synchronous connection (`ctx.db` of plugins not yet ported; contract 1.0 migrations). */
  readonly raw: Database;
  readonly #q: Queries;
  readonly #tx: SqliteTx;
  /** Settles when the transaction (or the COMMIT) using the connection now ends; null when none is. */
  #busy: Promise<void> | null = null;
  /** The group whose BEGIN ran and whose COMMIT has not yet: its writes are not visible to anyone outside. */
  #open: Group | null = null;
  /** The WAL checkpoints, off the event loop once writes are frequent. */
  readonly checkpoints: Checkpoints;

  constructor(raw: Database, checkpoint?: CheckpointOptions) {
    this.raw = raw;
    this.#q = new Queries(raw);
    this.#tx = new SqliteTx(this.#q);
    this.checkpoints = new Checkpoints(raw, (run) => this.#exclusive(run), checkpoint);
  }

  /** Waits until no transaction uses the connection and no group is waiting for its COMMIT. */
  async #idle(): Promise<void> {
    while (this.#busy || this.#open) await (this.#busy ?? this.#open!.done.catch(() => {}));
  }

  async one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined> {
    if (this.#busy || this.#open) await this.#idle();
    return this.#q.one<T>(sql, params);
  }

  async all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]> {
    if (this.#busy || this.#open) await this.#idle();
    return this.#q.all<T>(sql, params);
  }

  async value<T = unknown>(sql: string, params?: Params): Promise<T | undefined> {
    if (this.#busy || this.#open) await this.#idle();
    return this.#q.value<T>(sql, params);
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    if (this.#busy || this.#open) await this.#idle();
    return this.#q.run(sql, params);
  }

  async exec(sql: string): Promise<void> {
    if (this.#busy || this.#open) await this.#idle();
    this.#q.exec(sql);
  }

  /** Takes the connection: resolves, once no one else uses it, with the function that frees it. */
  async #claim(): Promise<() => void> {
    // The check and the claim in one turn: callers that waited for the same holder resume one
    // by one, and each finds the connection free or taken (an `await this.#idle()` here would
    // let two of them through before either claims it).
    while (this.#busy) await this.#busy;
    let release!: () => void;
    this.#busy = new Promise((resolve) => (release = resolve));
    return () => {
      this.#busy = null;
      release();
    };
  }

  /**
   * Group commit: transactions that run in one event-loop turn share one BEGIN IMMEDIATE ...
   * COMMIT, each in a savepoint of its own, and the COMMIT runs once at the end of the turn
   * (`setImmediate`): one commit (one write of the WAL, of pages the group's rows often share)
   * instead of one per transaction. A transaction's promise settles only after that COMMIT has
   * returned, so nothing is answered before its rows are committed. One that throws rolls back
   * its own savepoint alone; the others of its group commit. A failing COMMIT (or an error that
   * makes SQLite roll back the whole transaction) fails every transaction of the group, none of
   * which has been answered yet. Queries outside a transaction wait for the COMMIT (they never
   * see a group's uncommitted rows); transactions still run one at a time, a `fn` holding the
   * connection across its awaits. `options.lock` changes nothing here: writers already run one
   * at a time in the process.
   */
  async transaction<T>(fn: (tx: Db) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    const free = await this.#claim();
    let group: Group;
    let result: T;
    try {
      group = this.#open ?? this.#begin();
      this.#q.exec(`SAVEPOINT ${SAVEPOINT}`);
      try {
        result = await fn(this.#tx);
      } catch (err) {
        this.#undo(group, err);
        throw err;
      }
      this.#q.exec(`RELEASE ${SAVEPOINT}`);
    } finally {
      free();
    }
    await group.done;
    return result;
  }

  #begin(): Group {
    this.#q.exec('BEGIN IMMEDIATE');
    const group = newGroup();
    this.#open = group;
    setImmediate(() => void this.#commit(group));
    return group;
  }

  /** A transaction of `group` threw: its savepoint is rolled back, or, when SQLite rolled back everything (or cannot undo the savepoint), the whole group fails. */
  #undo(group: Group, err: unknown): void {
    if (this.raw.inTransaction) {
      try {
        this.#q.exec(`ROLLBACK TO ${SAVEPOINT}`);
        this.#q.exec(`RELEASE ${SAVEPOINT}`);
        return;
      } catch {
        try {
          this.#q.exec('ROLLBACK');
        } catch {
          // Nothing more to undo: the connection has no transaction left.
        }
      }
    }
    this.#open = null;
    group.reject(err);
  }

  async #commit(group: Group): Promise<void> {
    const free = await this.#claim();
    try {
      if (this.#open === group) this.#commitOpen();
    } finally {
      free();
    }
  }

  #commitOpen(): void {
    const group = this.#open!;
    this.#open = null;
    try {
      this.#q.exec('COMMIT');
    } catch (err) {
      try {
        if (this.raw.inTransaction) this.#q.exec('ROLLBACK');
      } catch {
        // The connection has no transaction left.
      }
      group.reject(err);
      return;
    }
    this.checkpoints.committed();
    group.resolve();
  }

  /**
   * Runs `run` holding the connection, no transaction open or waiting for its COMMIT (a group
   * waiting commits now): transactions and queries wait; the event loop does not. The
   * checkpoint worker's RESTART checkpoint runs in such a pause.
   */
  async #exclusive(run: () => Promise<void>): Promise<void> {
    const free = await this.#claim();
    try {
      if (this.#open) this.#commitOpen();
      await run();
    } finally {
      free();
    }
  }

  /**
   * The synchronous connection for a caller about to use it directly (`ctx.db`): a group waiting
   * for its COMMIT at the end of the turn commits now, so that what the caller writes is not
   * held in the group's transaction, nor what it reads uncommitted. (While a transaction's `fn`
   * is between awaits, its transaction stays open, as it always has.)
   */
  settled(): Database {
    if (this.#open && !this.#busy) this.#commitOpen();
    return this.raw;
  }

  async ping(): Promise<boolean> {
    return (await this.value<number>('SELECT 1')) === 1;
  }

  async close(): Promise<void> {
    await this.#idle();
    await this.checkpoints.stop();
    this.raw.close();
  }
}
