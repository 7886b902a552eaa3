/**
 * The dashboard's built files: from the binary (one JSON asset `npm run build` made with
 * build/dashboard.ts), or, running from a checkout, built by esbuild on first use. Each file is
 * kept with its gzipped bytes, its type and an ETag; names carry a hash of the content, so a
 * browser may cache them for ever.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { seaModule } from '../../core/native.ts';

/** The asset name of the dashboard's files in the binary (a JSON object: file name -> text). */
export const DASHBOARD_ASSET = 'dashboard.json';

export interface AssetFile {
  body: Buffer;
  gzip: Buffer;
  type: string;
  etag: string;
}

export interface DashboardAssets {
  /** `/assets/<name>` of the script and of the stylesheet. */
  script: string;
  style: string;
  files: ReadonlyMap<string, AssetFile>;
}

const TYPES: Readonly<Record<string, string>> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

/** The built files, name -> text: the binary's asset, else a build from this checkout's sources. */
async function builtFiles(): Promise<Record<string, string>> {
  const sea = seaModule();
  if (sea) return JSON.parse(sea.getAsset(DASHBOARD_ASSET, 'utf8')) as Record<string, string>;
  // From source: build/dashboard.ts needs esbuild and the UI's sources, which only a checkout
  // has. The specifier is computed so the server's bundle does not take the builder in.
  const builder = new URL('../../build/dashboard.ts', import.meta.url).href;
  const { dashboardFiles } = (await import(builder)) as { dashboardFiles(): Promise<Record<string, string>> };
  return dashboardFiles();
}

/** Indexes built files: each with its gzipped form and ETag; the script and stylesheet found by their kind. */
export function indexFiles(built: Record<string, string>): DashboardAssets {
  const files = new Map<string, AssetFile>();
  let script: string | undefined;
  let style: string | undefined;
  for (const [name, text] of Object.entries(built)) {
    const ext = name.slice(name.lastIndexOf('.') + 1);
    const type = TYPES[ext];
    if (!type) continue;
    const body = Buffer.from(text, 'utf8');
    files.set(name, { body, gzip: gzipSync(body, { level: 9 }), type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
    if (ext === 'js') script = name;
    else style = name;
  }
  if (!script || !style) throw new Error(`the dashboard build has no ${script ? 'stylesheet' : 'script'}`);
  return { script, style, files };
}

/**
 * The assets, loaded once on first use. A failed load (a checkout without its devDependencies)
 * is not kept, so the next request tries again.
 */
export function lazyAssets(): () => Promise<DashboardAssets> {
  let pending: Promise<DashboardAssets> | undefined;
  return function assets(): Promise<DashboardAssets> {
    pending ??= builtFiles()
      .then(indexFiles)
      .catch((err: unknown) => {
        pending = undefined;
        throw err;
      });
    return pending;
  };
}
