/**
 * Who is signed in and in which organization. Built-in identity: `GET /auth/session`, and
 * `PUT /auth/active-org` to switch. External OpenID Connect: the provider's token in the cookie
 * says who; `GET /api/cli/me` and `GET /api/orgs` list the organizations, and the one chosen here
 * travels as `X-Service-Org` on every request (the API's own override, checked for membership).
 */
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { api, setOrgHeader } from './api.ts';
import { oidcSettings } from './oidc.ts';
import type { Org, User } from './types.ts';

export interface Me {
  mode: 'builtin' | 'oidc';
  user: User;
  activeOrgId: string | null;
  orgs: Org[];
}

export interface CliConfig {
  instanceUrl: string;
  idpFapiUrl: string | null;
  oauthClientId: string | null;
}

const ORG_KEY = 'wharf.org';

export async function identityMode(): Promise<{ mode: Me['mode']; config: CliConfig }> {
  const config = await api<CliConfig>('GET', '/api/cli/config');
  // Built-in mode names this instance as its own identity provider.
  return { mode: config.idpFapiUrl === config.instanceUrl ? 'builtin' : 'oidc', config };
}

export async function loadMe(): Promise<Me> {
  const { mode } = await identityMode();
  if (mode === 'builtin') {
    const s = await api<{ user: User; activeOrgId: string | null; orgs: Org[] }>('GET', '/auth/session');
    return { mode, user: s.user, activeOrgId: s.activeOrgId, orgs: s.orgs };
  }
  setOrgHeader(null);
  const me = await api<{ userId: string; email: string | null; name: string | null }>('GET', '/api/cli/me');
  const { orgs } = await api<{ orgs: Org[] }>('GET', '/api/orgs');
  const chosen = localStorage.getItem(ORG_KEY);
  const active = orgs.find((o) => o.id === chosen) ?? orgs[0];
  setOrgHeader(active?.id ?? null);
  return { mode, user: { id: me.userId, email: me.email, name: me.name }, activeOrgId: active?.id ?? null, orgs };
}

/** Makes `orgId` the organization the dashboard acts in. */
export async function switchOrg(me: Me, orgId: string): Promise<void> {
  if (me.mode === 'builtin') {
    await api('PUT', '/auth/active-org', { orgId });
  } else {
    localStorage.setItem(ORG_KEY, orgId);
  }
}

export async function signOut(me: Me | undefined): Promise<void> {
  if (!me || me.mode === 'builtin') {
    await api('POST', '/auth/logout', undefined, { keepSignedIn: true });
  } else {
    // The provider's token lives in the cookie this page set; forgetting it signs out here.
    // biome-ignore lint/suspicious/noDocumentCookie: this page set the cookie (oidc.ts); the Cookie Store API is missing from some supported browsers.
    document.cookie = `${oidcSettings(null).cookie}=; Path=/; Max-Age=0; SameSite=Lax${location.protocol === 'https:' ? '; Secure' : ''}`;
    localStorage.removeItem(ORG_KEY);
  }
}

export interface MeContextValue {
  me: Me;
  /** The active organization, with the caller's role in it. */
  org: Org | undefined;
  switchOrg(orgId: string): Promise<void>;
  refresh(): Promise<void>;
}

export const MeContext = createContext<MeContextValue | null>(null);

export function useMe(): MeContextValue {
  const value = useContext(MeContext);
  if (!value) throw new Error('useMe outside the signed-in shell');
  return value;
}
