/**
 * The one classifier of outbound addresses (webhook receivers, session proxies): every form in
 * which an IPv6 address carries an IPv4 one is judged by that IPv4 address, at save time (the
 * webhook policy) and connect time (the same policy in the connector).
 */
import { describe, expect, it } from 'vitest';
import { embeddedIpv4s, ipv6Bytes, isPublicAddress } from '../../core/net.ts';
import { addressPolicy } from '../../plugins/webhooks/network.ts';

/** The host of a URL as the WHATWG parser leaves it (it rewrites embedded dotted quads as hex). */
const hostOf = (literal: string) => new URL(`http://${literal}/`).hostname.replace(/^\[|\]$/g, '');

// [written form, carried IPv4 (or null), public?]
const FORMS: [string, string | null, boolean][] = [
  ['8.8.8.8', null, true],
  ['127.0.0.1', null, false],
  ['10.1.2.3', null, false],
  ['172.16.0.1', null, false],
  ['172.32.0.1', null, true],
  ['192.168.0.10', null, false],
  ['169.254.169.254', null, false],
  ['100.64.0.1', null, false],
  ['0.0.0.0', null, false],
  ['224.0.0.1', null, false],
  ['255.255.255.255', null, false],
  ['[2606:4700:4700::1111]', null, true],
  ['[::1]', '0.0.0.1', false],
  ['[::]', '0.0.0.0', false],
  ['[fe80::1]', null, false],
  ['[fd12:3456::1]', null, false],
  ['[2001:db8::1]', null, false],
  // IPv4-mapped ::ffff:0:0/96
  ['[::ffff:127.0.0.1]', '127.0.0.1', false],
  ['[::ffff:7f00:1]', '127.0.0.1', false],
  ['[::ffff:169.254.169.254]', '169.254.169.254', false],
  ['[::ffff:8.8.8.8]', '8.8.8.8', true],
  // IPv4-compatible ::/96 (the URL parser writes ::127.0.0.1 as ::7f00:1)
  ['[::127.0.0.1]', '127.0.0.1', false],
  ['[::169.254.169.254]', '169.254.169.254', false],
  ['[::10.0.0.1]', '10.0.0.1', false],
  // IPv4-translated ::ffff:0:0:0/96
  ['[::ffff:0:127.0.0.1]', '127.0.0.1', false],
  ['[::ffff:0:169.254.169.254]', '169.254.169.254', false],
  ['[::ffff:0:8.8.8.8]', '8.8.8.8', true],
  // NAT64 well-known prefix 64:ff9b::/96
  ['[64:ff9b::127.0.0.1]', '127.0.0.1', false],
  ['[64:ff9b::10.0.0.1]', '10.0.0.1', false],
  ['[64:ff9b::169.254.169.254]', '169.254.169.254', false],
  ['[64:ff9b::8.8.8.8]', '8.8.8.8', true],
  // Local-use NAT64 64:ff9b:1::/48: never public, and what it carries is still read
  ['[64:ff9b:1::127.0.0.1]', '127.0.0.1', false],
  ['[64:ff9b:1::169.254.169.254]', '169.254.169.254', false],
  ['[64:ff9b:1:a9fe:a9:fe00::]', '169.254.169.254', false],
  ['[64:ff9b:1::8.8.8.8]', '8.8.8.8', false],
  // 6to4 2002::/16
  ['[2002:7f00:1::1]', '127.0.0.1', false],
  ['[2002:a9fe:a9fe::1]', '169.254.169.254', false],
  ['[2002:0a00:0001::]', '10.0.0.1', false],
  ['[2002:808:808::1]', '8.8.8.8', true],
  // Teredo 2001::/32: server address, and the client address stored inverted; never public
  ['[2001:0:4136:e378:8000:63bf:80ff:fffe]', '127.0.0.1', false],
  ['[2001:0:4136:e378:8000:63bf:5601:5601]', '169.254.169.254', false],
];

describe('isPublicAddress and embeddedIpv4s', () => {
  it.each(FORMS)('%s carries %s; public: %s', (literal, carried, expected) => {
    const host = hostOf(literal);
    expect(isPublicAddress(host)).toBe(expected);
    if (carried) expect(embeddedIpv4s(host)).toContain(carried);
    else expect(embeddedIpv4s(host)).toEqual([]);
  });

  it('is false for what is not an address', () => {
    for (const text of ['not an ip', '', '1.2.3', '::ffff:1.2.3.4.5', 'localhost']) expect(isPublicAddress(text), text).toBe(false);
  });

  it('reads every IPv6 spelling to the same bytes', () => {
    const one = ipv6Bytes('::ffff:127.0.0.1');
    for (const form of ['::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:0001', '[::FFFF:127.0.0.1]', '::ffff:7f00:1%eth0']) expect(ipv6Bytes(form), form).toEqual(one);
    expect(ipv6Bytes('127.0.0.1')).toBeUndefined();
  });
});

describe('the webhook address policy judges embedded IPv4 addresses', () => {
  const strict = addressPolicy({ allowPrivateNetworks: false, allowedNetworks: [] });
  const lan = addressPolicy({ allowPrivateNetworks: true, allowedNetworks: [] });
  const opened = addressPolicy({ allowPrivateNetworks: false, allowedNetworks: ['10.0.0.0/8'] });

  it.each(FORMS)('%s', (literal, carried, expected) => {
    const host = hostOf(literal);
    expect(strict.allows(host)).toBe(expected);
    // With private networks allowed, a metadata address stays refused in every form.
    if (carried === '169.254.169.254') {
      expect(lan.allows(host)).toBe(false);
      expect(lan.refusal(host)).toBe('metadata');
    }
    // A network named in allowed_networks is open in every form that carries it.
    if (carried === '10.0.0.1') expect(opened.allows(host)).toBe(true);
  });
});
