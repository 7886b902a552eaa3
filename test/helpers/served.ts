/** Driving a `wharf serve` child process (test/helpers/cli.ts serve) over HTTP, as the in-process helpers drive a TestApp. */
import type { TestApp } from './app.ts';
import type { Served } from './cli.ts';
import type { SignedIn } from './identity.ts';

/** Enough of a TestApp for the storage and identity helpers, over HTTP to a served process. */
export function overHttp(url: string): TestApp {
  return {
    url,
    fetch: (pathname: string, init?: RequestInit) => fetch(`${url}${pathname}`, init),
    async request(method: string, pathname: string, options: { body?: unknown; headers?: Record<string, string> } = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${url}${pathname}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
    },
  } as unknown as TestApp;
}

/** Creates the first owner through the setup link the server printed; returns its session cookie. */
export async function setupOwner(server: Served, org = 'Backups'): Promise<SignedIn> {
  let link: string | undefined;
  for (let i = 0; i < 200 && !link; i++) {
    link = /https?:\/\/\S+\/setup\?token=(\S+)/.exec(server.output())?.[1];
    if (!link) await new Promise((r) => setTimeout(r, 25));
  }
  if (!link) throw new Error(`no setup link in: ${server.output()}`);
  const email = 'owner@example.test';
  const password = 'correct horse battery staple';
  const res = await fetch(`${server.url}/setup`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
    body: new URLSearchParams({ token: link, email, name: 'Owner', org, password }).toString(),
  });
  if (res.status !== 200) throw new Error(`setup answered ${res.status}: ${await res.text()}`);
  const cookie = res.headers
    .getSetCookie()
    .find((c) => c.startsWith('__session='))!
    .split(';')[0]!;
  return { userId: '', orgId: '', email, password, cookie, headers: { cookie, origin: server.url } };
}
