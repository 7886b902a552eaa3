/**
 * What the command line writes. Text for people goes through `printable`: names and messages come
 * from the server, where anyone in the organization may have written them, and a terminal obeys
 * the escape codes in what it prints (a new window title, a cleared screen, a fake prompt).
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` with every control character but newline and tab written as `\uXXXX`. */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A command's result: JSON under `--json` (control characters escaped by JSON itself), otherwise the text, made printable. */
export function print(args: { json?: boolean }, text: string, json: unknown): void {
  process.stdout.write(args.json ? `${JSON.stringify(json)}\n` : `${printable(text)}\n`);
}

/** A line on stderr, made printable. */
export function warn(line: string): void {
  process.stderr.write(`${printable(line)}\n`);
}

/** Left-aligned columns, two spaces apart. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** `1 file`, `3 files`, `0 files`; `count(n, 'entry', 'entries')` for an irregular plural. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
