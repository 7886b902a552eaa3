/**
 * Public-address checks for URLs the server will connect to on a user's behalf (session proxies
 * here; the webhooks plugin can reuse `isPublicAddress`). Refuses loopback, private, link-local
 * (cloud metadata), carrier-grade NAT, multicast, reserved and documentation ranges, in IPv4,
 * IPv6 and IPv4-mapped / NAT64 IPv6 forms.
 */
import dns from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

function nonPublicRanges(): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.0.2.0', 24],
    ['192.88.99.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['198.51.100.0', 24],
    ['203.0.113.0', 24],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ] as const) {
    list.addSubnet(net, prefix, 'ipv4');
  }
  for (const [net, prefix] of [
    ['::', 128],
    ['::1', 128],
    ['100::', 64],
    ['2001::', 23],
    ['2001:db8::', 32],
    ['fc00::', 7],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
  ] as const) {
    list.addSubnet(net, prefix, 'ipv6');
  }
  return list;
}

const NON_PUBLIC = nonPublicRanges();

/** The IPv4 address embedded in an IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible or NAT64 (64:ff9b::/96) IPv6 address. */
function embeddedIpv4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = Number.parseInt(hex[1]!, 16);
    const lo = Number.parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/** True when `ip` (v4 or v6) is a globally routable unicast address. */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return !NON_PUBLIC.check(ip, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(ip);
    if (v4) return isPublicAddress(v4);
    return !NON_PUBLIC.check(ip, 'ipv6');
  }
  return false;
}

export type Lookup = (host: string) => Promise<string[]>;

/** Every address a name resolves to (A and AAAA, through the system resolver). */
export const systemLookup: Lookup = async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

const PROXY_SCHEMES = new Set(['http:', 'https:', 'socks5:']);
const HOST_NAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

export interface ProxyCheckOptions {
  allowPrivate: boolean;
  lookup: Lookup;
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
    return 'proxy_url must use a public domain name, not an IP address';
  }
  if (!HOST_NAME.test(host)) return 'proxy_url host is not a valid domain name';
  if (options.allowPrivate) return null;
  let addresses: string[];
  let timer: NodeJS.Timeout | undefined;
  try {
    addresses = await Promise.race([
      options.lookup(host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), options.timeoutMs);
      }),
    ]);
  } catch (err) {
    return (err as Error).message === 'timeout' ? `proxy_url host ${host} did not resolve in time` : `proxy_url host ${host} does not resolve`;
  } finally {
    clearTimeout(timer);
  }
  if (addresses.length === 0) return `proxy_url host ${host} does not resolve`;
  if (addresses.some((a) => !isPublicAddress(a))) return `proxy_url host ${host} resolves to a private, loopback or link-local address`;
  return null;
}
