/** Path prefixes: one rule for route groups, error envelopes and rate-limit rules. */
import { describe, expect, it } from 'vitest';
import { isUnder, longestPrefix, normalizePrefix } from '../../core/paths.ts';

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
});
