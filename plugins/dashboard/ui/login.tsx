/**
 * `/login`. Built-in identity: email and password, through `POST /auth/login` (which sets the
 * `__session` cookie). External OpenID Connect: the provider's own sign-in (authorization code
 * with PKCE, oidc.ts), whose token then travels in the `__session` cookie.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';
import { ErrorBox, Field, Loading } from './components.tsx';
import { useAction, useLoad } from './hooks.ts';
import { finishOidcSignIn, oidcSettings, startOidcSignIn } from './oidc.ts';
import { identityMode } from './session.ts';

/** Where to go after signing in: a dashboard page of this origin only. */
export function nextPage(): string {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  return next.startsWith('#/') ? `/${next}` : '/';
}

export function Login() {
  const mode = useLoad(() => identityMode(), []);
  useEffect(() => {
    document.title = 'Sign in · Wharf';
  }, []);
  return (
    <main class="login" id="main">
      <div class="login-box">
        <p class="brand" aria-hidden="true">
          ⚓ Wharf
        </p>
        <h1>Sign in</h1>
        {mode.error && <ErrorBox error={mode.error} />}
        {!mode.data && !mode.error && <Loading what="the sign-in" />}
        {mode.data?.mode === 'builtin' && <PasswordForm />}
        {mode.data?.mode === 'oidc' && <ProviderSignIn issuer={mode.data.config.idpFapiUrl ?? ''} clientId={mode.data.config.oauthClientId} />}
        {mode.data?.mode === 'builtin' && (
          <p class="aside">
            Signing in a command-line client? <a href="/device">Approve a device</a>.
          </p>
        )}
      </div>
    </main>
  );
}

function PasswordForm() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useAction(async () => {
    await api('POST', '/auth/login', { email, password }, { keepSignedIn: true });
    location.replace(nextPage());
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void signIn.run();
      }}
    >
      <Field label="Email">
        <input type="email" name="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </Field>
      <Field label="Password">
        <input type="password" name="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
      </Field>
      <ErrorBox error={signIn.error} />
      <button type="submit" class="wide" disabled={signIn.busy}>
        {signIn.busy ? 'Signing in…' : 'Sign in'}
      </button>
      <p class="aside">
        No account yet? The first owner is created with the setup link <code>wharf serve</code> printed on its first start; later users with{' '}
        <code>wharf admin create-user</code>, then invited to an organization.
      </p>
    </form>
  );
}

function ProviderSignIn({ issuer, clientId }: { issuer: string; clientId: string | null }) {
  const params = new URLSearchParams(location.search);
  const returning = params.has('code') || params.has('error');
  const finish = useLoad(async () => {
    if (!returning) return false;
    await finishOidcSignIn(params);
    location.replace(sessionStorage.getItem('wharf.next') ?? '/');
    return true;
  }, []);
  const start = useAction(() => startOidcSignIn(issuer, oidcSettings(clientId), nextPage()));
  if (returning && !finish.error) return <Loading what="your sign-in" />;
  return (
    <div>
      <p>
        This Wharf signs users in with <strong>{new URL(issuer, location.href).host}</strong>.
      </p>
      <ErrorBox error={finish.error ?? start.error} />
      <button type="button" class="wide" onClick={() => void start.run()} disabled={start.busy}>
        Sign in with {new URL(issuer, location.href).host}
      </button>
    </div>
  );
}
