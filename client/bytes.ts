/**
 * Sizes as people read them, the same everywhere Wharf prints one: the command line (client/) and
 * the dashboard's browser code (plugins/dashboard/ui), which imports this file. No imports, so
 * the browser bundle takes it as it is.
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const LARGE = ['GiB', 'TiB', 'PiB'];

/** `17 B`, `812 KiB`, `12.3 MiB`, `1.25 GiB`, `8.00 PiB`: binary units (as storage limits are set), whole KiB, one decimal for MiB, two from GiB up. */
export function humanBytes(n: number): string {
  if (n < KiB) return `${n} B`;
  // Below what would round up to the next unit ("1024 KiB", "1024.0 MiB").
  if (n < MiB - KiB / 2) return `${Math.round(n / KiB)} KiB`;
  if (n < GiB - MiB / 20) return `${(n / MiB).toFixed(1)} MiB`;
  let value = n / GiB;
  let unit = 0;
  while (value >= 1024 - 0.005 && unit < LARGE.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(2)} ${LARGE[unit]}`;
}
