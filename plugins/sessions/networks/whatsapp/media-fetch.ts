/**
 * Fetches the file a send names by URL (`imageUrl`, `documentUrl`, ...), which WhatsApp needs as
 * bytes: Wharf downloads it and Baileys encrypts and uploads it. The URL comes from the API
 * caller, so the download is guarded like a webhook delivery: only http(s), only public addresses
 * (unless `allow_private_networks`), checked on the address really connected to (a name that
 * resolves to a private address is refused even when it resolved to a public one before), on
 * every redirect, with a time limit and a size limit. A file uploaded to this server
 * (`/api/media/{id}`) is read from the database instead.
 */
import { isIP } from 'node:net';
import { WharfError } from '../../../../core/errors.ts';
import { isPublicAddress, type ResolvedAddress, type Resolver, systemResolver } from '../../../../core/net.ts';

export interface FetchedMedia {
  bytes: Buffer;
  /** The Content-Type the server answered, if any. */
  mimetype: string | null;
}

export interface MediaFetchOptions {
  allowPrivateNetworks: boolean;
  maxBytes: number;
  timeoutMs: number;
  resolve?: Resolver;
}

export type MediaFetcher = (url: string, field: string) => Promise<FetchedMedia>;

const MAX_REDIRECTS = 3;

function refused(field: string, why: string): WharfError {
  return new WharfError('validation_failed', 'The given data was invalid.', { fields: { [field]: [why] } });
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | ResolvedAddress[], family?: number) => void;

/** A fetcher whose HTTP client is made on first use (undici loads then). */
export function mediaFetcher(options: MediaFetchOptions): MediaFetcher & { close(): Promise<void> } {
  const allows = (ip: string) => options.allowPrivateNetworks || isPublicAddress(ip.replace(/^\[|\]$/g, ''));
  const resolve = options.resolve ?? systemResolver;
  let agent: Promise<import('undici').Agent> | undefined;
  const makeAgent = async () => {
    const { Agent } = await import('undici');
    const lookup = (hostname: string, lookupOptions: { all?: boolean; family?: number }, callback: LookupCallback) => {
      resolve(hostname).then(
        (addresses) => {
          const usable = addresses.filter((a) => allows(a.address) && (!lookupOptions.family || a.family === lookupOptions.family));
          if (usable.length === 0) {
            const err = Object.assign(new Error(`${hostname} resolves to no public address`), { code: 'WHARF_BLOCKED_ADDRESS' });
            return callback(err as NodeJS.ErrnoException, '');
          }
          if (lookupOptions.all) callback(null, usable);
          else callback(null, usable[0]!.address, usable[0]!.family);
        },
        (err: NodeJS.ErrnoException) => callback(err, ''),
      );
    };
    return new Agent({ connect: { lookup, timeout: options.timeoutMs } as never, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs });
  };

  const fetchMedia = async (url: string, field: string): Promise<FetchedMedia> => {
    const dispatcher = await (agent ??= makeAgent());
    const { request } = await import('undici');
    let target = url;
    for (let hop = 0; ; hop++) {
      let parsed: URL;
      try {
        parsed = new URL(target);
      } catch {
        throw refused(field, `${field} is not a URL`);
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw refused(field, `${field} must be an http or https URL`);
      const host = parsed.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host) && !allows(host)) {
        throw refused(
          field,
          `${field} points to ${host}, a loopback, private or link-local address, which this server does not fetch from (allow_private_networks)`,
        );
      }
      let res: import('undici').Dispatcher.ResponseData;
      try {
        res = await request(parsed, { dispatcher, method: 'GET', headers: { accept: '*/*', 'user-agent': 'Wharf' } });
      } catch (err) {
        const code = (err as { code?: string }).code;
        const why =
          code === 'WHARF_BLOCKED_ADDRESS'
            ? `${field} host ${host} resolves to no public address (allow_private_networks)`
            : `${field} could not be fetched (${code ?? (err as Error).message})`;
        throw refused(field, why);
      }
      if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location) {
        await res.body.dump();
        if (hop >= MAX_REDIRECTS) throw refused(field, `${field} redirects more than ${MAX_REDIRECTS} times`);
        target = new URL(String(res.headers.location), parsed).toString();
        continue;
      }
      if (res.statusCode !== 200) {
        await res.body.dump();
        throw refused(field, `${field} answered HTTP ${res.statusCode}`);
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        await res.body.dump();
        throw refused(field, `${field} is larger than ${options.maxBytes} bytes`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > options.maxBytes) {
          res.body.destroy();
          throw refused(field, `${field} is larger than ${options.maxBytes} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      if (size === 0) throw refused(field, `${field} answered an empty body`);
      const type = res.headers['content-type'];
      return { bytes: Buffer.concat(chunks), mimetype: typeof type === 'string' ? type.split(';')[0]!.trim() || null : null };
    }
  };
  return Object.assign(fetchMedia, {
    async close() {
      if (agent) await (await agent).close();
    },
  });
}
