/** Numbers and times as people read them. */

/** A date-time in the reader's locale, minutes precision. */
export function when(iso: string | null | undefined): string {
  if (!iso) return 'never';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** "3 min ago", "in 2 h", for recent and near times; the date otherwise. */
export function ago(iso: string | null | undefined): string {
  if (!iso) return 'never';
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const diff = Date.now() - ms;
  const abs = Math.abs(diff);
  const say = (n: number, unit: string) => (diff >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`);
  if (abs < 45_000) return diff >= 0 ? 'just now' : 'in a moment';
  if (abs < 3_600_000) return say(Math.round(abs / 60_000), 'min');
  if (abs < 86_400_000) return say(Math.round(abs / 3_600_000), 'h');
  if (abs < 7 * 86_400_000) return say(Math.round(abs / 86_400_000), 'd');
  return when(iso);
}

/** A whole number with its thousands grouped: "4,742". */
export const grouped = (n: number): string => n.toLocaleString('en');

/** "1 file", "2 files": a count with its noun, singular or plural. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${grouped(n)} ${n === 1 ? one : many}`;
}
