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

/**
 * A whole page in the dashboard's colours (inline styles only: these pages send no script and load
 * nothing else). With `home`, a link back to the dashboard ends it.
 */
export function page(title: string, body: Html, options: { home?: boolean } = {}): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Wharf</title>
<style>
:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:15px;line-height:1.45;color:#17212b;background:#f4f6f8}
body{max-width:30rem;margin:3rem auto;padding:0 1rem}
main{background:#fff;border:1px solid #d8dee4;border-radius:8px;padding:1.2rem 1.4rem}
.brand{font-weight:700;color:#0b6e80;margin:0 0 .8rem}a{color:#0b6e80}
h1{font-size:1.4rem;margin:0 0 .6rem}label{display:block;margin:.8rem 0 .2rem;font-weight:600}
input,select{width:100%;box-sizing:border-box;padding:.5rem;font:inherit;border:1px solid #d8dee4;border-radius:6px}
button{margin-top:1rem;margin-right:.5rem;padding:.55rem 1.2rem;font:inherit;font-weight:600;border:1px solid #0b6e80;border-radius:6px;background:#0b6e80;color:#fff;cursor:pointer}
button[value=deny]{background:#fff;color:#b42318;border-color:#b42318}
:focus-visible{outline:3px solid #1f6feb;outline-offset:2px}
.error{color:#b42318}.ok{color:#1a7f37}.hint{margin:.25rem 0 0;font-size:.9rem;color:#57606a}code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:1.2rem;letter-spacing:.1em}
code.command{font-size:.92rem;letter-spacing:0}code.command span{white-space:nowrap}.home{margin-top:1rem}
</style>
</head>
<body>
<p class="brand">Wharf</p>
<main>
<h1>${escapeHtml(title)}</h1>
${body.value}
</main>
${options.home ? '<p class="home"><a href="/">← Back to the dashboard</a></p>' : ''}
</body>
</html>
`;
}

/** A command to type, wrapping between its words only (an option such as `--instance` stays whole). */
export function command(text: string): Html {
  return new Html(
    `<code class="command">${text
      .split(' ')
      .map((word) => `<span>${escapeHtml(word)}</span>`)
      .join(' ')}</code>`,
  );
}

/** A form field of a server-rendered page: its text, or empty when absent or not text (the page says what is missing in words). */
export const formField = z.lazy(() =>
  z
    .string()
    .catch('')
    .optional()
    .transform((v) => v ?? ''),
);
