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
 * under; undefined when no prefix covers it. Of two entries with the same prefix, the first.
 */
export function longestPrefix<T>(entries: Iterable<readonly [prefix: string, value: T]>): (path: string) => T | undefined {
  const byPrefix = new Map<string, T>();
  for (const [prefix, value] of entries) {
    const normalized = normalizePrefix(prefix);
    if (!byPrefix.has(normalized)) byPrefix.set(normalized, value);
  }
  return function valueFor(rawPath: string): T | undefined {
    const path = rawPath.toLowerCase();
    // The prefixes that can cover the path, longest first: itself, then up to each of its slashes.
    for (let end = path.length; end > 0; end = path.lastIndexOf('/', end - 1)) {
      const prefix = end === path.length ? path : path.slice(0, end);
      if (byPrefix.has(prefix)) return byPrefix.get(prefix);
    }
    return byPrefix.get('');
  };
}

/**
 * A function that gives, for a path already lowercase, the indices of the prefix sets it is
 * under, in ascending order: for a caller that tests one path against many sets (the route
 * groups), a few lookups instead of a comparison with every prefix of every set.
 */
export function coveringSets(sets: readonly (readonly string[])[]): (lowercasePath: string) => readonly number[] {
  const owners = new Map<string, number[]>();
  sets.forEach((prefixes, i) => {
    for (const prefix of prefixes) {
      const normalized = normalizePrefix(prefix);
      owners.set(normalized, [...(owners.get(normalized) ?? []), i]);
    }
  });
  const union = (...lists: readonly number[][]) => [...new Set(lists.flat())].sort((a, b) => a - b);
  const everywhere = union(owners.get('') ?? []);
  // Each prefix's sets with those of the empty prefix, computed once: a path under one prefix
  // (nearly every path) gets its answer without building a list.
  const withEverywhere = new Map([...owners].map(([prefix, sets]) => [prefix, union(sets, everywhere)]));
  return function setsOf(path: string): readonly number[] {
    let found: number[] | undefined;
    let more: number[][] | undefined;
    for (let end = path.length; end > 0; end = path.lastIndexOf('/', end - 1)) {
      const sets = withEverywhere.get(end === path.length ? path : path.slice(0, end));
      if (!sets) continue;
      if (found) (more ??= [found]).push(sets);
      else found = sets;
    }
    return more ? union(...more) : (found ?? everywhere);
  };
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
