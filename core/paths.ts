/**
 * Path prefixes, matched one way everywhere: on whole segments (`/api/files` covers
 * `/api/files` and `/api/files/x`, not `/api/filesx`), ignoring case as the router does, a
 * trailing slash ignored, and `/` (or the empty prefix) covering every path. Route groups,
 * the error envelope of a path and rate-limit rules all use it.
 */

/** A prefix as it is compared: lowercase, no trailing slash; `/` becomes the empty prefix. */
export function normalizePrefix(prefix: string): string {
  return prefix.replace(/\/+$/, '').toLowerCase();
}

/** Whether `path` is `prefix` or below it, on a segment boundary. Both are normalized here. */
export function isUnder(path: string, prefix: string): boolean {
  return covers(normalizePrefix(prefix), path.toLowerCase());
}

/**
 * A function that finds, for a path, the value whose prefix is the longest one the path is
 * under; undefined when no prefix covers it.
 */
export function longestPrefix<T>(entries: Iterable<readonly [prefix: string, value: T]>): (path: string) => T | undefined {
  const table = [...entries].map(([prefix, value]) => ({ prefix: normalizePrefix(prefix), value })).sort((a, b) => b.prefix.length - a.prefix.length);
  return function valueFor(rawPath: string): T | undefined {
    const path = rawPath.toLowerCase();
    return table.find(({ prefix }) => covers(prefix, path))?.value;
  };
}

/** The one comparison: a normalized prefix and a lowercase path. */
function covers(prefix: string, path: string): boolean {
  return prefix === '' || path === prefix || path.startsWith(`${prefix}/`);
}
