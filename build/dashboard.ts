/**
 * The dashboard's browser code and styles (`plugins/dashboard/ui/`), bundled by esbuild into one
 * JavaScript module and one stylesheet, each named after the hash of its content so they can be
 * cached for ever. `npm run build` carries the result in the binary as one asset; from source,
 * the dashboard plugin calls this on the first request for a page.
 *
 *   node build/dashboard.ts    prints each file's size, raw and gzipped
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The built files, by name (`main-<hash>.js`, `main-<hash>.css`) -> content. */
export async function dashboardFiles(): Promise<Record<string, string>> {
  return (await dashboardBundle()).files;
}

/** The built files and esbuild's metafile (what went in: the third-party notices list it). */
export async function dashboardBundle(): Promise<{ files: Record<string, string>; metafile: Metafile }> {
  const result = await build({
    entryPoints: [path.join(root, 'plugins/dashboard/ui/main.tsx')],
    // Names and hashes independent of where the checkout is.
    absWorkingDir: root,
    outdir: 'out',
    write: false,
    bundle: true,
    minify: true,
    format: 'esm',
    // Browsers with ES modules, fetch streams, <dialog> and :focus-visible (2022 on).
    target: ['es2022', 'chrome105', 'firefox105', 'safari15.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    entryNames: '[name]-[hash]',
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'warning',
    metafile: true,
  });
  const files: Record<string, string> = {};
  for (const file of result.outputFiles) files[path.basename(file.path)] = file.text;
  return { files, metafile: result.metafile };
}

if (import.meta.main) {
  const files = await dashboardFiles();
  let raw = 0;
  let gzipped = 0;
  for (const [name, text] of Object.entries(files)) {
    const size = Buffer.byteLength(text);
    const gz = gzipSync(text, { level: 9 }).length;
    raw += size;
    gzipped += gz;
    process.stdout.write(`${name}: ${(size / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzipped\n`);
  }
  process.stdout.write(`total: ${(raw / 1024).toFixed(1)} KiB, ${(gzipped / 1024).toFixed(1)} KiB gzipped\n`);
}
