/** The webhooks plugin's config: `[plugins.webhooks]`. */
import { BlockList, isIP } from 'node:net';
import { z } from 'zod';

/** An IPv4 or IPv6 network in CIDR notation, or a single address. */
const cidr = z
  .string()
  .max(64)
  .refine((v) => parseCidr(v) !== null, { message: 'must be an address or a CIDR network such as 192.168.1.0/24 or fd00::/8' });

/** `[address, prefix, family]` of a CIDR string, or null when it is not one. */
export function parseCidr(value: string): [string, number, 'ipv4' | 'ipv6'] | null {
  const [address = '', prefixText, extra] = value.trim().split('/');
  if (extra !== undefined) return null;
  const family = isIP(address);
  if (family === 0) return null;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix >= 0 && prefix <= max)) return null;
  const list = new BlockList();
  const type = family === 4 ? 'ipv4' : 'ipv6';
  try {
    list.addSubnet(address, prefix, type);
  } catch {
    return null;
  }
  return [address, prefix, type];
}

export const webhooksConfig = z.strictObject({
  timeout_ms: z
    .int()
    .min(100)
    .max(120_000)
    .default(10_000)
    .describe(
      'How long one delivery attempt may take, in milliseconds: connecting, sending, the answer and reading its body. A receiver that takes longer is a failed attempt.',
    ),
  max_attempts: z
    .int()
    .min(1)
    .max(5)
    .default(5)
    .describe(
      'Attempts per delivery, the first included (at most 5, as the spec says); after the last failure the delivery is abandoned and never retried by itself.',
    ),
  retry_schedule_seconds: z
    .array(z.number().positive().max(86_400))
    .min(1)
    .max(4)
    .default([10, 60, 360, 2160])
    .describe(
      'Delay before each retry, in seconds: the n-th entry is the wait after the n-th failed attempt (exponential by default: 10 s, 1 min, 6 min, 36 min); when there are fewer entries than retries the last one repeats. A Retry-After answer can lengthen a wait up to the longest entry, never beyond.',
    ),
  retry_jitter: z
    .number()
    .min(0)
    .max(1)
    .default(0.2)
    .describe(
      'Random spread of each retry delay, as a fraction: 0.2 waits between 0.8 and 1.2 times the scheduled delay, so receivers that fail together are not retried together.',
    ),
  concurrency: z
    .int()
    .min(1)
    .max(4096)
    .default(256)
    .describe('Deliveries in flight at once, over all sessions, in requests (8 times concurrency_per_session by default: one slow receiver holds an eighth).'),
  concurrency_per_session: z
    .int()
    .min(1)
    .max(1024)
    .default(32)
    .describe(
      "Deliveries of one session in flight at once, in requests (capped by concurrency). One slow receiver holds at most this many of the overall slots, so other sessions' deliveries keep flowing. It also caps one session's delivery rate at this many per round trip to its receiver (32 keeps up with 1,000 events a second at 30 ms a round trip). Deliveries of one session may arrive out of order when this is above 1.",
    ),
  response_read_limit_bytes: z
    .int()
    .min(1024)
    .max(16_777_216)
    .default(65_536)
    .describe(
      "How much of a receiver's answer body is read, in bytes; the connection is dropped past it (an endless body cannot hold a slot). The first KiB is kept on the attempt record.",
    ),
  allow_private_networks: z
    .boolean()
    .default(false)
    .describe(
      'Deliver to webhook URLs that resolve to loopback, private, link-local or otherwise non-public addresses (self-hosted LANs, tests). Cloud metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200) stay refused unless allowed_networks names them. Off: such URLs are refused with 422 when saved, and connections to them are refused when made (DNS rebinding).',
    ),
  allowed_networks: z
    .array(cidr)
    .max(256)
    .default([])
    .describe(
      'Non-public networks webhook URLs may resolve to even when allow_private_networks is off, as CIDR (for example ["192.168.10.0/24", "fd12:3456::/48"]) or single addresses.',
    ),
  dns_timeout_ms: z
    .int()
    .min(100)
    .max(60_000)
    .default(3000)
    .describe(
      'How long resolving a webhook host name may take when its URL is saved, in milliseconds. A name that resolves to a refused address is refused; one that does not resolve (in time) is accepted, and the address it resolves to is checked again at every delivery.',
    ),
  retention_days: z
    .number()
    .positive()
    .default(30)
    .describe(
      'Finished dispatch records (delivered or abandoned) older than this many days are deleted with their attempts, hourly. Pending ones are never deleted.',
    ),
  secret_rotation_grace_seconds: z
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(86_400)
    .describe(
      'After a webhook secret is rotated, deliveries carry a signature with the old secret too (X-Webhook-Signature-Previous, and a second webhook-signature entry) for this many seconds, so receivers can switch without losing deliveries. 0: the old secret stops at once.',
    ),
  shutdown_wait_ms: z
    .int()
    .min(0)
    .max(60_000)
    .default(2000)
    .describe('On shutdown, how long deliveries in flight may finish, in milliseconds; the rest are cut and sent again after the restart (at least once).'),
  lease_seconds: z
    .int()
    .min(1)
    .max(3600)
    .default(60)
    .describe(
      'How long an instance holds a delivery it took from the outbox, in seconds; a live instance renews its leases every third of this. Another instance takes over a delivery whose lease expired (its instance died), so this is also how long a dead instance delays its deliveries.',
    ),
});

export type WebhooksConfig = z.output<typeof webhooksConfig>;
