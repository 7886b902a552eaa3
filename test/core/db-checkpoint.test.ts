/**
 * WAL checkpoints off the event loop (core/db-checkpoint.ts): a worker thread with its own
 * connection runs them while the main connection's own are off; it keeps the WAL bounded under a
 * write loop (a RESTART checkpoint in a pause of the writers); it starts only under write load;
 * when it cannot start or dies, checkpoints go back to the main connection, said once; closing
 * stops it after a last checkpoint; a kill -9 during heavy writes loses no acknowledged row.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../../core/db.ts';
import { openSqlite, type SqliteDb } from '../../core/db-sqlite.ts';
import { tempDir } from '../helpers/app.ts';
import { root } from '../helpers/cli.ts';

const PAGE = 4096;
const open: SqliteDb[] = [];
afterEach(async () => {
  for (const db of open.splice(0)) await db.close();
});

function database(options: NonNullable<Parameters<typeof openSqlite>[1]>['checkpoint'] = {}) {
  const file = path.join(tempDir('wharf-ckpt-'), 'x.db');
  const db = openSqlite(file, { checkpoint: options });
  open.push(db);
  return { db, file, wal: () => (fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0) };
}

const row = 'x'.repeat(3000);
const insert = (db: SqliteDb) => db.transaction((tx) => tx.run('INSERT INTO t (v) VALUES (?)', [row]));
const autocheckpoint = (db: SqliteDb) => db.raw.pragma('wal_autocheckpoint', { simple: true });

describe('WAL checkpoints in a worker thread', () => {
  it('runs them in the worker, never on the main connection: the rows reach the database file while its autocheckpoint is off', async () => {
    const { db, file } = database({ startAt: 0, intervalMs: 20 });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    await vi.waitFor(() => expect(db.checkpoints.stats.where).toBe('worker'), { timeout: 20_000 });
    expect(autocheckpoint(db)).toBe(0);
    const seen = db.checkpoints.stats.passive;
    await Promise.all(Array.from({ length: 20 }, () => insert(db)));
    await vi.waitFor(() => expect(db.checkpoints.stats.passive).toBeGreaterThan(seen), { timeout: 20_000 });
    // The database file alone (no WAL beside it) holds the 20 rows: a checkpoint copied them, and
    // the main connection runs none (autocheckpoint 0, and it never asks for one).
    const copy = path.join(tempDir('wharf-ckpt-copy-'), 'copy.db');
    fs.copyFileSync(file, copy);
    const alone = openDatabase(copy, { mustExist: true });
    expect(alone.prepare('SELECT count(*) FROM t').pluck().get()).toBe(20);
    alone.close();
    expect(autocheckpoint(db)).toBe(0);
    // Closing: the worker stops after a last TRUNCATE checkpoint; every row is in the file.
    const truncates = db.checkpoints.stats.resets;
    const worker = db.checkpoints.worker!;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    await db.close();
    open.splice(open.indexOf(db), 1);
    await exited;
    expect(db.checkpoints.stats.resets).toBe(truncates + 1);
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
  });

  it('keeps the WAL bounded under a write loop that never stops: a commit past limitPages pauses the writers for a RESTART checkpoint', async () => {
    const limit = 200;
    const { db, file, wal } = database({ startAt: 0, intervalMs: 20, limitPages: limit });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    await vi.waitFor(() => expect(db.checkpoints.stats.where).toBe('worker'), { timeout: 20_000 });
    let max = 0;
    let written = 0;
    let afterPause = Number.POSITIVE_INFINITY;
    // 12,000 rows of 3 KB: a WAL of some 40 MB without checkpoints.
    while (written < 12_000) {
      const resets = db.checkpoints.stats.resets;
      await Promise.all(Array.from({ length: 10 }, () => insert(db)));
      written += 10;
      const size = wal();
      max = Math.max(max, size);
      if (db.checkpoints.stats.resets > resets) afterPause = Math.min(afterPause, size);
      expect(autocheckpoint(db)).toBe(0);
    }
    expect(db.checkpoints.stats.resets).toBeGreaterThanOrEqual(3);
    // A commit that finds the WAL past the limit pauses the writers: the transactions already
    // waiting for the connection (this loop's 10) still commit first. Unbounded: some 40 MB.
    expect(max).toBeLessThan(2 * limit * (PAGE + 24));
    // After a pause the writers start the WAL over: SQLite cuts the file back to the limit
    // (journal_size_limit) and overwrites it from its start.
    expect(afterPause).toBeLessThanOrEqual(limit * PAGE);
    await db.close();
    open.splice(open.indexOf(db), 1);
    const again = openDatabase(file, { mustExist: true });
    expect(again.prepare('SELECT count(*) FROM t').pluck().get()).toBe(written);
    again.close();
  });

  it('starts the worker only under write load: at the startAt-th commit within a second', async () => {
    const { db } = database({ startAt: 30 });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 5; i++) await insert(db);
    expect(db.checkpoints.worker).toBeUndefined();
    expect(db.checkpoints.stats.where).toBe('main');
    expect(autocheckpoint(db)).toBe(1000);
    // 30 transactions of one turn are one COMMIT (group commit): sequential ones are 30 commits.
    for (let i = 0; i < 40 && !db.checkpoints.worker; i++) await insert(db);
    expect(db.checkpoints.worker).toBeDefined();
    await vi.waitFor(() => expect(db.checkpoints.stats.where).toBe('worker'), { timeout: 20_000 });
    expect(autocheckpoint(db)).toBe(0);
  });

  it('falls back to checkpoints on the main connection when the worker dies, says so once, and keeps the WAL bounded', async () => {
    const onFallback = vi.fn();
    const { db, wal } = database({ startAt: 0, intervalMs: 20, onFallback });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    await vi.waitFor(() => expect(db.checkpoints.stats.where).toBe('worker'), { timeout: 20_000 });
    await db.checkpoints.worker!.terminate();
    await vi.waitFor(() => expect(db.checkpoints.stats.where).toBe('main'));
    expect(autocheckpoint(db)).toBe(1000);
    expect(onFallback).toHaveBeenCalledTimes(1);
    expect(onFallback.mock.calls[0]![0]).toBeInstanceOf(Error);
    // SQLite's own checkpoint in the COMMIT past 1000 pages: 3000 rows of 3 KB (~3000 pages) leave a WAL of about 1000.
    let max = 0;
    for (let i = 0; i < 3000; i++) {
      await insert(db);
      if (i % 50 === 0) max = Math.max(max, wal());
    }
    expect(max).toBeLessThan(1200 * PAGE);
    expect(db.checkpoints.worker).toBeUndefined();
    expect(onFallback).toHaveBeenCalledTimes(1);
  });

  it('falls back when the worker cannot start (its connection cannot open the file), said once', async () => {
    const onFallback = vi.fn();
    const { db, file } = database({ startAt: 3, onFallback });
    await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    // The main connection keeps its open file; a new connection finds no file (fileMustExist).
    fs.rmSync(file);
    for (let i = 0; i < 3; i++) await insert(db);
    await vi.waitFor(() => expect(onFallback).toHaveBeenCalledTimes(1), { timeout: 20_000 });
    expect(String(onFallback.mock.calls[0]![0])).toMatch(/unable to open database file/);
    expect(db.checkpoints.stats.where).toBe('main');
    expect(autocheckpoint(db)).toBe(1000);
    for (let i = 0; i < 10; i++) await insert(db);
    expect(await db.value('SELECT count(*) FROM t')).toBe(13);
  });

  it('mode main leaves the checkpoints to SQLite, and a file in memory needs none', async () => {
    const { db } = database({ mode: 'main', startAt: 0 });
    expect(db.checkpoints.worker).toBeUndefined();
    expect(autocheckpoint(db)).toBe(1000);
    const memory = openSqlite(':memory:', { checkpoint: { startAt: 0 } });
    open.push(memory);
    expect(memory.checkpoints.worker).toBeUndefined();
  });

  it('loses no acknowledged row when the process is killed (SIGKILL) during heavy writes with the worker checkpointing', async () => {
    const file = path.join(tempDir('wharf-ckpt-kill-'), 'x.db');
    // Acknowledged = its transaction's promise settled (after the COMMIT); printed only then.
    const script = `
      import { openSqlite } from ${JSON.stringify(path.join(root, 'core/db-sqlite.ts'))};
      const onFallback = (err) => { console.error('fallback', err); process.exit(1); };
      const db = openSqlite(${JSON.stringify(file)}, { checkpoint: { startAt: 0, intervalMs: 5, limitPages: 100, onFallback } });
      await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      while (db.checkpoints.stats.where !== 'worker') await new Promise((r) => setTimeout(r, 10));
      const row = 'y'.repeat(3000);
      let next = 0;
      let truncates = -1;
      for (;;) {
        const ids = Array.from({ length: 8 }, () => ++next);
        await Promise.all(ids.map((id) => db.transaction((tx) => tx.run('INSERT INTO t (id, v) VALUES (?, ?)', [id, row])).then(() => process.stdout.write(id + '\\n'))));
        if (db.checkpoints.stats.resets !== truncates) process.stdout.write('T' + (truncates = db.checkpoints.stats.resets) + '\\n');
      }
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acknowledged: number[] = [];
    let truncates = 0;
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let buffered = '';
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('exit', () => reject(new Error(`the writer exited: ${stderr}`)));
        // Settles before the test's own timeout, so that `finally` kills the writer.
        timer = setTimeout(
          () => reject(new Error(`no 2,000 acknowledged rows and two pauses in time (${acknowledged.length}, ${truncates}): ${stderr}`)),
          100_000,
        );
        child.stdout!.on('data', (d) => {
          buffered += d;
          const lines = buffered.split('\n');
          buffered = lines.pop()!;
          for (const line of lines) {
            if (line.startsWith('T')) truncates = Number(line.slice(1));
            else acknowledged.push(Number(line));
          }
          // Killed mid-loop, after the worker has paused the writers at least twice.
          if (truncates >= 2 && acknowledged.length >= 2000) {
            child.kill('SIGKILL');
            resolve();
          }
        });
      });
    } finally {
      clearTimeout(timer);
      child.kill('SIGKILL');
      await exited;
    }
    const db = openDatabase(file, { mustExist: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const stored = new Set(db.prepare('SELECT id FROM t').pluck().all() as number[]);
      const missing = acknowledged.filter((id) => !stored.has(id));
      expect(missing).toEqual([]);
      expect(stored.size).toBeGreaterThanOrEqual(acknowledged.length);
    } finally {
      db.close();
    }
  }, 120_000);
});
