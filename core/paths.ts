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
  return covers(compiled(prefix), path.toLowerCase());
}

/**
 * A function that finds, for a path, the value whose prefix is the longest one the path is
 * under; undefined when no prefix covers it.
 */
export function longestPrefix<T>(entries: Iterable<readonly [prefix: string, value: T]>): (path: string) => T | undefined {
  const table = [...entries].map(([prefix, value]) => ({ ...compiled(prefix), value })).sort((a, b) => b.prefix.length - a.prefix.length);
  return function valueFor(rawPath: string): T | undefined {
    const path = rawPath.toLowerCase();
    return table.find((entry) => covers(entry, path))?.value;
  };
}

/**
 * A function telling whether a path, already lowercase, is under any of `prefixes`: for a
 * caller that tests one path against many prefix sets and lowercases it once.
 */
export function underAny(prefixes: readonly string[]): (lowercasePath: string) => boolean {
  const table = prefixes.map(compiled);
  return (path) => table.some((entry) => covers(entry, path));
}

interface CompiledPrefix {
  prefix: string;
  /** The prefix and a slash, built once rather than per comparison. */
  below: string;
}

function compiled(prefix: string): CompiledPrefix {
  const normalized = normalizePrefix(prefix);
  return { prefix: normalized, below: `${normalized}/` };
}

/** The one comparison: a compiled prefix and a lowercase path. */
function covers({ prefix, below }: CompiledPrefix, path: string): boolean {
  return prefix === '' || path === prefix || path.startsWith(below);
}
