/**
 * Where webhooks may go: the address policy (public addresses, plus what the config opens), the
 * check run when a webhook URL is saved, and the undici agent whose connector applies the same
 * policy to the address it really connects to, so a name that resolves to a public address when
 * saved and to a private one later (DNS rebinding) is still refused.
 */
import { BlockList, isIP } from 'node:net';
import type { Agent, buildConnector, Dispatcher } from 'undici';
import { embeddedIpv4s, isPublicAddress, type ResolvedAddress, type Resolver, resolveWithin, systemResolver } from '../../core/net.ts';
import { parseCidr } from './config.ts';

/** Cloud instance-metadata endpoints: refused even when private networks are allowed, unless named in allowed_networks. */
const METADATA_ADDRESSES = ['169.254.169.254', '169.254.170.2', '100.100.100.200', 'fd00:ec2::254'];

export interface AddressPolicy {
  /** True when a webhook may be delivered to this IP address. */
  allows(ip: string): boolean;
  /** Why an address is refused: `metadata` (only allowed_networks opens it) or `private`; null when allowed. */
  refusal(ip: string): 'metadata' | 'private' | null;
}

export function addressPolicy(options: { allowPrivateNetworks: boolean; allowedNetworks: readonly string[] }): AddressPolicy {
  const allowed = new BlockList();
  for (const entry of options.allowedNetworks) {
    const parsed = parseCidr(entry);
    if (parsed) allowed.addSubnet(parsed[0], parsed[1], parsed[2]);
  }
  const metadata = new BlockList();
  for (const ip of METADATA_ADDRESSES) metadata.addAddress(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  function refusal(raw: string): 'metadata' | 'private' | null {
    const ip = raw.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
    const family = isIP(ip);
    if (family === 0) return 'private';
    // An IPv6 address that carries an IPv4 address is judged by that address too.
    const forms: [string, 'ipv4' | 'ipv6'][] = [[ip, family === 4 ? 'ipv4' : 'ipv6'], ...embeddedIpv4s(ip).map((v4) => [v4, 'ipv4'] as [string, 'ipv4'])];
    if (forms.some(([a, type]) => allowed.check(a, type))) return null;
    if (forms.some(([a, type]) => metadata.check(a, type))) return 'metadata';
    return isPublicAddress(ip) || options.allowPrivateNetworks ? null : 'private';
  }
  return { refusal, allows: (ip) => refusal(ip) === null };
}

/** A connection refused by the address policy. */
export class BlockedAddressError extends Error {
  readonly code = 'WHARF_BLOCKED_ADDRESS';
  constructor(host: string, address: string) {
    super(
      host === address
        ? `refused to connect to ${address}: a loopback, private, link-local or metadata address`
        : `refused to connect to ${host}: it resolves to ${address}, a loopback, private, link-local or metadata address`,
    );
    this.name = 'BlockedAddressError';
  }
}

const HOW_TO_ALLOW = {
  private:
    'a loopback, private or link-local address, which this server does not deliver webhooks to (allow it with [plugins.webhooks] allow_private_networks = true or the variable WHARF_PLUGINS__WEBHOOKS__ALLOW_PRIVATE_NETWORKS=true, or name its network in [plugins.webhooks] allowed_networks)',
  metadata: 'a cloud metadata address, which this server does not deliver webhooks to (only naming it in [plugins.webhooks] allowed_networks allows it)',
} as const;

/**
 * Checks a webhook URL being saved: null when acceptable, otherwise the reason (for `webhook_url`).
 * A host that does not resolve now is accepted (a receiver not deployed yet, a DNS hiccup): the
 * connect-time guard judges the address it resolves to when a delivery is made.
 */
export async function checkWebhookUrl(value: string, options: { policy: AddressPolicy; resolve: Resolver; timeoutMs: number }): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'webhook_url must be an http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'webhook_url must be an http or https URL';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!host) return 'webhook_url must name a host';
  if (isIP(host)) {
    const why = options.policy.refusal(host);
    return why ? `webhook_url points to ${host}, ${HOW_TO_ALLOW[why]}` : null;
  }
  const addresses = await resolveWithin(host, options.resolve, options.timeoutMs);
  if (addresses === 'timeout' || addresses === 'unresolved') return null;
  for (const { address } of addresses) {
    const why = options.policy.refusal(address);
    if (why) return `webhook_url host ${host} resolves to ${address}, ${HOW_TO_ALLOW[why]}`;
  }
  return null;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | ResolvedAddress[], family?: number) => void;

export interface GuardedAgentOptions {
  policy: AddressPolicy;
  resolve?: Resolver;
  connectTimeoutMs: number;
  keepAliveTimeoutMs?: number;
}

/** What the dispatcher needs of an HTTP client. */
export interface HttpClient {
  request(options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  destroy(): Promise<void>;
}

/** The guarded agent behind a client that creates it on the first request. */
export function lazyGuardedAgent(options: GuardedAgentOptions): HttpClient {
  let agent: Promise<Agent> | undefined;
  return {
    async request(requestOptions) {
      return (await (agent ??= guardedAgent(options))).request(requestOptions);
    },
    async destroy() {
      if (agent) await (await agent).destroy();
    },
  };
}

/**
 * The keep-alive HTTP client of the dispatcher. Its connector refuses IP literals the policy
 * refuses, and resolves names itself, keeping only the addresses the policy allows.
 */
export async function guardedAgent(options: GuardedAgentOptions): Promise<Agent> {
  // undici is loaded when the first delivery needs it: it is the largest part of what the
  // webhooks plugin would otherwise add to every start-up.
  const { Agent, buildConnector } = await import('undici');
  const { policy } = options;
  const resolve = options.resolve ?? systemResolver;
  const lookup = (hostname: string, lookupOptions: { all?: boolean; family?: number }, callback: LookupCallback) => {
    resolve(hostname).then(
      (addresses) => {
        const usable = addresses.filter((a) => policy.allows(a.address) && (!lookupOptions.family || a.family === lookupOptions.family));
        if (usable.length === 0) {
          const first = addresses[0];
          if (!first) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
          return callback(new BlockedAddressError(hostname, first.address) as NodeJS.ErrnoException, '');
        }
        if (lookupOptions.all) callback(null, usable);
        else callback(null, usable[0]!.address, usable[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
  const base = buildConnector({ timeout: options.connectTimeoutMs, lookup } as buildConnector.BuildOptions);
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const host = connectOptions.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && !policy.allows(host)) {
      queueMicrotask(() => callback(new BlockedAddressError(host, host), null));
      return;
    }
    base(connectOptions, callback);
  };
  return new Agent({
    connect,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4000,
    // A receiver's keep-alive hint may lengthen idle connections up to a minute, no more.
    keepAliveMaxTimeout: 60_000,
    pipelining: 1,
  });
}
