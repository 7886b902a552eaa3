/**
 * The check of a session's proxy URL: a scheme WasenderAPI allows and a public domain name
 * (the address classification is core/net.ts, shared with webhook receivers).
 */
import { isIP } from 'node:net';
import { isPublicAddress, type Resolver, resolveWithin } from '../../core/net.ts';

const PROXY_SCHEMES = new Set(['http:', 'https:', 'socks5:']);
const HOST_NAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;
/** How an operator lets proxies on private networks through, in the config file or the environment. */
const HOW_TO_ALLOW = '(allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)';

export interface ProxyCheckOptions {
  allowPrivate: boolean;
  resolve: Resolver;
  timeoutMs: number;
}

/**
 * Checks a proxy URL as WasenderAPI describes it ("http, https, socks5. Use a public domain
 * only"): null when acceptable, otherwise the reason, phrased for the `proxy_url` field.
 */
export async function checkProxyUrl(value: string, options: ProxyCheckOptions): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'proxy_url must be a URL such as http://user:pass@proxy.example.com:8080';
  }
  if (!PROXY_SCHEMES.has(url.protocol)) return `proxy_url scheme must be http, https or socks5 (got ${url.protocol.replace(/:$/, '')})`;
  if ((url.pathname && url.pathname !== '/') || url.search || url.hash) return 'proxy_url must not have a path, query or fragment';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!host) return 'proxy_url must name a host';
  if (isIP(host)) {
    if (options.allowPrivate) return null;
    return `proxy_url must use a public domain name, not an IP address ${HOW_TO_ALLOW}`;
  }
  if (!HOST_NAME.test(host)) return 'proxy_url host is not a valid domain name';
  if (options.allowPrivate) return null;
  const addresses = await resolveWithin(host, options.resolve, options.timeoutMs);
  if (addresses === 'timeout') return `proxy_url host ${host} did not resolve in time`;
  if (addresses === 'unresolved') return `proxy_url host ${host} does not resolve`;
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused) return `proxy_url host ${host} resolves to ${refused.address}, a private, loopback or link-local address ${HOW_TO_ALLOW}`;
  return null;
}
