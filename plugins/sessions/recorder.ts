/**
 * The event recorder: transactions, and each event as a `sessions_events` row plus the
 * subscribers run inside the recording transaction (the webhooks outbox, writing with the
 * transaction's `tx`) and the listeners run after the outermost transaction commits. An event
 * carries the session row the transaction read (once, see `SessionsStore.session`), so no
 * subscriber reads it again. On PostgreSQL a transaction may run again after a serialization
 * failure: the events of a failed attempt are dropped with its scope, only the committed
 * attempt's are announced.
 */
import type { Logger } from '../../core/logger.ts';
import type { EventName } from './events.ts';
import type { Scope } from './scoped-db.ts';
import type { SessionsStore } from './store.ts';
import type { EmittedEvent, EventListener, EventSubscriber } from './types.ts';

export class EventRecorder {
  readonly #store: SessionsStore;
  readonly #log: Logger;
  readonly #subscribers: EventSubscriber[] = [];
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

  /** Records an event of a session, in the current transaction or a new one. */
  emit(sessionId: number, event: EventName, data: unknown): Promise<EmittedEvent> {
    return this.transaction(async () => {
      const scope = this.#store.db.scope!;
      const session = await this.#store.session(sessionId);
      if (!session) throw new Error(`event ${event} for unknown session ${sessionId}`);
      const now = new Date();
      const raw = JSON.stringify({ event, sessionId, timestamp: now.getTime(), data: data ?? null });
      const createdAt = now.toISOString();
      const id = await this.#store.insertEvent(sessionId, session.orgId, event, raw, createdAt);
      // The payload is parsed from the recorded text when a listener first reads it (a copy the
      // listener cannot change the record through); a webhook body is the text itself.
      let payload: EmittedEvent['payload'] | undefined;
      const recorded: EmittedEvent = {
        id,
        sessionId,
        orgId: session.orgId,
        event,
        raw,
        get payload() {
          return (payload ??= JSON.parse(raw) as EmittedEvent['payload']);
        },
        createdAt,
        session,
      };
      for (const subscriber of this.#subscribers) await subscriber(recorded, scope.tx);
      this.#pending(scope).push(recorded);
      return recorded;
    }, [sessionId]);
  }

  onEvent(fn: EventSubscriber): () => void {
    this.#subscribers.push(fn);
    return () => remove(this.#subscribers, fn);
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
