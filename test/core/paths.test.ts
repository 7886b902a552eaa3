/** Path prefixes: one rule for route groups, error envelopes and rate-limit rules. */
import { describe, expect, it } from 'vitest';
import { coveringSets, isUnder, longestPrefix, normalizePrefix } from '../../core/paths.ts';

describe('path prefixes', () => {
  it('match on whole segments, ignoring case and a trailing slash; / covers everything', () => {
    const cases: [string, string, boolean][] = [
      ['/api/files', '/api/files', true],
      ['/api/files/abc', '/api/files', true],
      ['/API/Files/abc', '/api/files/', true],
      ['/api/filesx', '/api/files', false],
      ['/api', '/api/files', false],
      ['/anything/at/all', '/', true],
      ['/x', '', true],
    ];
    for (const [path, prefix, under] of cases) expect([path, prefix, isUnder(path, prefix)]).toEqual([path, prefix, under]);
    expect(normalizePrefix('/API/Files//')).toBe('/api/files');
    expect(normalizePrefix('/')).toBe('');
  });

  it('pick the longest prefix a path is under', () => {
    const find = longestPrefix([
      ['/', 'root'],
      ['/api', 'api'],
      ['/api/files', 'files'],
      ['/API/FILES/special/', 'special'],
    ]);
    expect(find('/api/files/special/x')).toBe('special');
    expect(find('/api/files/specialx')).toBe('files');
    expect(find('/api/filesx')).toBe('api');
    expect(find('/other')).toBe('root');
    expect(longestPrefix([['/api', 1]])('/apix')).toBeUndefined();
  });

  it("answer as testing every prefix would, for any path (lookups of the path's own prefixes)", () => {
    // Paths and prefixes from a few segments, with the odd cases: case, trailing and doubled
    // slashes, a prefix of a segment (/ap), the root, no leading slash.
    const segments = ['api', 'API', 'ap', 'files', 'x', '', 'tokens'];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pathOf = (depth: number) =>
      (random(8) === 0 ? '' : '/') + Array.from({ length: depth }, () => segments[random(segments.length)]).join('/') + (random(4) === 0 ? '/' : '');
    for (let round = 0; round < 200; round++) {
      const sets = Array.from({ length: 1 + random(5) }, () => Array.from({ length: 1 + random(3) }, () => (random(10) === 0 ? '/' : pathOf(1 + random(3)))));
      const entries = sets.flatMap((prefixes, i) => prefixes.map((prefix) => [prefix, i] as const));
      const find = longestPrefix(entries);
      const setsOf = coveringSets(sets);
      for (let k = 0; k < 30; k++) {
        const path = pathOf(random(5));
        // By brute force: the first of the longest covering prefixes; every set with one.
        const covering = entries.filter(([prefix]) => isUnder(path, prefix));
        const longest = Math.max(-1, ...covering.map(([prefix]) => normalizePrefix(prefix).length));
        const expected = covering.find(([prefix]) => normalizePrefix(prefix).length === longest)?.[1];
        expect([sets, path, find(path)]).toEqual([sets, path, expected]);
        const expectedSets = sets.flatMap((prefixes, i) => (prefixes.some((prefix) => isUnder(path, prefix)) ? [i] : []));
        expect([sets, path, setsOf(path.toLowerCase())]).toEqual([sets, path, expectedSets]);
      }
    }
  });
});
