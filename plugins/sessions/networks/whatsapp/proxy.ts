/**
 * A session's proxy (`proxy_url`, set with PUT /api/whatsapp-sessions/{id} or its proxy route):
 * everything the session sends to WhatsApp goes through it. Baileys takes two kinds of client:
 * a node agent (typed `https.Agent`; agent-base's answers for both schemes) for its WebSocket and its media uploads, and an undici dispatcher for its
 * media downloads (it downloads with fetch). Both are made from the URL by the proxy-agents
 * libraries and undici: HTTP(S) proxies tunnel with CONNECT, SOCKS5 ones with the SOCKS
 * handshake; credentials in the URL are sent to the proxy.
 *
 * The URL was checked when it was saved; it is checked again before every connection, so a
 * proxy name that has come to resolve to a private address since is refused then too.
 */
import type { Agent } from 'node:https';
import type { Dispatcher } from 'undici';
import { checkProxyUrl, type ProxyCheckOptions } from '../../address-guard.ts';

/** The clients a session's connection uses to reach WhatsApp through its proxy. */
export interface ProxyClients {
  /** The proxy, without its credentials (for logs and reasons). */
  readonly shown: string;
  /** For the WebSocket and media uploads (Baileys' `agent` and `fetchAgent`). */
  readonly agent: Agent;
  /** For media downloads (fetch's `dispatcher`). */
  readonly dispatcher: Dispatcher;
  close(): Promise<void>;
}

/** A proxy URL that may not be used (the check's reason, phrased for `proxy_url`). */
export class ProxyRefused extends Error {}

/** The proxy URL as it may be shown: no user name or password. */
export function shownProxy(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** Checks `value` again and makes its clients; throws {@link ProxyRefused} when the check fails. */
export async function proxyClients(value: string, check: ProxyCheckOptions): Promise<ProxyClients> {
  const problem = await checkProxyUrl(value, check);
  if (problem) throw new ProxyRefused(problem);
  const url = new URL(value);
  let agent: Agent;
  let makeDispatcher: () => Dispatcher;
  if (url.protocol === 'socks5:') {
    const [{ SocksProxyAgent }, { Socks5ProxyAgent }] = await Promise.all([import('socks-proxy-agent'), import('undici')]);
    agent = new SocksProxyAgent(url) as unknown as Agent;
    const credentials = url.username ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) } : {};
    makeDispatcher = () => new Socks5ProxyAgent(shownProxy(url), credentials);
  } else {
    const [{ HttpsProxyAgent }, { ProxyAgent }] = await Promise.all([import('https-proxy-agent'), import('undici')]);
    agent = new HttpsProxyAgent(url) as unknown as Agent;
    makeDispatcher = () => new ProxyAgent(url.href);
  }
  // Made on the first download only (undici's SOCKS5 agent prints an "experimental" warning when made).
  let dispatcher: Dispatcher | undefined;
  return {
    shown: shownProxy(url),
    agent,
    get dispatcher() {
      dispatcher ??= makeDispatcher();
      return dispatcher;
    },
    async close() {
      agent.destroy();
      await dispatcher?.close();
    },
  };
}
