/** Object keys of uploads: sanitized prefix + unguessable part + sanitized name (PRODUCT.md). */
import { describe, expect, it } from 'vitest';
import { MAX_NAME_BYTES, MAX_PREFIX_BYTES, sanitizeName, sanitizePrefix, uniquePart, uploadKey } from '../../../plugins/storage/object-keys.ts';

describe('upload keys', () => {
  it.each([
    // name, sanitized
    ['photo.jpg', 'photo.jpg'],
    ['hello world.txt', 'hello_world.txt'],
    ['../../etc/passwd', 'etc_passwd'],
    ['..', 'file'],
    ['.env', 'env'],
    ['a..b...c', 'a.b.c'],
    ['tab\there\u0000nul\u007f.txt', 'tab_here_nul_.txt'],
    ['new\nline\r.txt', 'new_line_.txt'],
    ['C:\\Users\\me\\doc.pdf', 'C_Users_me_doc.pdf'],
    ['résumé.pdf', 'résumé.pdf'],
    ['e\u0301te\u0301.txt', 'été.txt'],
    ['日本語.png', '日本語.png'],
    ['what?#%&*.txt', 'what_.txt'],
    ['', 'file'],
    ['///', 'file'],
    ['trailing.', 'trailing'],
  ])('name %j -> %j', (name, expected) => {
    expect(sanitizeName(name)).toBe(expected);
  });

  it.each([
    // prefix, sanitized
    [undefined, ''],
    ['', ''],
    ['/', ''],
    ['photos', 'photos'],
    ['/photos/2026/', 'photos/2026'],
    ['a//b', 'a/b'],
    ['../../x', 'x'],
    ['a/./b/../c', 'a/b/c'],
    ['win\\dir\\sub', 'win/dir/sub'],
    ['with space/and\u0001control', 'with_space/and_control'],
  ])('prefix %j -> %j', (prefix, expected) => {
    expect(sanitizePrefix(prefix)).toBe(expected);
  });

  it('keeps names and prefixes within their byte budgets, extension kept', () => {
    const name = sanitizeName(`${'é'.repeat(400)}.jpeg`);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    expect(name.endsWith('.jpeg')).toBe(true);
    const prefix = sanitizePrefix(Array.from({ length: 40 }, () => 'segment-'.repeat(8)).join('/'));
    expect(Buffer.byteLength(prefix)).toBeLessThanOrEqual(MAX_PREFIX_BYTES);
    expect(prefix.split('/').length).toBeLessThanOrEqual(16);
  });

  it('builds keys with an unguessable part that never holds .., a leading / or control characters', () => {
    const keys = new Set<string>();
    for (const [prefix, name] of [
      ['../..', '../../x'],
      ['/abs', '/etc/passwd'],
      ['\u0000', '\u0000'],
      [undefined, 'a.txt'],
      ['', 'a.txt'],
    ] as const) {
      for (let i = 0; i < 50; i++) {
        const key = uploadKey(prefix, name);
        expect(key).not.toMatch(/\.\./);
        expect(key).not.toMatch(/^\//);
        // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this checks for.
        expect(key).not.toMatch(/[\u0000-\u001f\u007f]/);
        expect(Buffer.byteLength(key)).toBeLessThanOrEqual(1024);
        keys.add(key);
      }
    }
    expect(keys.size).toBe(250);
    expect(uploadKey('photos/2026', 'beach day.jpg')).toMatch(/^photos\/2026\/[A-Za-z0-9_-]{22}\/beach_day\.jpg$/);
    expect(uploadKey(undefined, 'a.txt')).toMatch(/^[A-Za-z0-9_-]{22}\/a\.txt$/);
  });

  it('the unique part sorts by time as bytes (SQL indexes and S3 listings), its last 14 characters random', () => {
    const times = [0, 1, 63, 64, 4095, 4096, Date.UTC(2026, 10, 26), Date.UTC(2026, 10, 26) + 1, Date.UTC(2099, 0, 1), 2 ** 48 - 1];
    const parts = times.map((t) => uniquePart(t));
    for (const p of parts) expect(p).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const sorted = [...parts].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(sorted).toEqual(parts);
    // Same millisecond: the same first 8 characters, different random rest.
    const now = Date.now();
    const same = Array.from({ length: 100 }, () => uniquePart(now));
    expect(new Set(same.map((p) => p.slice(0, 8))).size).toBe(1);
    expect(new Set(same.map((p) => p.slice(8))).size).toBe(100);
    // 1400 random characters: (nearly) all 64 of base64url turn up.
    expect(new Set(same.flatMap((p) => [...p.slice(8)])).size).toBeGreaterThan(60);
    expect(uploadKey('a', 'b.txt', times[6]!).startsWith(`a/${parts[6]!.slice(0, 8)}`)).toBe(true);
  });
});
