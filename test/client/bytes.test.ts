/**
 * The one size format of the command line and the dashboard (client/bytes.ts). That the dashboard
 * prints through it is shown in its browser test ("8.00 PiB", where its own formatter said "8.0 PiB").
 */
import { describe, expect, it } from 'vitest';
import { humanBytes } from '../../client/bytes.ts';

describe('humanBytes', () => {
  it('prints bytes, whole KiB, MiB with one decimal, and two from GiB up', () => {
    expect(humanBytes(0)).toBe('0 B');
    expect(humanBytes(1023)).toBe('1023 B');
    expect(humanBytes(1024)).toBe('1 KiB');
    // 2.93 KiB: whole KiB, as `wharf files ls` printed it before the dashboard shared this.
    expect(humanBytes(3000)).toBe('3 KiB');
    expect(humanBytes(1024 * 1024 - 513)).toBe('1023 KiB');
    expect(humanBytes(1024 * 1024 - 512)).toBe('1.0 MiB');
    expect(humanBytes(1024 ** 3 - 52429)).toBe('1023.9 MiB');
    expect(humanBytes(1024 ** 3 - 52428)).toBe('1.00 GiB');
    expect(humanBytes(5 * 1024 * 1024)).toBe('5.0 MiB');
    expect(humanBytes(13 * 1024 * 1024 + 300 * 1024)).toBe('13.3 MiB');
    expect(humanBytes(1.25 * 1024 ** 3)).toBe('1.25 GiB');
    expect(humanBytes(1024 ** 4 - 1)).toBe('1.00 TiB');
    expect(humanBytes(Number.MAX_SAFE_INTEGER)).toBe('8.00 PiB');
    expect(humanBytes(2 ** 60)).toBe('1024.00 PiB');
  });
});
