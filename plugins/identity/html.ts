/** Minimal server-rendered pages (setup, device approval): no JavaScript, escaped text only. */
import { z } from 'zod';

function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Tagged template that escapes every interpolated value unless it is already `Html`. */
export class Html {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    const text = Array.isArray(v) ? v.map((x) => (x instanceof Html ? x.value : escapeHtml(x))).join('') : v instanceof Html ? v.value : escapeHtml(v);
    out += text + strings[i + 1]!;
  });
  return new Html(out);
}

export function page(title: string, body: Html): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Wharf</title>
<style>
body{font-family:system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem;color:#1d2733}
h1{font-size:1.4rem}label{display:block;margin:.8rem 0 .2rem}input,select{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}
button{margin-top:1rem;padding:.55rem 1.2rem;font-size:1rem;margin-right:.5rem}.error{color:#a31d1d}.ok{color:#1d6b2d}code{font-size:1.2rem;letter-spacing:.1em}
</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
${body.value}
</body>
</html>
`;
}

/** A form field of a server-rendered page: its text, or empty when absent or not text (the page says what is missing in words). */
export const formField = z
  .string()
  .catch('')
  .optional()
  .transform((v) => v ?? '');
