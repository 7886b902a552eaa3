/**
 * Session leases: several `wharf serve` instances on one PostgreSQL database must never open two
 * network connections for one session (two WhatsApp sockets for one account). Before an instance
 * opens a socket for a session (connect, resume at start-up, reconnect) it takes the session's
 * lease in one atomic statement (`sessions_leases`: owner instance, where other instances reach
 * it, `lease_until`); a heartbeat renews what it holds every third of the lease; a clean stop,
 * disconnect, logout or delete releases it. A lease that is not renewed (its instance died)
 * expires, and another instance takes the session over. An instance that cannot renew a lease
 * (taken meanwhile, or not renewed before it ran out) closes its socket at once. Another instance
 * that needs the session's socket calls the owner at `owner_url` (forwarding.ts).
 *
 * Clocks: on PostgreSQL `lease_until` is computed and compared with the database's clock
 * (`clock_timestamp()`), so instances whose clocks disagree never steal or keep a lease wrongly;
 * an instance judges its own leases from its clock taken before each statement (it may think a
 * lease ends a little before it does, never after). On SQLite (one process) the same statements
 * run with this process's clock, the one instance always wins (a lease left by a process that
 * crashed does not delay a resume), and nothing needs renewing.
 *
 * The statements go to the data layer directly, never joining a transaction of the caller: a
 * lease is taken or not, whatever the caller's transaction does afterwards.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../../core/db.ts';

/** The database's clock as Unix milliseconds, in PostgreSQL (the time of the statement's execution, not of its transaction). */
const DATABASE_NOW = '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint';

/** The instance holding a session's lease, and where it takes calls for it (null: it has no address others can use). */
export interface LeaseHolder {
  owner: string;
  url: string | null;
}

export class SessionLeases {
  /** This instance, as the leases name it. */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID()}`;
  readonly ms: number;
  readonly #db: Db;
  /** Where other instances reach this one (its internal URL), written with each lease it takes. */
  readonly #url: string | null;
  /** The leases this instance holds: session id -> when it runs out (Unix ms, this instance's clock, on the safe side). */
  readonly #held = new Map<number, number>();

  /** Whether other instances may share the database (PostgreSQL). Not on SQLite: a lease another owner left (a crash) never stands in the way. */
  readonly shared: boolean;

  constructor(db: Db, leaseSeconds: number, options: { shared: boolean; url?: string | null }) {
    this.#db = db;
    this.ms = leaseSeconds * 1000;
    this.shared = options.shared;
    this.#url = options.url ?? null;
  }

  /** `now` of a statement: the database's clock where instances share it, this process's on SQLite. */
  #now(): { sql: string; params: number[] } {
    return this.shared ? { sql: DATABASE_NOW, params: [] } : { sql: '?', params: [Date.now()] };
  }

  /**
   * Takes (or renews) a session's lease for this instance, in one statement: it succeeds when
   * nobody holds the lease, this instance holds it, or it expired. False: another instance holds it.
   * Alone on SQLite it always succeeds and is held until released (nothing to renew).
   */
  async take(sessionId: number): Promise<boolean> {
    const started = Date.now();
    const now = this.#now();
    // Alone (SQLite), any lease found is one a crashed process left: it never stands in the way.
    const expired = this.shared ? `sessions_leases.lease_until <= ${DATABASE_NOW}` : 'TRUE';
    const rows = await this.#db.all(
      `INSERT INTO sessions_leases (session_id, owner, owner_url, lease_until) VALUES (?, ?, ?, ${now.sql} + ?)
       ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, owner_url = excluded.owner_url, lease_until = excluded.lease_until
       WHERE sessions_leases.owner = excluded.owner OR ${expired}
       RETURNING session_id`,
      [sessionId, this.owner, this.#url, ...now.params, this.ms],
    );
    if (rows.length === 0) {
      this.#held.delete(sessionId);
      return false;
    }
    // The database's clock read the statement after `started`: the lease ends no sooner than this.
    this.#held.set(sessionId, this.shared ? started + this.ms : Number.POSITIVE_INFINITY);
    return true;
  }

  /** Whether this instance holds a session's lease and it has not run out (as far as this instance can tell). */
  holds(sessionId: number, now = Date.now()): boolean {
    return (this.#held.get(sessionId) ?? 0) > now;
  }

  /** The sessions whose leases this instance holds. */
  held(): number[] {
    return [...this.#held.keys()];
  }

  /** The instance holding a live lease on a session, or null when none does (always null alone on SQLite). */
  async holder(sessionId: number): Promise<LeaseHolder | null> {
    if (!this.shared) return null;
    const row = await this.#db.one<{ owner: string; owner_url: string | null }>(
      `SELECT owner, owner_url FROM sessions_leases WHERE session_id = ? AND lease_until > ${DATABASE_NOW}`,
      [sessionId],
    );
    return row ? { owner: row.owner, url: row.owner_url } : null;
  }

  /** Gives a session's lease back (if this instance holds it): another instance may take it at once. */
  async release(sessionId: number): Promise<void> {
    this.#held.delete(sessionId);
    await this.#db.run('DELETE FROM sessions_leases WHERE session_id = ? AND owner = ?', [sessionId, this.owner]);
  }

  /** Gives back every lease this instance holds (a clean stop). */
  async releaseAll(): Promise<void> {
    this.#held.clear();
    await this.#db.run('DELETE FROM sessions_leases WHERE owner = ?', [this.owner]);
  }
}
