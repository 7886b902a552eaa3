/**
 * The data layer: one small async interface, `Db`, that a plugin's store uses on either engine,
 * SQLite (core/db-sqlite.ts, embedded, the default) or PostgreSQL (core/db-postgres.ts). SQL is
 * written once with `?` or `@name` placeholders; the Postgres side numbers them ($1...). A unique
 * or foreign-key violation is a ConstraintError on both. Nothing engine-specific leaks out, apart
 * from `engine` for the rare statement that must differ (and migrations, which may differ).
 *
 * Also here: the synchronous SQLite connection (`Database`, `openDatabase`) that plugins not yet
 * ported to `Db` use as `ctx.db` (contract 1.0), and that the SQLite `Db` wraps.
 */
import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { nativeSqliteBinding } from './native.ts';

export type Database = BetterSqlite3.Database;

export type DatabaseEngine = 'sqlite' | 'postgres';

/** Values bound to `?` (an array, in order) or to `@name` (an object). */
export type Params = readonly unknown[] | Readonly<Record<string, unknown>>;

/** The async data layer. Rows come back as plain objects keyed by column name. */
export interface Db {
  readonly engine: DatabaseEngine;
  /** The first row, or undefined. */
  one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined>;
  all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]>;
  /** The first column of the first row, or undefined. */
  value<T = unknown>(sql: string, params?: Params): Promise<T | undefined>;
  /** A statement that returns no rows; `changes` = rows inserted, updated or deleted. */
  run(sql: string, params?: Params): Promise<{ changes: number }>;
  /** One or more statements without parameters (schema changes). */
  exec(sql: string): Promise<void>;
  /**
   * Runs `fn` in a transaction: committed when it resolves, rolled back when it throws. Use only
   * `tx` inside. On PostgreSQL it is SERIALIZABLE and `fn` may run again (a bounded number of
   * times) after a serialization failure, so it must not have effects outside the database; when
   * concurrent transactions keep refusing it, it throws a {@link ContentionError} (503). On
   * SQLite transactions run one at a time in the process, and those of one event-loop turn share
   * one BEGIN IMMEDIATE ... COMMIT at the end of the turn, each in its own savepoint (group commit:
   * a throw rolls back that transaction alone); the promise settles after the COMMIT; queries
   * outside wait for it. A nested call runs inside the outer transaction (its options are
   * ignored: the outer call's hold). `fn` must not wait for another transaction to settle.
   *
   * `options.lock` names what the transaction writes that others write too (say `sessions:12`,
   * one session's event log and message log; prefix keys with the plugin's name). Transactions
   * naming a common key run one after another, on every instance sharing the database: on
   * PostgreSQL each key is a session-level advisory lock taken on the transaction's connection
   * BEFORE `BEGIN` (so the snapshot is taken once the previous holder committed, and the two never
   * conflict) and released after COMMIT or ROLLBACK; several keys are taken in sorted order, so
   * two transactions naming the same keys cannot deadlock. Waiters in one process queue in memory,
   * one connection per key waits on the server. Transactions of one process naming the same keys
   * that wait together run as a group (group commit, as on SQLite): on the group's connection,
   * under its locks and one BEGIN ... COMMIT, each in its own savepoint, settling after the
   * COMMIT; a serialization failure reruns the whole attempt's members. The retries stay as the
   * safety net for writers that name no key. On SQLite it changes nothing (writers already run
   * one at a time).
   */
  transaction<T>(fn: (tx: Db) => Promise<T>, options?: TransactionOptions): Promise<T>;
}

/** How a transaction runs (see {@link Db.transaction}). */
export interface TransactionOptions {
  /** Keys whose holders run one at a time, over every instance sharing the database; taken before the transaction starts. */
  lock?: readonly string[];
}

/** A connection pool or file: the `Db` plus its lifecycle. */
export interface DbHandle extends Db {
  /** Answers when the database does (for /readyz). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** A unique or foreign-key constraint refused a write. `constraint` names it when the engine says. */
export class ConstraintError extends Error {
  readonly kind: 'unique' | 'foreign_key';
  readonly constraint: string | undefined;
  constructor(kind: 'unique' | 'foreign_key', message: string, options: { constraint?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'ConstraintError';
    this.kind = kind;
    this.constraint = options.constraint;
  }
}

/**
 * A transaction that concurrent ones kept refusing (PostgreSQL serialization failures or
 * deadlocks) after every retry. Nothing of it was written; the same request may succeed when
 * tried again, so the server answers 503 with Retry-After (core/errors.ts), never a 500.
 */
export class ContentionError extends Error {
  readonly status = 503;
  readonly retryAfter = 1;
  readonly expose = true;
  constructor(attempts: number, options: { cause?: unknown } = {}) {
    super(`The database is busy with conflicting writes (${attempts} attempts); nothing was changed, try again`, options);
    this.name = 'ContentionError';
  }
}

/**
 * The database server could not be reached for a request: no connection in time (the pool busy
 * or the server slow to accept), the server refusing connections (down, starting, shutting down,
 * at its connection limit). Nothing of the request was written; the server answers 503 with
 * Retry-After (core/errors.ts), never a 500.
 */
export class DatabaseUnavailableError extends Error {
  readonly status = 503;
  readonly retryAfter = 1;
  readonly expose = true;
  constructor(reason: string, options: { cause?: unknown } = {}) {
    super(`The database is unavailable (${reason}); nothing was changed, try again`, options);
    this.name = 'DatabaseUnavailableError';
  }
}

export interface OpenOptions {
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** Fail when the file does not exist, instead of creating it (and its directory). */
  mustExist?: boolean;
}

/** The synchronous SQLite connection: WAL, a busy timeout, foreign keys on. */
export function openDatabase(file: string, options: OpenOptions = {}): Database {
  if (file !== ':memory:' && !options.mustExist) fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const binding = nativeSqliteBinding();
  const db = new BetterSqlite3(file, {
    timeout: options.busyTimeoutMs ?? 5000,
    readonly: options.readonly ?? false,
    fileMustExist: options.mustExist ?? false,
    ...(binding ? { nativeBinding: binding as unknown as string } : {}),
  });
  if (!options.readonly) db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  // Statement journals and savepoint sub-journals (nested transactions, statements that may
  // fail midway) in memory: on disk each one is a temporary file created and deleted per
  // transaction, several system calls each (BENCHMARKS.md, issue 16). They hold only what one
  // transaction changes and are never needed after a crash.
  db.pragma('temp_store = MEMORY');
  return db;
}

/**
 * `?` and `@name` placeholders as Postgres's `$1`, `$2`...: the SQL and, for `@name`, the names
 * in the order of their numbers (a name used twice gets one number). Literals, quoted identifiers
 * and comments are left alone; `@` not followed by a letter (`@>`) is an operator, not a name.
 */
export function numberPlaceholders(sql: string): { text: string; names: string[] | null } {
  let out = '';
  let n = 0;
  const names: string[] = [];
  let named = false;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      const stop = end === -1 ? sql.length : end + 1;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      const stop = end === -1 ? sql.length : end + 2;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '?') {
      out += `$${++n}`;
    } else if (c === '@' && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))!;
      named = true;
      let index = names.indexOf(m[0]);
      if (index === -1) index = names.push(m[0]) - 1;
      out += `$${index + 1}`;
      i += m[0].length;
    } else {
      out += c;
    }
  }
  if (named && n > 0) throw new Error('use either ? or @name placeholders in one statement, not both');
  return { text: out, names: named ? names : null };
}
