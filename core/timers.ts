/**
 * The interval timers of the plugins, `ctx.every(name, ms, fn)`: declared during setup, started
 * once the whole server has started (a boot that fails part-way runs none), each run's error
 * logged with the timer's name, a run never overlapping the previous one, and every timer
 * stopped when the server closes, before the plugins close, after waiting for a run in progress.
 */
import type { Logger } from './logger.ts';

interface Timer {
  owner: string;
  name: string;
  ms: number;
  fn: () => unknown;
  log: Logger;
  handle?: NodeJS.Timeout;
  /** The run in progress, if any. */
  running?: Promise<void>;
}

/** Longest interval setInterval keeps (2^31 - 1 ms, about 24.8 days); longer ones would fire at once. */
const MAX_INTERVAL_MS = 2 ** 31 - 1;

/** The timers of one server. Not shared: each `start()` makes its own. */
export class Timers {
  readonly #timers: Timer[] = [];
  #state: 'declaring' | 'started' | 'stopped' = 'declaring';

  /**
   * Declares a timer of plugin `owner` that runs `fn` every `ms` milliseconds. Started by
   * `start()` (at once when already started); a throw or a rejection is logged with the name.
   */
  every(owner: string, log: Logger, name: string, ms: number, fn: () => unknown): void {
    if (this.#state === 'stopped') throw new Error(`timer "${name}" of plugin ${owner}: the server is closed`);
    if (!name) throw new Error(`plugin ${owner}: a timer needs a name`);
    if (!Number.isInteger(ms) || ms < 1 || ms > MAX_INTERVAL_MS)
      throw new Error(`timer "${name}" of plugin ${owner}: interval must be a whole number of milliseconds from 1 to ${MAX_INTERVAL_MS}, got ${ms}`);
    if (this.#timers.some((t) => t.owner === owner && t.name === name)) throw new Error(`plugin ${owner} declares timer "${name}" twice`);
    const timer: Timer = { owner, name, ms, fn, log };
    this.#timers.push(timer);
    if (this.#state === 'started') this.#arm(timer);
  }

  /** Starts every declared timer. */
  start(): void {
    if (this.#state !== 'declaring') return;
    this.#state = 'started';
    for (const timer of this.#timers) this.#arm(timer);
  }

  /** Stops every timer and waits for the runs in progress. Idempotent. */
  async stop(): Promise<void> {
    this.#state = 'stopped';
    for (const timer of this.#timers) clearInterval(timer.handle);
    await Promise.all(this.#timers.map((t) => t.running));
  }

  #arm(timer: Timer): void {
    timer.handle = setInterval(() => this.#run(timer), timer.ms);
    // The HTTP server keeps a serving process alive; a timer alone must not (a server started
    // without listening, in a test or a command, exits when its work is done).
    timer.handle.unref();
  }

  #run(timer: Timer): void {
    // A slow run (a large prune) is not stacked on by the next tick.
    if (timer.running || this.#state !== 'started') return;
    timer.running = (async () => {
      try {
        await timer.fn();
      } catch (err) {
        timer.log.error({ err, timer: timer.name }, `timer "${timer.name}" failed`);
      } finally {
        timer.running = undefined;
      }
    })();
  }
}

/**
 * Runs `fn` once `ms` have passed and the I/O already received has been read: the timer fires,
 * then `fn` waits one more turn of the event loop (setImmediate runs after the poll phase that
 * reads sockets). A process that did not get to run for a while (a loaded machine) runs its due
 * timers before it reads its sockets, so a plain timeout takes an answer that came in time for a
 * timeout. Returns the cancel function.
 */
export function timeoutAfterIo(ms: number, fn: () => void): () => void {
  let immediate: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => {
    immediate = setImmediate(fn);
  }, ms);
  return () => {
    clearTimeout(timer);
    if (immediate) clearImmediate(immediate);
  };
}
