/**
 * Where the command-line client keeps its sign-ins: `$XDG_CONFIG_HOME/wharf/credentials.json`
 * (else `~/.config/wharf/`), mode 0600, one entry per instance URL, and which one is current.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClientError } from './errors.ts';

export interface InstanceCredentials {
  accessToken: string;
  refreshToken: string | null;
  /** Unix ms. */
  expiresAt: number;
  /** Where tokens are refreshed (the instance's /oauth/token, or the external provider's). */
  tokenEndpoint: string;
  clientId: string;
  user: { userId: string; email: string | null } | null;
}

export interface CredentialsFile {
  current: string | null;
  instances: Record<string, InstanceCredentials>;
}

export function credentialsPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'wharf', 'credentials.json');
}

export function readCredentials(file = credentialsPath()): CredentialsFile {
  try {
    const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as CredentialsFile;
    // Keyed by instance URL: no prototype, so no name can reach Object.prototype.
    return { current: parsed.current ?? null, instances: Object.assign(Object.create(null), parsed.instances) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { current: null, instances: Object.create(null) };
    throw new ClientError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Writes the file atomically (temp file + rename), readable by the owner only. */
export function writeCredentials(data: CredentialsFile, file = credentialsPath()): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** Normalizes an instance URL: scheme and host, no trailing slash. */
export function normalizeInstance(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ClientError(`not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ClientError(`instance must be http or https: ${url}`);
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
}
