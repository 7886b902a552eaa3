// Runs a test fixture's `up` script (test/redis/redis-server.sh, test/pg/postgres.sh): idempotent,
// flock-serialised scripts that print `url=...` once their server answers. The error names the
// script, how it failed, the variable that names an existing server instead, and the output's tail.
import { execFile } from 'node:child_process';

const UP_TIMEOUT_MS = 10 * 60_000; // a cold CI machine runs apt-get first
const TAIL_LINES = 60;

/** `bash SCRIPT up`; its url= line. `caller` (ensureRedis) and `what` (the test Redis) are for the error. */
export function runUpScript(script: string, caller: string, what: string, overrideVar: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [script, 'up'],
      { timeout: UP_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const lines = `${stdout}\n${stderr}`.trim().split('\n');
        const output = `--- last ${Math.min(lines.length, TAIL_LINES)} lines of output ---\n${lines.slice(-TAIL_LINES).join('\n')}`;
        if (err) {
          const how = err.killed ? `was killed after ${UP_TIMEOUT_MS / 1000}s` : `failed (exit ${String(err.code ?? err.signal)})`;
          return reject(
            new Error(`${caller}: could not start ${what}: \`bash ${script} up\` ${how}. Set ${overrideVar} to use an existing one instead.\n${output}`),
          );
        }
        const m = /^url=(\S+)$/m.exec(stdout);
        if (!m?.[1]) return reject(new Error(`${caller}: ${script} up succeeded but printed no url=… line\n${output}`));
        resolve(m[1]);
      },
    );
  });
}
