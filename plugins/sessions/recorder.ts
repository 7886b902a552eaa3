/**
 * The event recorder: transactions, and each event as a `sessions_events` row plus the
 * subscribers run inside the recording transaction (the webhooks outbox) and the listeners run
 * after the outermost transaction commits. An event carries the session row the transaction read
 * (once, see `SessionsStore.transaction`), so no subscriber reads it again.
 */
import type { Logger } from '../../core/logger.ts';
import type { EventName } from './events.ts';
import type { SessionsStore } from './store.ts';
import type { EmittedEvent, EventListener, EventSubscriber } from './types.ts';

export class EventRecorder {
  readonly #store: SessionsStore;
  readonly #log: Logger;
  readonly #subscribers: EventSubscriber[] = [];
  readonly #listeners: EventListener[] = [];
  #depth = 0;
  /** Events recorded in the current outermost transaction, announced once it commits. */
  #pending: EmittedEvent[] = [];

  constructor(store: SessionsStore, log: Logger) {
    this.#store = store;
    this.#log = log;
  }

  /** Runs `fn` in one transaction (nesting allowed); events recorded inside are announced after the commit. */
  transaction<T>(fn: () => T): T {
    const mark = this.#pending.length;
    this.#depth++;
    let result: T;
    try {
      result = this.#store.transaction(fn);
    } catch (err) {
      this.#pending.length = mark;
      throw err;
    } finally {
      this.#depth--;
    }
    if (this.#depth === 0 && !this.#store.db.inTransaction) this.#flush();
    return result;
  }

  /** Records an event of a session, in the current transaction or a new one. */
  emit(sessionId: number, event: EventName, data: unknown): EmittedEvent {
    return this.transaction(() => {
      const session = this.#store.session(sessionId);
      if (!session) throw new Error(`event ${event} for unknown session ${sessionId}`);
      const now = new Date();
      const raw = JSON.stringify({ event, sessionId, timestamp: now.getTime(), data: data ?? null });
      const createdAt = now.toISOString();
      const id = this.#store.insertEvent(sessionId, session.orgId, event, raw, createdAt);
      const recorded: EmittedEvent = { id, sessionId, orgId: session.orgId, event, payload: JSON.parse(raw), createdAt, session };
      for (const subscriber of this.#subscribers) subscriber(recorded);
      this.#pending.push(recorded);
      return recorded;
    });
  }

  onEvent(fn: EventSubscriber): () => void {
    this.#subscribers.push(fn);
    return () => remove(this.#subscribers, fn);
  }

  afterEvent(fn: EventListener): () => void {
    this.#listeners.push(fn);
    return () => remove(this.#listeners, fn);
  }

  #flush(): void {
    const events = this.#pending;
    this.#pending = [];
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
