/**
 * Credentials that travel in URLs, kept out of logs. A presigned S3 URL carries a live credential
 * in its query (the signature, and the key id it goes with): logged whole, anyone who reads the
 * log can use it until it expires. Log `redactUrl(url)` instead of a URL that may be presigned.
 */

/** Query parameters whose values are credentials (compared case-insensitively). */
const SECRET_QUERY_PARAMS: readonly string[] = [
  // AWS Signature Version 4, presigned.
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
  // AWS Signature Version 2, presigned.
  'signature',
  'awsaccesskeyid',
];

const CENSOR = '[redacted]';

function nameOf(pair: string): string {
  const at = pair.indexOf('=');
  const raw = at < 0 ? pair : pair.slice(0, at);
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    return raw.toLowerCase();
  }
}

/**
 * The URL (absolute, or a request target such as `/bucket/key?X-Amz-Signature=...`) with the
 * value of every credential query parameter replaced by `[redacted]`; everything else is kept as
 * written. `extra` names more parameters to hide (case-insensitive).
 */
export function redactUrl(url: string, extra: Iterable<string> = []): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const query = hash < 0 ? url.slice(q + 1) : url.slice(q + 1, hash);
  const names = new Set(SECRET_QUERY_PARAMS);
  for (const name of extra) names.add(name.toLowerCase());
  const out = query
    .split('&')
    .map((pair) => {
      if (!names.has(nameOf(pair))) return pair;
      const at = pair.indexOf('=');
      return `${at < 0 ? pair : pair.slice(0, at)}=${CENSOR}`;
    })
    .join('&');
  return `${url.slice(0, q + 1)}${out}${hash < 0 ? '' : url.slice(hash)}`;
}
