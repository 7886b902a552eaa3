/**
 * Debian command-line tools for tests (awscli, ...), installed with apt-get when missing, as
 * ensureChromium does: serialised across test workers (and other projects' tests) with flock on
 * /tmp/wharf-apt.lock, looking again under the lock. Never a download from anywhere but apt.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';

const APT_LOCK = '/tmp/wharf-apt.lock';
const run = promisify(execFile);

/** Installs Debian's `pkg` unless `binary` (an absolute path) exists; returns `binary`. */
export async function ensureDebianTool(binary: string, pkg: string): Promise<string> {
  if (fs.existsSync(binary)) return binary;
  if (process.getuid?.() !== 0) throw new Error(`${binary} is missing: install Debian's ${pkg} package (apt-get install ${pkg})`);
  const script = `test -x ${binary} || { apt-get -o DPkg::Lock::Timeout=600 update && apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 ${pkg}; }`;
  await run('flock', [APT_LOCK, 'sh', '-c', script], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 900_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (!fs.existsSync(binary)) throw new Error(`apt-get install ${pkg} left no ${binary}`);
  return binary;
}
