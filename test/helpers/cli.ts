/** Runs `wharf` as a child process: from source on the project's Node, or the built binary. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const sourceEntry = path.join(root, 'bin/wharf.ts');

export interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** `wharf ...args` from source, synchronously. */
export function wharf(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; bin?: string } = {}): Ran {
  const [cmd, argv] = options.bin ? [options.bin, args] : [process.execPath, [sourceEntry, ...args]];
  const r = spawnSync(cmd, argv, { cwd: options.cwd ?? root, env: { ...cleanEnv(), ...options.env }, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * `wharf ...args` from source, asynchronously: for client commands that talk to a server running
 * in this same process (spawnSync would block that server and deadlock).
 */
export function wharfAsync(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [sourceEntry, ...args], { cwd: options.cwd ?? root, env: { ...cleanEnv(), ...options.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** The environment without WHARF_* variables of the developer's shell. */
export function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('WHARF_')));
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Served {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `wharf serve` and resolves once /healthz answers 200. */
export async function serve(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; bin?: string; timeoutMs?: number } = {}): Promise<Served> {
  const port = await freePort();
  const [cmd, argv] = options.bin ? [options.bin, ['serve', ...args]] : [process.execPath, [sourceEntry, 'serve', ...args]];
  const child = spawn(cmd, [...argv, '--listen', `127.0.0.1:${port}`], {
    cwd: options.cwd ?? root,
    // The embedded S3 endpoint on a free port, so concurrent servers never meet on 3900.
    env: { ...cleanEnv(), WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wharf serve exited with ${child.exitCode}: ${out}`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`wharf serve did not answer /healthz in time: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    child,
    url,
    output: () => out,
    stop(signal = 'SIGTERM') {
      child.kill(signal);
      return exited;
    },
  };
}
