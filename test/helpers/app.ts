/**
 * Builds the whole app in-process from a TOML string, with a fresh data dir and database, and
 * serves it on a real loopback port so tests drive it with real HTTP (fetch).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { resolveConfig, type AnyPlugin } from '../../core/config.ts';
import { start, type Running } from '../../core/lifecycle.ts';
import { createLogger } from '../../core/logger.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { freePort } from './cli.ts';
import { databaseEnv } from './postgres.ts';

export interface TestApp {
  running: Running;
  url: string;
  dataDir: string;
  /** Log lines the server wrote, parsed. */
  logs: Record<string, unknown>[];
  fetch(pathname: string, init?: RequestInit): Promise<Response>;
  /** JSON request helper: returns status, headers and parsed body. */
  request(
    method: string,
    pathname: string,
    options?: { body?: unknown; headers?: Record<string, string>; raw?: string },
  ): Promise<{ status: number; headers: Headers; body: any; text: string }>;
  close(): Promise<void>;
}

/** A fresh temporary directory, removed by the caller (or left in /tmp). */
export function tempDir(prefix = 'wharf-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface StartOptions {
  plugins?: readonly AnyPlugin[];
  env?: NodeJS.ProcessEnv;
  dataDir?: string;
  logLevel?: string;
}

/** Drops the settings of plugins the app does not have (databaseEnv disables the built-in ones not on PostgreSQL by name). */
function onlyOf(plugins: readonly AnyPlugin[], env: Record<string, string>): Record<string, string> {
  const names = new Set(plugins.map((p) => p.name.toUpperCase()));
  return Object.fromEntries(Object.entries(env).filter(([key]) => !key.startsWith('WHARF_PLUGINS__') || names.has(key.split('__')[1]!)));
}

export async function startApp(toml = '', options: StartOptions = {}): Promise<TestApp> {
  const dataDir = options.dataDir ?? tempDir();
  // A known port (not 0) so the derived public URL is the one clients really use.
  const plugins = options.plugins ?? builtinPlugins;
  // The embedded S3 endpoint on a free port, so concurrent test servers never meet on 3900.
  const storageEnv = plugins.some((p) => p.name === 'storage') ? { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0' } : {};
  const config = resolveConfig(plugins, {
    toml: { text: toml, file: 'test.toml' },
    // Under the vitest project "on postgres", a fresh PostgreSQL database (test/helpers/postgres.ts).
    env: { ...storageEnv, ...onlyOf(plugins, await databaseEnv(dataDir)), ...options.env },
    flags: { listen: `127.0.0.1:${await freePort()}`, dataDir },
  });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const log = createLogger(options.logLevel ?? 'info', sink as never);
  const running = await start(config, { listen: true, log });
  const url = running.url!;
  const doFetch = (pathname: string, init?: RequestInit) => fetch(new URL(pathname, url), init);
  return {
    running,
    url,
    dataDir,
    logs,
    fetch: doFetch,
    async request(method, pathname, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers };
      let body: string | undefined = opts.raw;
      if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await doFetch(pathname, { method, headers, body });
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.status, headers: res.headers, body: parsed, text };
    },
    close: () => running.close(),
  };
}
