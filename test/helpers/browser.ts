/**
 * A real browser for page tests: Debian's Chromium driven by playwright-core, never a
 * downloaded browser build. When /usr/bin/chromium is missing it installs the `chromium`
 * package with apt-get, serialised across test workers (and other projects' tests) with flock.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type BrowserContextOptions } from 'playwright-core';
import { tempDir } from './app.ts';

export const CHROMIUM = '/usr/bin/chromium';
const APT_LOCK = '/tmp/wharf-apt.lock';

const run = promisify(execFile);

/** Installs Debian's `chromium` when it is not there yet (needs root, as apt-get does). */
export async function ensureChromium(): Promise<void> {
  if (fs.existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)`);
  // Under the lock, look again: another worker may have installed it while this one waited.
  const script = `test -x ${CHROMIUM} || { apt-get -o DPkg::Lock::Timeout=600 update && apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 chromium; }`;
  await run('flock', [APT_LOCK, 'sh', '-c', script], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 900_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (!fs.existsSync(CHROMIUM)) throw new Error(`apt-get install chromium left no ${CHROMIUM}`);
}

export interface BrowserSession {
  context: BrowserContext;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/**
 * Starts headless Chromium with a fresh profile (its own --user-data-dir, so no cookies are
 * shared between sessions) and returns its context. Playwright passes the profile directory
 * as --user-data-dir itself: `launchPersistentContext` is how it accepts one.
 */
export async function openBrowser(options: BrowserContextOptions = {}): Promise<BrowserSession> {
  await ensureChromium();
  const userDataDir = tempDir('wharf-chromium-');
  const context = await chromium.launchPersistentContext(userDataDir, {
    ...options,
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
