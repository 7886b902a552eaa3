/**
 * `wharf serve` with only the global options is read without yargs (start-up); everything else
 * must still reach yargs, so its help, errors and option forms stay as they are.
 */
import { describe, expect, it } from 'vitest';
import { plainServe } from '../../bin/wharf.ts';

describe('plainServe', () => {
  it('reads serve and the global options in both forms', () => {
    expect(plainServe(['serve'])).toStrictEqual({});
    expect(plainServe(['serve', '--listen', '127.0.0.1:8080', '--data-dir=/srv/w', '--config', 'w.toml', '--json'])).toStrictEqual({
      listen: '127.0.0.1:8080',
      dataDir: '/srv/w',
      config: 'w.toml',
      json: true,
    });
    expect(plainServe(['serve', '--data-dir='])).toStrictEqual({ dataDir: '' });
  });

  it('leaves everything else to yargs', () => {
    for (const argv of [
      [],
      ['version'],
      ['serve', '--help'],
      ['serve', '-h'],
      ['serve', '--version'],
      ['serve', '--listen'],
      ['serve', '--listen', '--json'],
      ['serve', '--listen', 'a:1', '--listen', 'b:2'],
      ['serve', '--json', '--json'],
      ['serve', '--json=false'],
      ['serve', '--dataDir', 'x'],
      ['serve', '--unknown', 'x'],
      ['serve', 'extra'],
      ['migrate', 'up'],
    ]) {
      expect(plainServe(argv), argv.join(' ')).toBeUndefined();
    }
  });
});
