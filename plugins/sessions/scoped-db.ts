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

/** What one outermost transaction carries. */
export interface Scope {
  readonly tx: Db;
  /** False once the transaction's attempt ended: work it scheduled (a timer, a promise left running) no longer joins it. */
  open: boolean;
  /** Per-transaction state of whoever asks (a store's snapshot, a recorder's pending events), by owner. */
  readonly state: Map<object, unknown>;
}

export class ScopedDb implements Db {
  readonly #root: Db;
  readonly #als = new AsyncLocalStorage<Scope>();

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

  #db(): Db {
    return this.scope?.tx ?? this.#root;
  }

  one<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T | undefined> {
    return this.#db().one<T>(sql, params);
  }

  all<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]> {
    return this.#db().all<T>(sql, params);
  }

  value<T = unknown>(sql: string, params?: Params): Promise<T | undefined> {
    return this.#db().value<T>(sql, params);
  }

  run(sql: string, params?: Params): Promise<{ changes: number }> {
    return this.#db().run(sql, params);
  }

  exec(sql: string): Promise<void> {
    return this.#db().exec(sql);
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
    return this.#root.transaction(async (tx) => {
      const scope: Scope = { tx, state: new Map(), open: true };
      try {
        return await this.#als.run(scope, () => fn(tx));
      } finally {
        scope.open = false;
      }
    }, options);
  }
}
