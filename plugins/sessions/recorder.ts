/**
 * The event recorder: transactions, and each event as a `sessions_events` row plus the rows
 * other plugins write with it (the webhooks outbox, `onEventRow`), the subscribers run inside
 * the recording transaction and the listeners run after the outermost transaction commits. An
 * event carries the session row the transaction read (once, see `SessionsStore.session`), so no
 * subscriber reads it again.
 *
 * Events are written in batches: those a transaction emits are held in its scope and written
 * with their rows by one call of `SessionsStore.insertEvents` (on PostgreSQL one statement)
 * before the transaction's next statement (which may read them) and before it ends; their ids
 * are known from then on, and the subscribers run then. A batch sent as a PostgreSQL group
 * member's last statement, with no `onEvent` subscriber, is answered while the next member runs
 * (its row subscribers' `written` then), still before the COMMIT. On PostgreSQL a transaction may run
 * again after a serialization failure: the events of a failed attempt are dropped with its
 * scope, only the committed attempt's are announced.
 */
import type { Logger } from '../../core/logger.ts';
import type { EventName } from './events.ts';
import type { Scope } from './scoped-db.ts';
import type { SessionsStore } from './store.ts';
import type { EmittedEvent, EventListener, EventRow, EventRowSubscriber, EventRowTable, EventSubscriber } from './types.ts';

/** Events emitted in a transaction and not written yet, with their rows. */
interface Batch {
  events: EmittedEvent[];
  /** `event`: the index of the event a row takes the id of (none for a table without `eventId`). */
  rows: { table: EventRowTable; event?: number; row: EventRow }[];
}

/** The scope state key of a transaction's batch not written yet. */
const BATCH = { state: 'events not written yet' };

export class EventRecorder {
  readonly #store: SessionsStore;
  readonly #log: Logger;
  readonly #subscribers: EventSubscriber[] = [];
  readonly #rowSubscribers: { table: EventRowTable; fn: EventRowSubscriber }[] = [];
  readonly #listeners: EventListener[] = [];

  constructor(store: SessionsStore, log: Logger) {
    this.#store = store;
    this.#log = log;
  }

  /** Events recorded in a transaction, announced once it commits. */
  #pending(scope: Scope): EmittedEvent[] {
    let pending = scope.state.get(this) as EmittedEvent[] | undefined;
    if (!pending) scope.state.set(this, (pending = []));
    return pending;
  }

  /**
   * Runs `fn` in one transaction (nesting joins it); events recorded inside are announced after
   * the commit. `sessions`: the sessions it writes events of, locked for it (SessionsStore.transaction).
   */
  async transaction<T>(fn: () => Promise<T>, sessions: readonly number[] = []): Promise<T> {
    const { db } = this.#store;
    if (db.scope) return fn();
    let committed: Scope | undefined;
    const result = await this.#store.transaction(() => {
      committed = db.scope;
      return fn();
    }, sessions);
    const events = committed?.state.get(this) as EmittedEvent[] | undefined;
    if (events) this.#flush(events);
    return result;
  }

  /**
   * Records an event of a session, in the current transaction or a new one. Inside a transaction
   * the event is written (and gets its id) before the transaction's next statement or its end.
   */
  emit(sessionId: number, event: EventName, data: unknown): Promise<EmittedEvent> {
    return this.transaction(async () => {
      const scope = this.#store.db.scope!;
      const session = await this.#store.session(sessionId);
      if (!session) throw new Error(`event ${event} for unknown session ${sessionId}`);
      const now = new Date();
      const raw = JSON.stringify({ event, sessionId, timestamp: now.getTime(), data: data ?? null });
      // The payload is parsed from the recorded text when a listener first reads it (a copy the
      // listener cannot change the record through); a webhook body is the text itself.
      let payload: EmittedEvent['payload'] | undefined;
      const recorded: EmittedEvent = {
        id: 0,
        sessionId,
        orgId: session.orgId,
        event,
        raw,
        get payload() {
          return (payload ??= JSON.parse(raw) as EmittedEvent['payload']);
        },
        createdAt: now.toISOString(),
        session,
      };
      const batch = this.#batch(scope);
      batch.events.push(recorded);
      for (const { table, fn } of this.#rowSubscribers) {
        const row = fn(recorded);
        if (row) batch.rows.push({ table, event: batch.events.length - 1, row });
      }
      return recorded;
    }, [sessionId]);
  }

  /** The transaction's batch not written yet (a new one, to be written before its next statement or its end). */
  #batch(scope: Scope): Batch {
    let batch = scope.state.get(BATCH) as Batch | undefined;
    if (!batch) {
      const fresh: Batch = (batch = { events: [], rows: [] });
      scope.state.set(BATCH, fresh);
      scope.deferred = () => this.#write(scope, fresh);
      // Without subscribers (which write with the transaction), nothing after the statement needs it.
      scope.deferredAlone = this.#subscribers.length === 0;
    }
    return batch;
  }

  /**
   * A row of a table that takes no event's id (an audit row), written with the current
   * transaction's events (on PostgreSQL in their statement); outside a transaction, false: the
   * caller writes it itself.
   */
  defer(table: EventRowTable, values: readonly unknown[]): boolean {
    const scope = this.#store.db.scope;
    if (!scope) return false;
    this.#batch(scope).rows.push({ table, row: { values, written: () => {} } });
    return true;
  }

  /** Writes a transaction's batch of events with their rows, then runs the subscribers on each. */
  async #write(scope: Scope, batch: Batch): Promise<void> {
    scope.state.delete(BATCH);
    const written = await this.#store.insertEvents(
      scope.tx,
      batch.events,
      batch.rows.map(({ table, event, row }) => ({ table, event, values: row.values })),
    );
    for (const [i, event] of batch.events.entries()) event.id = written.events[i]!;
    for (const [i, { row }] of batch.rows.entries()) row.written(written.rows[i]!);
    for (const event of batch.events) for (const subscriber of this.#subscribers) await subscriber(event, scope.tx);
    this.#pending(scope).push(...batch.events);
  }

  onEvent(fn: EventSubscriber): () => void {
    this.#subscribers.push(fn);
    return () => remove(this.#subscribers, fn);
  }

  onEventRow(table: EventRowTable, fn: EventRowSubscriber): () => void {
    const entry = { table, fn };
    this.#rowSubscribers.push(entry);
    return () => remove(this.#rowSubscribers, entry);
  }

  afterEvent(fn: EventListener): () => void {
    this.#listeners.push(fn);
    return () => remove(this.#listeners, fn);
  }

  #flush(events: EmittedEvent[]): void {
    for (const event of events) {
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch (err) {
          this.#log.error({ err, event: event.event, eventId: event.id }, 'event listener failed');
        }
      }
    }
  }
}

/** Removes one item from a list of callbacks (an unsubscribe). */
export function remove<T>(list: T[], item: T): void {
  const i = list.indexOf(item);
  if (i >= 0) list.splice(i, 1);
}
