/** The signed-in shell: header with the organization switcher, navigation, and the page of the route. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, setSignedOutHandler } from './api.ts';
import { ErrorBox, Loading } from './components.tsx';
import { link, useAction, useLoad, useRoute } from './hooks.ts';
import { AppDetail } from './pages/app-detail.tsx';
import { Apps } from './pages/apps.tsx';
import { Deliveries, DispatchDetail } from './pages/deliveries.tsx';
import { Organization } from './pages/org.tsx';
import { Overview } from './pages/overview.tsx';
import { SessionDetail } from './pages/session-detail.tsx';
import { Sessions } from './pages/sessions.tsx';
import { PersonalTokens } from './pages/tokens.tsx';
import { loadMe, MeContext, type MeContextValue, signOut, switchOrg } from './session.ts';

const NAV = [
  { href: link(), label: 'Overview', section: '' },
  { href: link('apps'), label: 'Apps', section: 'apps' },
  { href: link('sessions'), label: 'Messaging', section: 'sessions' },
  { href: link('deliveries'), label: 'Deliveries', section: 'deliveries' },
  { href: link('tokens'), label: 'Access tokens', section: 'tokens' },
  { href: link('org'), label: 'Organization', section: 'org' },
];

function toLogin() {
  const next = location.hash && location.hash !== '#/' ? `?next=${encodeURIComponent(location.hash)}` : '';
  location.replace(`/login${next}`);
}

export function Shell() {
  const me = useLoad(() => loadMe(), []);
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  const [menuOpen, setMenuOpen] = useState(false);
  const orgSwitch = useAction(async (orgId: string) => {
    if (!me.data) return;
    await switchOrg(me.data, orgId);
    await me.reload();
  });
  const out = useAction(async () => {
    await signOut(me.data);
    location.replace('/login');
  });

  useEffect(() => setSignedOutHandler(toLogin), []);
  useEffect(() => {
    if (me.error?.status === 401) toLogin();
  }, [me.error]);
  // Another page: the main region takes the focus, so Tab goes on from the top of the new page
  // rather than from a link that is gone (the region stays while the page loads its data).
  // Not on the first load, where Tab starts at the top with the skip link.
  const page = route.parts.join('/');
  const shown = useRef<string | null>(null);
  useEffect(() => {
    setMenuOpen(false);
    if (shown.current !== null && shown.current !== page) main.current?.focus({ preventScroll: true });
    if (me.data) shown.current = page;
  }, [page, me.data]);

  if (!me.data) {
    return (
      <main id="main" class="boot">
        {me.error && me.error.status !== 401 ? (
          <>
            <h1>Wharf</h1>
            <ErrorBox error={me.error} />
            <button type="button" onClick={() => void me.reload()}>
              Try again
            </button>
          </>
        ) : (
          <Loading what="the dashboard" />
        )}
      </main>
    );
  }

  const data = me.data;
  const org = data.orgs.find((o) => o.id === data.activeOrgId);
  const context: MeContextValue = { me: data, org, switchOrg: (id) => orgSwitch.run(id).then(() => undefined), refresh: me.reload };
  const section = route.parts[0] ?? '';
  return (
    <MeContext.Provider value={context}>
      <button type="button" class="skip" onClick={() => main.current?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <a class="brand" href={link()}>
          ⚓ Wharf
        </a>
        <button type="button" class="menu secondary small" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <div class="who">
          <label class="org-switch">
            <span>Organization</span>
            <select value={data.activeOrgId ?? ''} disabled={orgSwitch.busy} onChange={(e) => void orgSwitch.run(e.currentTarget.value)}>
              {!data.activeOrgId && <option value="">None</option>}
              {data.orgs.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name}
                </option>
              ))}
            </select>
          </label>
          <span class="user" title={data.user.email ?? ''}>
            {data.user.name ?? data.user.email}
          </span>
          <button type="button" class="secondary small" onClick={() => void out.run()} disabled={out.busy}>
            Sign out
          </button>
        </div>
      </header>
      <ErrorBox error={orgSwitch.error ?? out.error} />
      <div class="layout">
        <nav id="nav" class={menuOpen ? 'nav open' : 'nav'} aria-label="Dashboard">
          <ul>
            {NAV.map((item) => (
              <li key={item.href}>
                <a href={item.href} aria-current={item.section === section ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
            {/* Wharf's own device flow is built-in identity's; with a provider, the CLI signs in there. */}
            {data.mode === 'builtin' && (
              <li class="sep">
                <a href="/device">Approve a device</a>
              </li>
            )}
            <li class={data.mode === 'builtin' ? '' : 'sep'}>
              <a href="/api/openapi.json">API reference</a>
            </li>
          </ul>
        </nav>
        <main id="main" ref={main} tabIndex={-1} key={data.activeOrgId ?? 'none'}>
          {!org ? <NoOrg /> : <Page parts={route.parts} />}
        </main>
      </div>
    </MeContext.Provider>
  );
}

function Page({ parts }: { parts: string[] }) {
  const [section, id] = parts;
  switch (section) {
    case undefined:
      return <Overview />;
    case 'apps':
      return id ? <AppDetail appId={id} /> : <Apps />;
    case 'sessions':
      return id ? <SessionDetail sessionId={id} /> : <Sessions />;
    case 'deliveries':
      return id ? <DispatchDetail dispatchId={id} /> : <Deliveries />;
    case 'tokens':
      return <PersonalTokens />;
    case 'org':
      return <Organization />;
    default:
      return (
        <>
          <h1 tabIndex={-1}>Not found</h1>
          <ErrorBox error={new ApiError(404, `The dashboard has no page ${location.hash}`)} />
          <a href={link()}>Back to the overview</a>
        </>
      );
  }
}

/** Signed in, but in no organization: create one, or accept an invitation. */
function NoOrg() {
  return (
    <>
      <h1 tabIndex={-1}>No organization yet</h1>
      <p>Everything in Wharf belongs to an organization. Create one, or accept an invitation someone sent to your email.</p>
      <Organization embedded />
    </>
  );
}
