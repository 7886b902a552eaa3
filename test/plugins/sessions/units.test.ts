/** Pure parts of the sessions plugin: proxy URLs, recipients, media crypto, event names. */
import { describe, expect, it } from 'vitest';
import { checkProxyUrl } from '../../../plugins/sessions/address-guard.ts';
import { canonicalEvent, EVENT_NAMES } from '../../../plugins/sessions/events.ts';
import { decryptMedia, encryptMedia } from '../../../plugins/sessions/networks/media-crypto.ts';
import { normalizePhone, recipientOf } from '../../../plugins/sessions/networks/nodes.ts';
import { WasenderWebhookEventType } from 'wasenderapi';

describe('checkProxyUrl', () => {
  const resolving = (addresses: Record<string, string[]>) => async (host: string) => {
    const found = addresses[host];
    if (!found) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  const options = {
    allowPrivate: false,
    timeoutMs: 200,
    resolve: resolving({ 'proxy.example.com': ['93.184.216.34'], 'sneaky.example.com': ['93.184.216.34', '10.0.0.5'] }),
  };

  it.each([
    ['http://proxy.example.com:3128', null],
    ['https://user:pass@proxy.example.com', null],
    ['socks5://proxy.example.com:1080', null],
    ['socks4://proxy.example.com:1080', 'proxy_url scheme must be http, https or socks5 (got socks4)'],
    ['proxy.example.com:3128', 'proxy_url scheme must be http, https or socks5 (got proxy.example.com)'],
    ['not a url', 'proxy_url must be a URL such as http://user:pass@proxy.example.com:8080'],
    [
      'http://93.184.216.34:3128',
      'proxy_url must use a public domain name, not an IP address (allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)',
    ],
    [
      'http://sneaky.example.com',
      'proxy_url host sneaky.example.com resolves to 10.0.0.5, a private, loopback or link-local address (allow it with [plugins.sessions] allow_private_networks = true or the variable WHARF_PLUGINS__SESSIONS__ALLOW_PRIVATE_NETWORKS=true)',
    ],
    ['http://nowhere.example.com', 'proxy_url host nowhere.example.com does not resolve'],
    ['http://proxy.example.com/path', 'proxy_url must not have a path, query or fragment'],
  ])('%s', async (url, problem) => {
    expect(await checkProxyUrl(url, options)).toBe(problem);
  });

  it('gives up on a slow resolver', async () => {
    const slow = { ...options, resolve: () => new Promise<never>(() => {}) };
    expect(await checkProxyUrl('http://proxy.example.com', slow)).toBe('proxy_url host proxy.example.com did not resolve in time');
  });

  it('accepts private hosts and IP literals when allowed, without resolving', async () => {
    const resolve = () => Promise.reject(new Error('must not resolve'));
    for (const url of ['http://10.0.0.1:3128', 'http://squid.lan:3128', 'socks5://[fd00::1]:1080']) {
      expect(await checkProxyUrl(url, { allowPrivate: true, timeoutMs: 100, resolve })).toBeNull();
    }
  });
});

describe('recipients', () => {
  it.each([
    ['+14155550100', { jid: '14155550100@s.whatsapp.net', chat: 'personal' }],
    ['14155550100', { jid: '14155550100@s.whatsapp.net', chat: 'personal' }],
    ['+1 (415) 555-0100', { jid: '14155550100@s.whatsapp.net', chat: 'personal' }],
    ['14155550100@s.whatsapp.net', { jid: '14155550100@s.whatsapp.net', chat: 'personal' }],
    ['123456789012345@lid', { jid: '123456789012345@lid', chat: 'personal' }],
    ['120363012345678901@g.us', { jid: '120363012345678901@g.us', chat: 'group' }],
    ['14155550100-1600000000@g.us', { jid: '14155550100-1600000000@g.us', chat: 'group' }],
    ['120363012345678901@newsletter', { jid: '120363012345678901@newsletter', chat: 'newsletter' }],
    ['+0123456789', null],
    ['+1234', null],
    ['someone@example.com', null],
  ])('%s', (to, expected) => {
    expect(recipientOf(to)).toStrictEqual(expected);
  });

  it('normalizes phone numbers to +digits', () => {
    expect(normalizePhone(' +44 20 7946 0958 ')).toBe('+442079460958');
    expect(normalizePhone('+44 (0) 20')).toBeNull();
  });
});

describe('media crypto', () => {
  it('round-trips, and refuses a wrong key or a tampered file', () => {
    const plain = Buffer.from('bytes of a picture'.repeat(100));
    const enc = encryptMedia(plain, 'image');
    expect(enc.file.length).toBe(Math.ceil((plain.length + 1) / 16) * 16 + 10);
    expect(decryptMedia(enc.file, enc.mediaKey, 'image')).toStrictEqual(plain);
    expect(decryptMedia(enc.file, enc.mediaKey, 'video')).toBeNull();
    expect(decryptMedia(enc.file, Buffer.alloc(32), 'image')).toBeNull();
    const tampered = Buffer.from(enc.file);
    tampered[0]! ^= 1;
    expect(decryptMedia(tampered, enc.mediaKey, 'image')).toBeNull();
  });
});

describe('event names', () => {
  it('are the 22 of PRODUCT.md, and every name the WasenderAPI SDK knows maps onto one', () => {
    expect(EVENT_NAMES).toHaveLength(22);
    expect(new Set(EVENT_NAMES).size).toBe(22);
    const sdkNames = Object.values(WasenderWebhookEventType);
    expect(sdkNames).toHaveLength(22);
    expect(new Set(sdkNames.map((n) => canonicalEvent(n)))).toStrictEqual(new Set(EVENT_NAMES));
  });
});
