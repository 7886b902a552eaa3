/**
 * The data layer on PostgreSQL: a `pg` pool behind the async `Db`. Placeholders are numbered
 * once per statement text (cached) and statements are prepared by name on each connection.
 * BIGINT and COUNT(*) come back as numbers (pg's default is a string), so rows look the same
 * as on SQLite. Transactions are SERIALIZABLE and retried on a serialization failure or a
 * deadlock (40001, 40P01), a bounded number of times with a short random backoff. A transaction
 * with `lock` keys first takes them: in this process (a queue per key, so waiters hold no
 * connection), then on the server (session-level advisory locks on its connection, before BEGIN).
 * Transactions naming the same keys that arrive while others of those keys run wait together and
 * then share one connection, its locks and one BEGIN ... COMMIT, each in a savepoint (group
 * commit, see `PostgresDb.transaction`).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import {
  ConstraintError,
  ContentionError,
  DatabaseUnavailableError,
  type Db,
  type DbHandle,
  numberPlaceholders,
  type Params,
  type TransactionOptions,
} from './db.ts';

export interface PostgresOptions {
  poolSize: number;
  connectTimeoutMs: number;
  /** Errors of idle connections (the server went away): logged, the pool replaces them. */
  onIdleError?(err: Error): void;
}

/** How many times a transaction runs at most when it keeps meeting serialization failures. */
export const MAX_TRANSACTION_ATTEMPTS = 8;
const RETRYABLE = new Set(['40001', '40P01']);
/**
 * How many transactions one group runs at most under one BEGIN ... COMMIT. Each writing member's
 * savepoint is a subtransaction, and a backend caches the ids of 64 (beyond that, every other
 * backend's snapshots look them up on disk); it also bounds how long a group holds its locks.
 */
export const MAX_GROUP = 32;
/** The savepoint each member of a group runs in. */
const SAVEPOINT = 'wharf_tx';
/** How a group's transaction starts. */
const BEGIN = `BEGIN ISOLATION LEVEL SERIALIZABLE; SAVEPOINT ${SAVEPOINT}`;

/**
 * Thrown by a group member's work left to finish (see {@link finishInGroup}) when what the member
 * went on assuming, instead of waiting for that work's answer, turns out not to be so: the attempt
 * runs again as after a serialization failure (the member counts an attempt), without the backoff.
 */
export class StaleAssumption extends Error {}

const retryable = (err: unknown) => err instanceof StaleAssumption || RETRYABLE.has((err as { code?: string })?.code ?? '');
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
    // Queries given to a connection before the previous one's answer are sent at once, each with
    // its own Sync (pg's pipeline mode): a group commit's RELEASE and its next member's first
    // statement share a round trip. A connection used one query at a time is unchanged.
    pipeline: true,
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

/**
 * Failures to get a connection, which happen before anything of a query is sent: pg-pool's
 * messages when no connection came in time, socket errors of a connect, and the server's refusals
 * at connection start (57P03 starting or shutting down, 53300 too many connections, 57P01/57P02
 * shut down, class 08 connection exceptions).
 */
const NO_CONNECTION_MESSAGES = new Set(['timeout exceeded when trying to connect', 'Connection terminated due to connection timeout']);
const NO_CONNECTION_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', '57P01', '57P02', '57P03', '53300']);

function translateError(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (NO_CONNECTION_MESSAGES.has(e?.message ?? '') || NO_CONNECTION_CODES.has(e?.code ?? '') || e?.code?.startsWith('08'))
    return new DatabaseUnavailableError(e.message || e.code || 'no connection', { cause: err });
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

/** A transaction waiting in, or run by, a group (see {@link PostgresDb.transaction}). */
interface Member {
  fn: (tx: Db) => Promise<unknown>;
  /** Runs a function in the caller's async context (its request's, say), not the group leader's. */
  context: <R>(fn: () => R) => R;
  /** Doomed attempts it was part of. */
  attempts: number;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** Transactions naming the same lock keys, run on one connection under one BEGIN ... COMMIT. */
interface Group {
  readonly keys: readonly string[];
  /** Members not run yet (or to run again), in order. */
  readonly waiting: Member[];
  /** Members taken in, for MAX_GROUP. */
  size: number;
}

/**
 * A group member's queries: refused once its turn is over (the connection then runs another
 * member's); a serialization failure or a deadlock met by any of them dooms the whole attempt,
 * even when the member catches it.
 */
class MemberQueries extends PgQueries {
  ended = false;
  doomed: unknown;
  /** Its work left to finish while the next member runs (see {@link finishInGroup}): its failure, or undefined. */
  later: Promise<{ err: unknown } | undefined> | undefined;
  /** See {@link groupState}. */
  readonly shared: Map<object, unknown>;

  constructor(client: pg.PoolClient, shared: Map<object, unknown>) {
    super(client);
    this.shared = shared;
  }

  #watch(err: unknown): never {
    if (retryable(err)) this.doomed ??= err;
    throw err;
  }

  #check(): void {
    if (this.ended) throw new Error('this transaction has ended: use its tx inside its function only');
  }

  protected override query(sql: string, params: Params | undefined): Promise<pg.QueryResult> {
    this.#check();
    return super.query(sql, params).catch((err: unknown) => this.#watch(err));
  }

  override exec(sql: string): Promise<void> {
    this.#check();
    return super.exec(sql).catch((err: unknown) => this.#watch(err));
  }
}

/**
 * What the members of one group's attempt share, by owner, for a transaction's `tx` (undefined
 * outside a group): they run one after another under one snapshot, so what one of them read is
 * what the next would read, unless one of them wrote it (the owner forgets what it writes). It
 * is emptied when a member is rolled back (what it read after its own writes is undone), and
 * each attempt starts with an empty one.
 */
export function groupState(tx: Db): Map<object, unknown> | undefined {
  return tx instanceof MemberQueries ? tx.shared : undefined;
}

/** Whether `tx` is a group member's whose turn is on: work it sends may be left to finish (see {@link finishInGroup}). */
export function inGroupTurn(tx: Db): tx is MemberQueries {
  return tx instanceof MemberQueries && !tx.ended;
}

/**
 * Leaves `work` to finish while the next member of the group runs, when `tx` is a group member's
 * whose turn is on (true; false otherwise: the caller awaits `work` itself). `work` has sent its
 * statements with `tx` already and sends none after them (its turn ends now): they are on the
 * connection before the next member's, so their answers come first. The group reads `work`'s
 * outcome before it releases the member's savepoint for good and before the COMMIT; when it
 * failed, the member fails alone with its error (its savepoint rolled back; the next member, whose
 * statements PostgreSQL refused, runs again uncounted), and a serialization failure, a deadlock or
 * a {@link StaleAssumption} dooms the attempt as one met by the member would.
 */
export function finishInGroup(tx: Db, work: Promise<unknown>): boolean {
  if (!inGroupTurn(tx)) return false;
  const outcome = work.then(
    () => undefined,
    (err: unknown) => ({ err }),
  );
  const before = tx.later;
  tx.later = before ? before.then((failed) => failed ?? outcome) : outcome;
  return true;
}

/**
 * A member whose work left to finish failed after its savepoint was released (`finishInGroup`:
 * the statement succeeded, what followed its answer threw): it cannot be undone alone, so the
 * attempt is rolled back, the member fails with `cause`, and the others run again uncounted.
 */
class FailedAfterRelease extends Error {
  readonly member: Member;
  constructor(member: Member, cause: unknown) {
    super('a member failed after its release', { cause });
    this.member = member;
  }
}

export class PostgresDb extends PgQueries implements DbHandle {
  readonly pool: pg.Pool;
  readonly #local = new KeyedQueue();
  /** The group taking members now, by its keys. */
  readonly #groups = new Map<string, Group>();

  /** The server process ids of this pool's connections (a notification's sender: this process or another). */
  readonly #backends = new Set<number>();

  constructor(pool: pg.Pool) {
    super(pool);
    this.pool = pool;
    pool.on('connect', (client) => this.#backends.add((client as pg.PoolClient & { processID: number }).processID));
    pool.on('remove', (client) => this.#backends.delete((client as pg.PoolClient & { processID: number }).processID));
  }

  /** A connection of the pool; none in time (or the server refusing) is a DatabaseUnavailableError. */
  #connect(): Promise<pg.PoolClient> {
    return this.pool.connect().catch((err: unknown) => {
      throw translateError(err);
    });
  }

  /**
   * A transaction. Without `lock` keys: on a pooled connection, retried after a serialization
   * failure or a deadlock. With keys: group commit. Transactions naming the same keys join the
   * group of those keys that is waiting for its turn (behind the one running), or start one: the
   * group takes the keys in this process and on the server (advisory locks on one connection,
   * before BEGIN), closes to newcomers, and runs its members one after another in arrival order,
   * each in a savepoint of its own, under one BEGIN ... COMMIT; each promise settles only after
   * that COMMIT. Each member's snapshot is taken after it was asked for (it sees what its caller
   * committed before), and after the previous group's COMMIT. A member that throws rolls
   * back its savepoint alone. A serialization failure or a deadlock (in any member, or at the
   * COMMIT) dooms the whole attempt: it is rolled back and every member of it runs again (each at
   * most MAX_TRANSACTION_ATTEMPTS times, then a ContentionError), which the contract allows (no
   * effects outside the database). A group takes at most MAX_GROUP members; arrivals once it is
   * full or running start the next group, which runs after it.
   */
  override transaction<T>(fn: (tx: Db) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const keys = [...new Set(options.lock ?? [])].sort();
    if (keys.length === 0) return this.#retried(() => this.#withClient('BEGIN ISOLATION LEVEL SERIALIZABLE', fn));
    return new Promise<T>((resolve, reject) => {
      const id = keys.join('\n');
      let group = this.#groups.get(id);
      if (!group || group.size >= MAX_GROUP) {
        group = { keys, waiting: [], size: 0 };
        this.#groups.set(id, group);
        void this.#lead(id, group);
      }
      group.size++;
      group.waiting.push({ fn, context: AsyncLocalStorage.snapshot(), attempts: 0, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  /**
   * Runs a group: its keys taken in this process (after the groups before it that share one),
   * then on a connection of its own on the server, held until every member has settled.
   */
  async #lead(id: string, group: Group): Promise<void> {
    const close = () => {
      if (this.#groups.get(id) === group) this.#groups.delete(id);
    };
    let unlock: (() => void) | undefined;
    try {
      unlock = await this.#local.acquire(group.keys);
      await this.#onConnection(group, close);
    } catch (err) {
      close();
      for (const member of group.waiting.splice(0)) member.reject(err);
    } finally {
      unlock?.();
    }
  }

  /**
   * The group's attempts on one connection that holds the advisory locks of its keys (sorted) from
   * before the first BEGIN until after the last COMMIT or ROLLBACK. A connection left in an unknown
   * state is closed (the server releases its locks with the session), never reused.
   */
  async #onConnection(group: Group, close: () => void): Promise<void> {
    const client = await this.#connect();
    // Numbers (signed 64-bit, from advisoryKey): written into the statements, which then need no
    // parameters and can share a round trip with BEGIN and with COMMIT.
    const locks = group.keys.map(advisoryKey);
    const session = { locked: false, unlocked: false };
    let broken = false;
    try {
      // The locks, then BEGIN, in one round trip: the BEGIN waits on the server for the locks. The
      // locks' statements run in an implicit transaction of their own (a query string's), ended by
      // the COMMIT, so the group's transaction and its snapshot start after the locks are granted.
      await client.query(`${locks.map((id) => `SELECT pg_advisory_lock(${id});`).join(' ')} COMMIT; ${BEGIN}`);
      session.locked = true;
      // Closed to newcomers before its snapshot is taken (at its first statement after BEGIN): each
      // member's snapshot is then taken after its caller asked, so it sees what the caller committed
      // before, as a transaction of its own would. Those arriving from now on form the next group.
      close();
      for (let n = 1; group.waiting.length > 0; n++) {
        const doomed = await this.#attempt(client, group, n > 1, locks, session);
        if (doomed !== undefined && !(doomed instanceof StaleAssumption) && group.waiting.length > 0)
          await sleep(Math.random() * 5 * 2 ** Math.min(n, MAX_TRANSACTION_ATTEMPTS));
      }
    } catch (err) {
      broken = true;
      throw err;
    } finally {
      if (session.locked && !session.unlocked && !broken) {
        // A last attempt that did not commit (it was rolled back): the locks go now.
        await client.query(locks.map((id) => `SELECT pg_advisory_unlock(${id});`).join(' ')).catch(() => {
          broken = true;
        });
      }
      client.release(broken);
    }
  }

  /**
   * One BEGIN ... COMMIT of a group: its waiting members, each in the savepoint, then COMMIT.
   * Settles every member it took: resolved after the COMMIT, rejected alone when it threw, put
   * back at the front of the queue when the attempt was doomed (returns the serialization failure
   * or deadlock then). Throws when the connection can no longer be trusted, after rejecting what
   * it took. `begin`: BEGIN is still to be sent (the first attempt's came with the locks). The
   * COMMIT that ends the group (nobody waits) carries the unlocks: run only when it succeeds.
   */
  async #attempt(client: pg.PoolClient, group: Group, begin: boolean, locks: readonly string[], session: { unlocked: boolean }): Promise<unknown> {
    /** Members whose work is in the transaction, with their results and their work left to finish (see finishInGroup). */
    const taken: { member: Member; result: unknown; later: Promise<{ err: unknown } | undefined> | undefined }[] = [];
    /** The member running now. */
    let current: Member | undefined;
    const shared = new Map<object, unknown>();
    try {
      if (begin) await client.query(BEGIN);
      /** The last member taken ran in the savepoint open now, which is not released yet. */
      let unreleased = false;
      for (;;) {
        const next = group.waiting.shift();
        /**
         * Releasing checks that the last member left the transaction usable (it may have caught an
         * error and gone on: the transaction is then aborted). Before another member, RELEASE and
         * the next SAVEPOINT are sent and not waited for: the member's statements follow them on
         * the connection (pipelined, see openPostgres), and the release's answer is read once the
         * member ran, as is the outcome of the work the last member left to finish (finishInGroup),
         * whose answer comes before the release's. After a failed statement of a query string the
         * rest are not run: the unlocks only after a COMMIT that succeeded.
         */
        let released: Promise<{ err: unknown } | undefined> | undefined;
        /** The member released before `next` runs. */
        let previous: (typeof taken)[number] | undefined;
        if (unreleased && next) {
          previous = taken.at(-1);
          released = client.query(`RELEASE SAVEPOINT ${SAVEPOINT}; SAVEPOINT ${SAVEPOINT}`).then(
            () => undefined,
            (err: unknown) => ({ err }),
          );
          unreleased = false;
        } else if (!next) {
          // The last member's work left to finish is read before the COMMIT is sent: its savepoint is still open.
          const last = unreleased ? taken.at(-1) : undefined;
          const late = last?.later && (await last.later);
          if (late) {
            taken.pop();
            if (retryable(late.err)) {
              current = last!.member;
              current.attempts++;
              throw late.err;
            }
            await this.#rollbackToSavepoint(client, shared);
            last!.member.reject(late.err);
            unreleased = false;
            continue;
          }
          const end = `RELEASE SAVEPOINT ${SAVEPOINT}; COMMIT; ${locks.map((id) => `SELECT pg_advisory_unlock(${id});`).join(' ')}`;
          try {
            await client.query(end);
          } catch (err) {
            if (!unreleased || (err as { code?: string }).code !== '25P02') throw err;
            // The last member aborted the transaction: its savepoint is undone, it fails alone.
            await this.#rollbackToSavepoint(client, shared);
            taken.pop()!.member.reject(err);
            unreleased = false;
            continue;
          }
          session.unlocked = true;
          break;
        }
        current = next;
        const tx = new MemberQueries(client, shared);
        let result: unknown;
        let failure: { err: unknown } | undefined;
        try {
          result = await next.context(() => next.fn(tx));
        } catch (err) {
          failure = { err };
        } finally {
          tx.ended = true;
        }
        const late = previous?.later && (await previous.later);
        const release = released && (await released);
        if (late && retryable(late.err)) {
          // The member before met the conflict: it counts an attempt; the others run again uncounted.
          previous!.member.attempts++;
          throw late.err;
        }
        if (late && !release) throw new FailedAfterRelease(previous!.member, late.err);
        if (release) {
          // The member before had aborted the transaction (or its work left to finish failed): this
          // one's statements were refused (whatever it made of that, it runs again, uncounted); the
          // one before fails alone, with its own work's error when it has one.
          group.waiting.unshift(next);
          current = undefined;
          if ((release.err as { code?: string }).code !== '25P02') throw release.err;
          await this.#rollbackToSavepoint(client, shared);
          taken.pop()!.member.reject(late ? late.err : release.err);
          continue;
        }
        if (tx.doomed !== undefined || (failure && retryable(failure.err))) {
          // This member met the conflict: it counts an attempt; the others run again uncounted.
          next.attempts++;
          throw tx.doomed ?? failure!.err;
        }
        if (failure) {
          await this.#rollbackToSavepoint(client, shared);
          current = undefined;
          next.reject(failure.err);
          continue;
        }
        current = undefined;
        taken.push({ member: next, result, later: tx.later });
        unreleased = true;
      }
    } catch (err) {
      const members = [...taken.map((t) => t.member), ...(current ? [current] : [])];
      const alone = err instanceof FailedAfterRelease ? err : undefined;
      try {
        await client.query('ROLLBACK');
      } catch {
        // The connection is gone: the server rolled back.
        for (const member of members) member.reject(alone?.cause ?? err);
        throw alone?.cause ?? err;
      }
      if (alone) {
        alone.member.reject(alone.cause);
        group.waiting.unshift(...members.filter((member) => member !== alone.member));
        return undefined;
      }
      if (!retryable(err)) {
        for (const member of members) member.reject(err);
        return undefined;
      }
      // A conflict met at the COMMIT counts an attempt for every member; one met by a member, for
      // that member alone (the others are bounded by its attempts: a member that keeps meeting
      // conflicts gives up after MAX_TRANSACTION_ATTEMPTS, and takes nobody with it).
      const again: Member[] = [];
      for (const member of members) {
        if (current === undefined) member.attempts++;
        if (member.attempts >= MAX_TRANSACTION_ATTEMPTS) member.reject(new ContentionError(member.attempts, { cause: err }));
        else again.push(member);
      }
      group.waiting.unshift(...again);
      return err;
    }
    for (const { member, result } of taken) member.resolve(result);
    return undefined;
  }

  /** Undoes the work of the member whose savepoint is open (what the group shared goes with it). */
  async #rollbackToSavepoint(client: pg.PoolClient, shared: Map<object, unknown>): Promise<void> {
    await client.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
    shared.clear();
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
   * Runs `fn` in one transaction (READ COMMITTED) while holding the session-level advisory lock
   * `key`: another caller with the same key (another instance migrating) waits for the lock.
   */
  async withAdvisoryLock<T>(key: number, fn: (tx: Db) => Promise<T>): Promise<T> {
    const client = await this.#connect();
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
    const client = await this.#connect();
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
   * to the pool between queries) and calls `fn` with each notification's payload, and whether it
   * was sent by a connection of this pool (this process's own transaction). Returns the
   * function that stops listening. A broken connection is not reopened: `onError` is told, and
   * callers keep a periodic safety net (the webhooks dispatcher's resync).
   */
  async listen(channel: string, fn: (payload: string, ours: boolean) => void, onError?: (err: Error) => void): Promise<() => Promise<void>> {
    const { Client } = await loadPg();
    const client = new Client(this.pool.options as pg.ClientConfig);
    client.on('error', (err) => onError?.(err));
    await client.connect();
    client.on('notification', (message) => {
      if (message.channel === channel) fn(message.payload ?? '', this.#backends.has(message.processId));
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
