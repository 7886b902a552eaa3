/**
 * The dashboard's routes: `GET /` and `GET /login` answer the same small HTML page (never
 * cached) that loads the script and the stylesheet; `GET /assets/{name}` answers those, named by
 * their content's hash and cached for a year; `GET /favicon.ico` answers the icon (an SVG), which
 * browsers ask for on any page of this origin. Everything else the dashboard shows it reads from
 * the public HTTP API, with the browser's `__session` cookie, like any other client.
 *
 * The group owns `/` as a prefix so that `/` can be routed at all (prefixes match whole
 * segments and `/` covers every path), but it declares only these routes: every longer prefix
 * (`/api/...`, `/auth`, `/device`) belongs to its own group, and a path nobody declares answers
 * the same `{error: "Not found"}` as before.
 */
import type { Context } from 'koa';
import { type ApiRegistry, PUBLIC, type RouteGroup } from '../../core/api.ts';
import { WharfError } from '../../core/errors.ts';
import type { DashboardAssets } from './assets.ts';

const TAG = 'Dashboard';
const YEAR = 31_536_000;

/**
 * What the page may load: its own script and styles only (no inline script, no CDN), API calls to
 * this origin, and uploads straight to the object store's presigned URLs, whose origin is the
 * store's (another port, another host), hence `connect-src *`.
 */
const PAGE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  'connect-src *',
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

/** What the page's script needs to sign in through an external OpenID Connect provider (ui/oidc.ts). */
export interface OidcSettings {
  clientId: string | null;
  scope: string;
  resource: string | null;
  token: 'access_token' | 'id_token';
  cookie: string;
}

/** The tab icon: a small SVG (Chromium and Firefox take SVG at /favicon.ico when the type says so). */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f4f8a"/><path d="M6 9l4 14 6-10 6 10 4-14" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/></svg>';

const escapeAttribute = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page: the built script and stylesheet, the sign-in settings, and what a browser without JavaScript can still use. */
export function pageHtml(assets: Pick<DashboardAssets, 'script' | 'style'>, oidc: OidcSettings): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Wharf</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
<meta name="wharf-oidc" content="${escapeAttribute(JSON.stringify(oidc))}">
<link rel="stylesheet" href="/assets/${assets.style}">
<script type="module" src="/assets/${assets.script}"></script>
</head>
<body>
<div id="app"><noscript><p>The Wharf dashboard needs JavaScript. Approving a command-line sign-in does not: <a href="/device">/device</a>.</p></noscript></div>
</body>
</html>
`;
}

export function dashboardRoutes(api: ApiRegistry, assets: () => Promise<DashboardAssets>, oidc: OidcSettings): RouteGroup {
  const group = api.group({ prefixes: ['/'], envelope: 'plain' });

  async function built(): Promise<DashboardAssets> {
    try {
      return await assets();
    } catch (err) {
      throw new WharfError(
        'unavailable',
        'The dashboard is not built: run the binary (npm run build), or a checkout with its devDependencies installed (npm install)',
        {
          cause: err,
        },
      );
    }
  }

  async function page(ctx: Context) {
    const files = await built();
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('Content-Security-Policy', PAGE_POLICY);
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.type = 'html';
    ctx.body = pageHtml(files, oidc);
  }

  for (const [path, summary] of [
    ['/', 'The dashboard (HTML page; the script reads everything from this API)'],
    ['/login', 'The dashboard sign-in page (HTML; signs in through POST /auth/login)'],
  ] as const) {
    group.route({ method: 'GET', path, summary, tag: TAG, auth: PUBLIC, success: { contentType: 'text/html' }, handler: page });
  }

  group.route({
    method: 'GET',
    path: '/favicon.ico',
    summary: 'The tab icon (SVG)',
    tag: TAG,
    auth: PUBLIC,
    success: { contentType: 'image/svg+xml' },
    handler(ctx) {
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.type = 'image/svg+xml';
      ctx.body = FAVICON_SVG;
    },
  });

  group.route({
    method: 'GET',
    path: '/assets/:name',
    summary: "The dashboard's script and stylesheet, named by their content's hash (cached for a year)",
    tag: TAG,
    auth: PUBLIC,
    success: { contentType: 'text/javascript' },
    errors: { 404: 'No such asset: `{error}`' },
    async handler(ctx, { params }) {
      // A Map lookup: a name of any shape is either one of the built files or a 404.
      const file = (await built()).files.get(params.name ?? '');
      if (!file) throw new WharfError('not_found', 'No such asset');
      ctx.set('Cache-Control', `public, max-age=${YEAR}, immutable`);
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Vary', 'Accept-Encoding');
      ctx.set('ETag', file.etag);
      ctx.type = file.type;
      if (ctx.get('if-none-match') === file.etag) {
        ctx.status = 304;
        return;
      }
      if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
        ctx.set('Content-Encoding', 'gzip');
        ctx.body = file.gzip;
      } else {
        ctx.body = file.body;
      }
    },
  });

  return group;
}
