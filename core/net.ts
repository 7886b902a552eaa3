/**
 * Safety of outbound connections made on a user's behalf (webhook receivers, session proxies):
 * which addresses are public, and name resolution with a time limit. One classifier for every
 * plugin, so a range added here is refused everywhere.
 */
import dns from 'node:dns';
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
    // Local-use NAT64 (RFC 8215): translated inside one network, never globally reachable.
    ['64:ff9b:1::', 48],
    ['100::', 64],
    // IETF protocol assignments, Teredo (2001::/32) among them.
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

/** Loopback, private, link-local (cloud metadata), carrier-grade NAT, multicast, reserved and documentation ranges. */
const NON_PUBLIC = nonPublicRanges();

/** The 16 bytes of an IPv6 address (zone id dropped), or undefined when `ip` is not one. */
export function ipv6Bytes(ip: string): Uint8Array | undefined {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIP(bare) !== 6) return undefined;
  let text = bare.toLowerCase();
  // A trailing dotted quad is the last two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = Number.parseInt(g, 16);
    bytes[i * 2] = n >> 8;
    bytes[i * 2 + 1] = n & 255;
  });
  return bytes;
}

const quad = (b: Uint8Array, at: number, xor = 0) => [0, 1, 2, 3].map((i) => (b[at + i]! ^ xor) & 255).join('.');
const zero = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every((x) => x === 0);

/**
 * The IPv4 addresses an IPv6 address carries, in every form that can deliver to them:
 * IPv4-compatible `::a.b.c.d` (::/96, which the URL parser writes `::7f00:1`), IPv4-mapped
 * `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and the local-use
 * `64:ff9b:1::/48` (the RFC 6052 /48 layout and the last 32 bits), 6to4 `2002::/16` and Teredo
 * `2001::/32` (server, and the client address stored inverted). Empty for a plain IPv6 address.
 */
export function embeddedIpv4s(ip: string): string[] {
  const b = ipv6Bytes(ip);
  if (!b) return [];
  const found = new Set<string>();
  if (zero(b, 0, 10) && ((b[10] === 0 && b[11] === 0) || (b[10] === 0xff && b[11] === 0xff))) found.add(quad(b, 12));
  if (zero(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && zero(b, 10, 12)) found.add(quad(b, 12));
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (zero(b, 4, 12)) found.add(quad(b, 12));
    if (b[4] === 0 && b[5] === 1) {
      found.add(`${b[6]}.${b[7]}.${b[9]}.${b[10]}`);
      found.add(quad(b, 12));
    }
  }
  if (b[0] === 0x20 && b[1] === 0x02) found.add(quad(b, 2));
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) {
    found.add(quad(b, 4));
    found.add(quad(b, 12, 0xff));
  }
  return [...found];
}

/**
 * True when `ip` is a globally routable unicast address. An IPv6 address that carries an IPv4
 * address (mapped, compatible, NAT64, 6to4, Teredo) is public only when that IPv4 address is.
 */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return !NON_PUBLIC.check(ip, 'ipv4');
  if (family === 6) {
    const bare = ip.replace(/%.*$/, '');
    if (NON_PUBLIC.check(bare, 'ipv6')) return false;
    return embeddedIpv4s(bare).every((v4) => !NON_PUBLIC.check(v4, 'ipv4'));
  }
  return false;
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address a host name resolves to. */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

/** The system resolver (A and AAAA). */
export const systemResolver: Resolver = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

/**
 * The addresses of `host`, or why there are none: `timeout` when the resolver took longer than
 * `timeoutMs`, `unresolved` when it failed or found nothing.
 */
export async function resolveWithin(host: string, resolve: Resolver, timeoutMs: number): Promise<ResolvedAddress[] | 'timeout' | 'unresolved'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const addresses = await Promise.race([
      resolve(host),
      new Promise<'timeout'>((done) => {
        timer = setTimeout(() => done('timeout'), timeoutMs);
      }),
    ]);
    return addresses === 'timeout' || addresses.length > 0 ? addresses : 'unresolved';
  } catch {
    return 'unresolved';
  } finally {
    clearTimeout(timer);
  }
}
