/**
 * `<data_dir>/serve.pid`: which process serves from this data dir, written once the server
 * listens and removed when it closes. Commands that must not run beside a server on the same
 * data (`wharf migrate-data`) read it. A server killed with SIGKILL leaves it behind; it counts
 * only while a process with that id exists.
 */
import fs from 'node:fs';
import path from 'node:path';

export const SERVE_PID_FILE = 'serve.pid';

export interface ServePid {
  pid: number;
  url: string;
  file: string;
}

/** Records this process as the server of `dataDir`; returns the function that removes the record. */
export function writeServePid(dataDir: string, url: string): () => void {
  const file = path.join(dataDir, SERVE_PID_FILE);
  fs.writeFileSync(file, `${JSON.stringify({ pid: process.pid, url })}\n`, { mode: 0o600 });
  return () => {
    try {
      // Only our own record: a second server on the same data dir may have replaced it.
      if (JSON.parse(fs.readFileSync(file, 'utf8')).pid === process.pid) fs.rmSync(file, { force: true });
    } catch {
      // gone already, or unreadable: nothing of ours to remove
    }
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by another user
  }
}

/** The server running on `dataDir`, or undefined when none is (no record, or its process is gone). */
export function runningServer(dataDir: string): ServePid | undefined {
  const file = path.join(dataDir, SERVE_PID_FILE);
  let record: { pid?: unknown; url?: unknown };
  try {
    record = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof record.pid !== 'number' || !Number.isInteger(record.pid) || record.pid <= 0 || !alive(record.pid)) return undefined;
  return { pid: record.pid, url: String(record.url ?? ''), file };
}
