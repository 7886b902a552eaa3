/**
 * WAL checkpoints of a SQLite file off the event loop (issue 16, BENCHMARKS.md part 7). SQLite
 * runs a checkpoint inside the COMMIT that takes the WAL past 1000 pages: it copies the WAL's
 * pages into the database file and syncs both, on the thread that committed, which for Wharf is
 * the event loop (upload phase 1 waited there about half of its time, BENCHMARKS.md part 6). Here a
 * worker thread with its own connection to the same file (the same SQLite library, so the two
 * see each other's locks) runs them instead, while the main connection's own are off
 * (`wal_autocheckpoint = 0`):
 *
 * - every `intervalMs` (200) a PASSIVE checkpoint: it never blocks a writer or a reader; with
 *   nothing new in the WAL it costs a few microseconds. It also bounds the time a commit waits
 *   for its fsync (`synchronous = NORMAL` syncs the WAL at checkpoints only) to about the
 *   interval, where SQLite's own waited for 1000 pages however long that took.
 * - SQLite starts the WAL over only at a write that finds it wholly copied, which a PASSIVE
 *   checkpoint never achieves while writes keep coming: when a commit finds the WAL file past
 *   `limitPages` (4000, 16 MiB at 4 KiB pages; one stat of the file per commit tells, as
 *   `journal_size_limit` cuts the file back to that size whenever SQLite starts it over), the
 *   main thread pauses: it lets the transactions that hold the connection finish and starts no
 *   other (queries wait too; the event loop does not), the worker runs a RESTART checkpoint
 *   (the pages written since its last PASSIVE one, both syncs), and the writes resume from the
 *   start of the WAL file: overwritten, not extended (a TRUNCATE checkpoint, cutting it to zero,
 *   made every later append extend the file and cost the writers more than it saved).
 *   Each pause still waits for two fsyncs: the limit makes them 4 times rarer than SQLite's own
 *   checkpoints, and the worker's PASSIVE ones leave them little to copy. When that checkpoint
 *   could not finish (a reader of another process), the next pause waits a second.
 *
 * A checkpoint only copies what the WAL holds: nothing committed depends on it, a kill -9 at any
 * point loses nothing (the next open reads the WAL). The worker costs about 15 MiB of memory (a
 * V8 isolate), so it starts only under write load: at the `startAt`-th commit within one second
 * (20). Until it is ready, and for good if it cannot start or dies (said once through
 * `onFallback`), the main connection checkpoints as SQLite does by default. Closing stops the
 * worker after a last TRUNCATE checkpoint (the WAL cut to zero).
 *
 * From the sources the worker runs core/db-checkpoint-worker.ts; in the single executable, its
 * bundle (an asset, build/build.ts) with the addon the executable extracted (core/native.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Database } from './db.ts';
import { nativeSqliteFile, seaModule } from './native.ts';

/** The asset carrying the worker's bundle in the single executable. */
export const CHECKPOINT_ASSET = 'db-checkpoint.cjs';

/** The control word shared with the worker (slot 0 of an Int32Array). */
export const RUN = 0;
export const STOP = 1;
/** The main thread holds the connection: the worker may run its RESTART checkpoint. */
export const GRANTED = 2;

/** SQLite's own automatic checkpoint, in pages (its default). */
const SQLITE_AUTOCHECKPOINT = 1000;

export interface CheckpointOptions {
  /** 'worker' (the default): off the event loop, as above; 'main': SQLite's own, in the COMMIT. */
  mode?: 'worker' | 'main';
  /** Commits within one second that start the worker; 0 starts it at once. */
  startAt?: number;
  /** Milliseconds between the worker's PASSIVE checkpoints. */
  intervalMs?: number;
  /** WAL pages from which writes pause for a RESTART checkpoint. */
  limitPages?: number;
  /** Told when the worker has taken the checkpoints over. */
  onReady?: () => void;
  /** Told once when checkpoints go back to the main connection because the worker cannot start or died. */
  onFallback?: (err: Error) => void;
}

/** What the worker is given. */
export interface CheckpointWorkerData {
  file: string;
  /** The addon to load (the single executable); from the sources better-sqlite3 finds its own. */
  addon: string | undefined;
  intervalMs: number;
  control: SharedArrayBuffer;
}

/** What the worker says: `ready` once its connection is open; `checkpointed` after each checkpoint. */
export type CheckpointMessage =
  | { type: 'ready' }
  | { type: 'checkpointed'; mode: 'PASSIVE' | 'RESTART' | 'TRUNCATE'; pages: number; copied: number; busy: boolean };

/** Counters for tests and diagnosis. */
export interface CheckpointStats {
  /** Where checkpoints run now: `main` before the worker is ready and after a fallback. */
  where: 'main' | 'worker';
  /** The worker's PASSIVE checkpoints, and those that start the WAL over (RESTART in a pause of the writers, TRUNCATE at the end). */
  passive: number;
  resets: number;
}

/** The main thread's side: starts the worker under load, grants its pauses, falls back, stops it. */
export class Checkpoints {
  readonly #raw: Database;
  readonly #file: string;
  readonly #mode: 'worker' | 'main';
  readonly #startAt: number;
  readonly #intervalMs: number;
  readonly #limitPages: number;
  readonly #wal: string;
  /** The WAL file's size from which a commit pauses the writers for a RESTART checkpoint. */
  #limitBytes = 0;
  /** No pause before this time (performance.now()): the last one's checkpoint could not finish. */
  #pauseAfter = 0;
  readonly #onReady: (() => void) | undefined;
  readonly #onFallback: ((err: Error) => void) | undefined;
  /** Holds the connection while `run` runs (the data layer's; no transaction open or pending). */
  readonly #exclusive: (run: () => Promise<void>) => Promise<void>;
  readonly #control = new Int32Array(new SharedArrayBuffer(4));
  #state: 'waiting' | 'starting' | 'running' | 'main' | 'stopped';
  #worker: Worker | undefined;
  #exited: Promise<void> | undefined;
  /** The pause of the writers under way. */
  #paused: Promise<void> | undefined;
  /** Ends it: the worker's RESTART checkpoint is done (or the worker is gone). */
  #resume: (() => void) | undefined;
  #windowStart = 0;
  #commits = 0;
  readonly stats: CheckpointStats = { where: 'main', passive: 0, resets: 0 };

  constructor(raw: Database, exclusive: (run: () => Promise<void>) => Promise<void>, options: CheckpointOptions = {}) {
    this.#raw = raw;
    this.#file = path.resolve(raw.name);
    this.#wal = `${this.#file}-wal`;
    this.#exclusive = exclusive;
    this.#mode = options.mode ?? 'worker';
    this.#startAt = options.startAt ?? 20;
    this.#intervalMs = options.intervalMs ?? 200;
    this.#limitPages = options.limitPages ?? 4000;
    this.#onReady = options.onReady;
    this.#onFallback = options.onFallback;
    const applies = this.#mode === 'worker' && !raw.memory && !raw.readonly;
    this.#state = applies ? 'waiting' : 'main';
    if (applies && this.#startAt <= 0) this.#start();
  }

  /** After each commit of the main connection: pauses the writers when the WAL is past its limit; counts toward starting the worker. */
  committed(): void {
    if (this.#state === 'running') {
      if (this.#paused || performance.now() < this.#pauseAfter) return;
      const size = fs.statSync(this.#wal, { throwIfNoEntry: false })?.size ?? 0;
      if (size > this.#limitBytes) this.#pause();
      return;
    }
    if (this.#state !== 'waiting') return;
    const now = performance.now();
    if (now - this.#windowStart > 1000) {
      this.#windowStart = now;
      this.#commits = 0;
    }
    if (++this.#commits >= this.#startAt) this.#start();
  }

  #start(): void {
    this.#state = 'starting';
    let worker: Worker;
    try {
      const data: CheckpointWorkerData = {
        file: this.#file,
        addon: nativeSqliteFile(),
        intervalMs: this.#intervalMs,
        control: this.#control.buffer as SharedArrayBuffer,
      };
      // None of the process's Node flags (--input-type, --cpu-prof...): the worker needs none.
      const options = { workerData: data, execArgv: [] };
      const sea = seaModule();
      worker = sea
        ? new Worker(sea.getAsset(CHECKPOINT_ASSET, 'utf8') as string, { ...options, eval: true })
        : new Worker(new URL('./db-checkpoint-worker.ts', import.meta.url), options);
    } catch (err) {
      this.#fallback(err);
      return;
    }
    this.#worker = worker;
    // Its messages and exit only: it must not keep the process alive.
    worker.unref();
    let failure: unknown;
    worker.on('error', (err) => (failure = err));
    worker.on('message', (message: CheckpointMessage) => this.#message(message));
    this.#exited = new Promise((resolve) =>
      worker.once('exit', (code) => {
        this.#worker = undefined;
        this.#resume?.();
        if (this.#state !== 'stopped') this.#fallback(failure ?? new Error(`the checkpoint worker exited (code ${code})`));
        resolve();
      }),
    );
  }

  #message(message: CheckpointMessage): void {
    if (message.type === 'ready') {
      if (this.#state !== 'starting') return;
      this.#limitBytes = this.#limitPages * (this.#raw.pragma('page_size', { simple: true }) as number);
      // SQLite cuts the WAL file back to this size when it starts the log over: past it, the log holds more.
      this.#raw.pragma(`journal_size_limit = ${this.#limitBytes}`);
      this.#raw.pragma('wal_autocheckpoint = 0');
      this.#state = 'running';
      this.stats.where = 'worker';
      this.#onReady?.();
    } else if (message.mode !== 'PASSIVE') {
      this.stats.resets++;
      if (message.busy) this.#pauseAfter = performance.now() + 1000;
      this.#resume?.();
    } else {
      this.stats.passive++;
    }
  }

  /** The WAL is past its limit: the writers wait for the worker's RESTART checkpoint. */
  #pause(): void {
    this.#paused = this.#exclusive(
      () =>
        new Promise<void>((resolve) => {
          if (!this.#worker) return resolve();
          this.#resume = () => {
            this.#resume = undefined;
            resolve();
          };
          Atomics.compareExchange(this.#control, 0, RUN, GRANTED);
          Atomics.notify(this.#control, 0);
        }),
    ).finally(() => (this.#paused = undefined));
  }

  /** Checkpoints back on the main connection, as SQLite does by default; said once. */
  #fallback(err: unknown): void {
    if (this.#state === 'main' || this.#state === 'stopped') return;
    this.#state = 'main';
    this.stats.where = 'main';
    if (this.#raw.open) this.#raw.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`);
    this.#onFallback?.(err instanceof Error ? err : new Error(String(err)));
  }

  /** Stops the worker after its last checkpoint; the connection is then closed by its owner. */
  async stop(): Promise<void> {
    const wasRunning = this.#state === 'running' || this.#state === 'starting';
    this.#state = 'stopped';
    if (!wasRunning || !this.#worker) return;
    Atomics.store(this.#control, 0, STOP);
    Atomics.notify(this.#control, 0);
    const worker = this.#worker;
    const timer = setTimeout(() => void worker.terminate(), 10_000);
    await this.#exited;
    clearTimeout(timer);
  }

  /** The worker, for tests that make it die. */
  get worker(): Worker | undefined {
    return this.#worker;
  }
}
