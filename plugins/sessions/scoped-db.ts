/**
 * The sessions plugin's view of the data layer: a `Db` whose queries run in the transaction in
 * progress in the current async context, if any, and on the pool (or file) otherwise. The
 * plugin's stores (sessions, sandbox, WhatsApp, media) share one, so everything a network host,
 * an adapter or a service writes inside `transaction(fn)` joins that transaction without passing
 * `tx` through every call.
 *
 * A transaction carries a {@link Scope}: what it read once (session rows) and what it recorded
 * (events announced after the commit). On PostgreSQL a transaction may run again after a
 * serialization failure: each attempt gets a fresh scope, so nothing of a failed attempt leaks.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Db, Params, TransactionOptions } from '../../core/db.ts';
import { finishInGroup, inGroupTurn } from '../../core/db-postgres.ts';

/** What one outermost transaction carries. */
export interface Scope {
  readonly tx: Db;
  /** False once the transaction's attempt ended: work it scheduled (a timer, a promise left running) no longer joins it. */
  open: boolean;
  /** Per-transaction state of whoever asks (a store's snapshot, a recorder's pending events), by owner. */
  readonly state: Map<object, unknown>;
  /**
   * Writes held back to be sent as one statement (the recorder's batch of events: its one user):
   * run before the transaction's next statement through this `ScopedDb` (which may read them) and
   * before it ends. A statement sent with `tx` itself does not wait for them.
   */
  deferred?: () => Promise<void>;
  /**
   * Set with `deferred`: once their statement is sent, the deferred writes need the transaction
   * no more (nothing after them sends a statement). At the end of a PostgreSQL group member they
   * are then left to finish while the next member runs (`finishInGroup`), before the COMMIT.
   */
  deferredAlone?: boolean;
  /** The deferred writes being sent now. */
  flushing?: Promise<void>;
  /** Deferred writes that failed: the transaction fails with this, even when the statement that sent them was caught. */
  failed?: { err: unknown };
  /** Run once the transaction committed (see {@link ScopedDb.afterCommit}). */
  committed?: (() => void)[];
}

export class ScopedDb implements Db {
  readonly #root: Db;
  readonly #als = new AsyncLocalStorage<Scope>();
  /** Set while deferred writes are sent: their own statements (a subscriber's) do not wait for them. */
  readonly #flushing = new AsyncLocalStorage<boolean>();

  constructor(root: Db) {
    this.#root = root;
  }

  get engine() {
    return this.#root.engine;
  }

  /** The transaction in progress in this async context, or undefined. */
  get scope(): Scope | undefined {
    const scope = this.#als.getStore();
    return scope?.open ? scope : undefined;
  }

  /** Runs a statement in the transaction in progress (after its deferred writes), or on the pool. */
  #on<R>(statement: (db: Db) => Promise<R>): Promise<R> {
    const scope = this.scope;
    if (!scope) return statement(this.#root);
    const flushing = this.#flushing.getStore() ? undefined : this.#flush(scope);
    return flushing ? flushing.then(() => statement(scope.tx)) : statement(scope.tx);
  }

  /** Sends the scope's deferred writes (see {@link Scope.deferred}); resolves once they are written. */
  #flush(scope: Scope): Promise<void> | undefined {
    const deferred = scope.deferred;
    if (deferred) {
      scope.deferred = undefined;
      const flushing = this.#flushing
        .run(true, deferred)
        .catch((err: unknown) => {
          scope.failed ??= { err };
          throw err;
        })
        .finally(() => {
          if (scope.flushing === flushing) scope.flushing = undefined;
        });
      scope.flushing = flushing;
    }
    return scope.flushing;
  }

  one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined> {
    return this.#on((db) => db.one<T>(sql, params));
  }

  all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]> {
    return this.#on((db) => db.all<T>(sql, params));
  }

  value<T = unknown>(sql: string, params?: Params): Promise<T | undefined> {
    return this.#on((db) => db.value<T>(sql, params));
  }

  run(sql: string, params?: Params): Promise<{ changes: number }> {
    return this.#on((db) => db.run(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.#on((db) => db.exec(sql));
  }

  /**
   * Sends `statement` in the transaction in progress without waiting for its answer, which
   * `then` gets (and may refuse by throwing) while the transaction goes on: when that transaction
   * is a PostgreSQL group member whose turn is on, the group reads the answer while its next member
   * runs, before the COMMIT (see finishInGroup; a `StaleAssumption` thrown by `then` runs the
   * attempt again). Returns false, having sent nothing, anywhere else: the caller then sends the
   * statement itself and waits.
   */
  leaveToGroup<R>(statement: (db: Db) => Promise<R>, then: (result: R) => void): boolean {
    const scope = this.scope;
    if (!scope || !inGroupTurn(scope.tx)) return false;
    return finishInGroup(scope.tx, this.#on(statement).then(then));
  }

  /**
   * Runs `fn` once what the current transaction wrote and read is committed: after its COMMIT
   * (never when it is rolled back, nor for an attempt that runs again), at once outside one (a
   * statement on the pool sees committed rows only). For caches of rows that never change once
   * written: a row read inside a transaction may be one it wrote itself and may yet roll back.
   */
  afterCommit(fn: () => void): void {
    const scope = this.scope;
    if (scope) (scope.committed ??= []).push(fn);
    else fn();
  }

  /**
   * Runs `fn` in a transaction; inside one already, joins it (no savepoint: a throw inside
   * rolls back the whole transaction once it reaches the outermost call, and its `options` are
   * those of the outermost call). On PostgreSQL `fn` may run again after a serialization
   * failure: no effects outside the database in it.
   */
  transaction<T>(fn: (tx: Db) => Promise<T>, options?: TransactionOptions): Promise<T> {
    const current = this.scope;
    if (current) return fn(current.tx);
    return this.#outermost(fn, options);
  }

  async #outermost<T>(fn: (tx: Db) => Promise<T>, options: TransactionOptions | undefined): Promise<T> {
    /** The last attempt's scope: the one that committed when the transaction resolves. */
    let last: Scope | undefined;
    const result = await this.#root.transaction(async (tx) => {
      const scope: Scope = { tx, state: new Map(), open: true };
      last = scope;
      try {
        return await this.#als.run(scope, async () => {
          const result = await fn(tx);
          // Deferred writes are part of the transaction: written before it ends (a failure rolls it
          // back). As a PostgreSQL group member's last statement, sent and not waited for: the
          // group reads their outcome while the next member runs, and fails this one with their
          // error (its caller's promise settles after the COMMIT in any case).
          if (scope.deferred && scope.deferredAlone && !scope.flushing && !scope.failed && finishInGroup(tx, this.#flush(scope)!)) return result;
          while (scope.deferred || scope.flushing) await this.#flush(scope);
          if (scope.failed) throw scope.failed.err;
          return result;
        });
      } finally {
        scope.open = false;
      }
    }, options);
    for (const fn of last?.committed ?? []) fn();
    return result;
  }
}
