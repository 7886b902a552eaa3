/**
 * Session leases: several `wharf serve` instances on one PostgreSQL database must never open two
 * network connections for one session (two WhatsApp sockets for one account). Before an instance
 * opens a socket for a session (connect, resume at start-up, reconnect) it takes the session's
 * lease in one atomic statement (`sessions_leases`: owner instance, `lease_until`); a heartbeat
 * renews what it holds every third of the lease; a clean stop, disconnect, logout or delete
 * releases it. A lease that is not renewed (its instance died) expires, and another instance takes
 * the session over. An instance that cannot renew a lease (taken meanwhile, or not renewed before
 * it ran out) closes its socket at once. On SQLite (one process) the same statements run, and
 * the one instance always wins: a lease left by a process that crashed does not delay a resume.
 *
 * The statements go to the data layer directly, never joining a transaction of the caller: a
 * lease is taken or not, whatever the caller's transaction does afterwards.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../../core/db.ts';

export class SessionLeases {
  /** This instance, as the leases name it. */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID()}`;
  readonly ms: number;
  readonly #db: Db;
  /** The leases this instance holds: session id -> when it runs out (Unix ms), as last written. */
  readonly #held = new Map<number, number>();

  /** Whether other instances may share the database (PostgreSQL). Not on SQLite: a lease another owner left (a crash) never stands in the way. */
  readonly shared: boolean;

  constructor(db: Db, leaseSeconds: number, options: { shared: boolean }) {
    this.#db = db;
    this.ms = leaseSeconds * 1000;
    this.shared = options.shared;
  }

  /**
   * Takes (or renews) a session's lease for this instance, in one statement: it succeeds when
   * nobody holds the lease, this instance holds it, or it expired. False: another instance holds it.
   */
  async take(sessionId: number, now = Date.now()): Promise<boolean> {
    const until = now + this.ms;
    const rows = await this.#db.all(
      `INSERT INTO sessions_leases (session_id, owner, lease_until) VALUES (?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
       WHERE sessions_leases.owner = excluded.owner OR sessions_leases.lease_until <= ?
       RETURNING session_id`,
      [sessionId, this.owner, until, this.shared ? now : Number.MAX_SAFE_INTEGER],
    );
    if (rows.length === 0) {
      this.#held.delete(sessionId);
      return false;
    }
    this.#held.set(sessionId, until);
    return true;
  }

  /** Whether this instance holds a session's lease and it has not run out (as far as this instance wrote it). */
  holds(sessionId: number, now = Date.now()): boolean {
    return (this.#held.get(sessionId) ?? 0) > now;
  }

  /** The sessions whose leases this instance holds. */
  held(): number[] {
    return [...this.#held.keys()];
  }

  /** The instance holding a live lease on a session, or null when none does. */
  async holder(sessionId: number, now = Date.now()): Promise<string | null> {
    if (!this.shared) return null;
    return (await this.#db.value<string>('SELECT owner FROM sessions_leases WHERE session_id = ? AND lease_until > ?', [sessionId, now])) ?? null;
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
