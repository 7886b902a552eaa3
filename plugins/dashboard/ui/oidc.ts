/**
 * Signing in through an external OpenID Connect provider, in the browser: the authorization code
 * flow with PKCE (RFC 7636) for a public client, redirect URI `<origin>/login`; the token it
 * yields (the access token, or the ID token, as configured) goes into the cookie Wharf reads the
 * provider's token from (`__session`), the way a provider's own frontend (Clerk's) puts it there.
 */
import { ApiError } from './api.ts';

export interface OidcSettings {
  clientId: string | null;
  scope: string;
  resource: string | null;
  token: 'access_token' | 'id_token';
  cookie: string;
}

const FLOW_KEY = 'wharf.oidc';

/** The settings the server put in the page (`[plugins.dashboard]`), the client id defaulting to the CLI's. */
export function oidcSettings(cliClientId: string | null): OidcSettings {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="wharf-oidc"]');
  const given = meta ? (JSON.parse(meta.content) as Partial<OidcSettings>) : {};
  return {
    clientId: given.clientId ?? cliClientId,
    scope: given.scope ?? 'openid email profile',
    resource: given.resource ?? null,
    token: given.token ?? 'access_token',
    cookie: given.cookie ?? '__session',
  };
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n: number): string {
  return base64url(crypto.getRandomValues(new Uint8Array(n)));
}

async function discover(issuer: string): Promise<{ authorization_endpoint: string; token_endpoint: string }> {
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: 'application/json' } });
  } catch (err) {
    throw new ApiError(0, `The OpenID provider did not answer at ${url}: ${(err as Error).message} (it must allow this origin, CORS)`);
  }
  if (!res.ok) throw new ApiError(res.status, `The OpenID provider answered ${res.status} at ${url}`);
  return res.json();
}

function redirectUri(): string {
  return `${location.origin}/login`;
}

export async function startOidcSignIn(issuer: string, settings: OidcSettings, next: string): Promise<void> {
  if (!settings.clientId) throw new ApiError(0, 'No OAuth client id for the dashboard: set [plugins.dashboard] oidc_client_id');
  const provider = await discover(issuer);
  const verifier = random(32);
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = random(16);
  sessionStorage.setItem(FLOW_KEY, JSON.stringify({ verifier, state, tokenEndpoint: provider.token_endpoint, settings }));
  sessionStorage.setItem('wharf.next', next);
  const url = new URL(provider.authorization_endpoint);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: settings.clientId,
    redirect_uri: redirectUri(),
    scope: settings.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  };
  if (settings.resource) params.resource = settings.resource;
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.toString());
}

/** Back from the provider with `?code&state` (or `?error`): redeem the code, keep the token in the cookie. */
export async function finishOidcSignIn(params: URLSearchParams): Promise<void> {
  const saved = sessionStorage.getItem(FLOW_KEY);
  sessionStorage.removeItem(FLOW_KEY);
  if (params.has('error')) throw new ApiError(0, `The provider refused the sign-in: ${params.get('error_description') ?? params.get('error')}`);
  if (!saved) throw new ApiError(0, 'This sign-in was not started here (or the tab changed): start again');
  const flow = JSON.parse(saved) as { verifier: string; state: string; tokenEndpoint: string; settings: OidcSettings };
  if (params.get('state') !== flow.state) throw new ApiError(0, 'The sign-in answer does not match the request (state): start again');
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code: params.get('code') ?? '',
    redirect_uri: redirectUri(),
    client_id: flow.settings.clientId ?? '',
    code_verifier: flow.verifier,
  });
  if (flow.settings.resource) body.set('resource', flow.settings.resource);
  const res = await fetch(flow.tokenEndpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) throw new ApiError(res.status, `The provider refused the code: ${String(answer.error_description ?? answer.error ?? res.status)}`);
  const token = answer[flow.settings.token];
  if (typeof token !== 'string') throw new ApiError(0, `The provider's answer has no ${flow.settings.token}`);
  const maxAge = typeof answer.expires_in === 'number' ? `; Max-Age=${answer.expires_in}` : '';
  // biome-ignore lint/suspicious/noDocumentCookie: the provider's token must reach Wharf as a cookie, and the Cookie Store API is missing from some supported browsers.
  document.cookie = `${flow.settings.cookie}=${token}; Path=/; SameSite=Lax${maxAge}${location.protocol === 'https:' ? '; Secure' : ''}`;
}
