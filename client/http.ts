/**
 * The client's HTTP side: requests to a Wharf instance with the signed-in user's access token,
 * refreshed with the refresh token when it has expired or the server says 401.
 */
import pkg from '../package.json' with { type: 'json' };
import { type CredentialsFile, type InstanceCredentials, readCredentials, writeCredentials } from './credentials.ts';

import { ClientError, UnreachableError } from './errors.ts';

export { ClientError };

export interface ClientOptions {
  instance: string;
  /** `X-Service-Org`: act in this organization (id or slug). */
  org?: string;
  credentialsFile?: string;
}

/** The error text of any of Wharf's envelopes (or an OAuth error). */
export function errorText(body: unknown, status: number): string {
  const b = body as Record<string, unknown> | null;
  const text = (typeof b?.error === 'string' && b.error) || (typeof b?.message === 'string' && b.message) || `HTTP ${status}`;
  const fields =
    b?.errors && typeof b.errors === 'object'
      ? Object.values(b.errors as Record<string, string[]>)
          .flat()
          .join('; ')
      : '';
  return fields ? `${text} (${fields})` : text;
}

export async function readJson(res: Response): Promise<unknown> {
  const text = await res.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** POSTs a form to an OAuth endpoint and returns status and JSON. */
export async function postForm(url: string, fields: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(fields),
    });
  } catch (err) {
    throw new UnreachableError(new URL(url).origin, err);
  }
  return { status: res.status, body: ((await readJson(res)) ?? {}) as Record<string, unknown> };
}

export class Client {
  readonly instance: string;
  readonly #org: string | undefined;
  readonly #file: string | undefined;

  constructor(options: ClientOptions) {
    this.instance = options.instance;
    this.#org = options.org;
    this.#file = options.credentialsFile;
  }

  #credentials(): { all: CredentialsFile; mine: InstanceCredentials } {
    const all = readCredentials(this.#file);
    const mine = all.instances[this.instance];
    if (!mine) throw new ClientError(`not signed in to ${this.instance}; run wharf login --instance ${this.instance}`);
    return { all, mine };
  }

  async #refresh(all: CredentialsFile, mine: InstanceCredentials): Promise<InstanceCredentials> {
    if (!mine.refreshToken) throw new ClientError(`the sign-in to ${this.instance} has expired; run wharf login`);
    const { status, body } = await postForm(mine.tokenEndpoint, { grant_type: 'refresh_token', refresh_token: mine.refreshToken, client_id: mine.clientId });
    if (status !== 200 || typeof body.access_token !== 'string') {
      throw new ClientError(`the sign-in to ${this.instance} has expired (${errorText(body, status)}); run wharf login`);
    }
    const next: InstanceCredentials = {
      ...mine,
      accessToken: body.access_token,
      refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : mine.refreshToken,
      expiresAt: Date.now() + Number(body.expires_in ?? 3600) * 1000,
    };
    all.instances[this.instance] = next;
    writeCredentials(all, this.#file);
    return next;
  }

  /** A request as the signed-in user; JSON in and out; throws ClientError with the server's message. */
  async request<T = unknown>(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<T> {
    let { all, mine } = this.#credentials();
    if (mine.expiresAt - 30_000 < Date.now()) mine = await this.#refresh(all, mine);
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = {
        authorization: `Bearer ${mine.accessToken}`,
        accept: 'application/json',
        'user-agent': `wharf-cli/${pkg.version}`,
        ...(this.#org ? { 'x-service-org': this.#org } : {}),
        ...options.headers,
      };
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      let res: Response;
      try {
        res = await fetch(`${this.instance}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
      } catch (err) {
        throw new UnreachableError(this.instance, err);
      }
      const body = await readJson(res);
      if (res.status === 401 && attempt === 0 && mine.refreshToken) {
        ({ all } = this.#credentials());
        mine = await this.#refresh(all, mine);
        continue;
      }
      if (!res.ok) throw new ClientError(errorText(body, res.status), res.status);
      return body as T;
    }
  }
}
