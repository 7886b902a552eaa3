/**
 * The checkpoint worker (core/db-checkpoint.ts explains when and why): its own connection to the
 * database file, a PASSIVE checkpoint every `intervalMs` when something was committed, a
 * RESTART one when the main thread has paused its writers, a last TRUNCATE one when told to stop.
 * It only waits on the shared control word between checkpoints (Atomics.wait), so it needs no
 * event loop turn to see a pause granted or a stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { type CheckpointMessage, type CheckpointWorkerData, GRANTED, RUN, STOP } from './db-checkpoint.ts';

const data = workerData as CheckpointWorkerData;
const control = new Int32Array(data.control);
const say = (message: CheckpointMessage) => parentPort!.postMessage(message);

let binding: object | undefined;
if (data.addon) {
  // The single executable's extracted addon, the file the main thread loaded: one SQLite in the process.
  const mod = { exports: {} as object };
  process.dlopen(mod, data.addon);
  binding = mod.exports;
}
const db = new BetterSqlite3(data.file, {
  fileMustExist: true,
  // A RESTART checkpoint waits this long for readers of another process, the writers paused; busy, the next pause waits a second.
  timeout: 200,
  ...(binding ? { nativeBinding: binding as unknown as string } : {}),
});
// A checkpoint syncs the WAL, then the database file, at any level but OFF.
db.pragma('synchronous = NORMAL');
const statements = {
  version: db.prepare('PRAGMA data_version').pluck(),
  PASSIVE: db.prepare('PRAGMA wal_checkpoint(PASSIVE)'),
  RESTART: db.prepare('PRAGMA wal_checkpoint(RESTART)'),
  TRUNCATE: db.prepare('PRAGMA wal_checkpoint(TRUNCATE)'),
};

/** Runs one checkpoint and says so. */
function checkpoint(mode: 'PASSIVE' | 'RESTART' | 'TRUNCATE'): void {
  const r = statements[mode].get() as { busy: number; log: number; checkpointed: number };
  say({ type: 'checkpointed', mode, pages: r.log, copied: r.checkpointed, busy: r.busy !== 0 });
}

say({ type: 'ready' });
// Changes when another connection commits: without one since the last look there is nothing to copy.
let version = statements.version.get();
for (;;) {
  Atomics.wait(control, 0, RUN, data.intervalMs);
  const now = Atomics.load(control, 0);
  if (now === STOP) break;
  if (now === GRANTED) {
    checkpoint('RESTART');
    Atomics.compareExchange(control, 0, GRANTED, RUN);
    continue;
  }
  const current = statements.version.get();
  if (current === version) continue;
  version = current;
  checkpoint('PASSIVE');
}
checkpoint('TRUNCATE');
db.close();
