/**
 * `wharf login`: the OAuth 2.0 device authorization grant (RFC 8628) against the instance
 * (built-in identity) or against the identity provider it names (external OIDC), then the
 * tokens are saved for later commands.
 */
import pkg from '../package.json' with { type: 'json' };
import { normalizeInstance, readCredentials, writeCredentials, type InstanceCredentials } from './credentials.ts';
import { UnreachableError } from './errors.ts';
import { Client, ClientError, errorText, postForm, readJson } from './http.ts';

export interface Discovery {
  instanceUrl: string;
  idpFapiUrl: string | null;
  oauthClientId: string | null;
  minCliVersion: string;
  configured: boolean;
}

/** -1, 0, 1 comparing dotted version numbers (pre-release suffixes ignored). */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) =>
    v
      .replace(/^v/, '')
      .split(/[-+]/)[0]!
      .split('.')
      .map((n) => Number.parseInt(n, 10) || 0);
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: 'application/json' } });
  } catch (err) {
    throw new UnreachableError(new URL(url).origin, err);
  }
  return { status: res.status, body: await readJson(res) };
}

export async function discover(instance: string): Promise<Discovery> {
  const { status, body } = await getJson(`${instance}/api/cli/config`);
  const d = body as Discovery;
  if (status !== 200 || typeof d?.instanceUrl !== 'string')
    throw new ClientError(`${instance} is not a Wharf instance (GET /api/cli/config answered ${status})`);
  return d;
}

async function endpoints(instance: string, discovery: Discovery): Promise<{ device: string; token: string }> {
  const idp = discovery.idpFapiUrl;
  if (!idp || normalizeInstance(idp) === normalizeInstance(discovery.instanceUrl)) {
    return { device: `${instance}/oauth/device/code`, token: `${instance}/oauth/token` };
  }
  const { status, body } = await getJson(`${idp.replace(/\/+$/, '')}/.well-known/openid-configuration`);
  const meta = body as { device_authorization_endpoint?: string; token_endpoint?: string } | null;
  if (status !== 200 || !meta?.device_authorization_endpoint || !meta.token_endpoint) {
    throw new ClientError(`the identity provider ${idp} offers no device authorization endpoint`);
  }
  return { device: meta.device_authorization_endpoint, token: meta.token_endpoint };
}

export interface LoginOptions {
  instance: string;
  credentialsFile?: string;
  /** Where to tell the user what to open (stderr by default). */
  say(line: string): void;
  /** Polling interval floor, for tests. */
  minIntervalMs?: number;
}

export async function login(
  options: LoginOptions,
): Promise<{ userId: string; email: string | null; orgs: { id: string; slug: string | null; name: string }[] }> {
  const instance = normalizeInstance(options.instance);
  const discovery = await discover(instance);
  if (!discovery.configured || !discovery.oauthClientId) throw new ClientError(`${instance} has no command-line sign-in configured (oauthClientId is empty)`);
  if (compareVersions(pkg.version, discovery.minCliVersion) < 0) {
    throw new ClientError(`this wharf (${pkg.version}) is older than ${instance} supports (${discovery.minCliVersion}); upgrade it`);
  }
  const clientId = discovery.oauthClientId;
  const urls = await endpoints(instance, discovery);
  const start = await postForm(urls.device, { client_id: clientId, scope: 'openid email profile offline_access' });
  const grant = start.body as {
    device_code?: string;
    user_code?: string;
    verification_uri?: string;
    verification_uri_complete?: string;
    expires_in?: number;
    interval?: number;
  };
  if (start.status !== 200 || !grant.device_code || !grant.user_code || !grant.verification_uri) {
    throw new ClientError(`cannot start the sign-in: ${errorText(start.body, start.status)}`);
  }
  options.say(`Open ${grant.verification_uri_complete ?? grant.verification_uri} and confirm the code ${grant.user_code}`);
  let interval = Math.max((grant.interval ?? 5) * 1000, options.minIntervalMs ?? 0);
  const deadline = Date.now() + (grant.expires_in ?? 600) * 1000;
  for (;;) {
    await new Promise((r) => setTimeout(r, interval));
    if (Date.now() > deadline) throw new ClientError('the code expired before it was approved; run wharf login again');
    const { status, body } = await postForm(urls.token, {
      grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
      device_code: grant.device_code,
      client_id: clientId,
    });
    if (status === 200 && typeof body.access_token === 'string') {
      const credentials: InstanceCredentials = {
        accessToken: body.access_token,
        refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : null,
        expiresAt: Date.now() + Number(body.expires_in ?? 3600) * 1000,
        tokenEndpoint: urls.token,
        clientId,
        user: null,
      };
      const file = readCredentials(options.credentialsFile);
      file.instances[instance] = credentials;
      file.current = instance;
      writeCredentials(file, options.credentialsFile);
      const me = await new Client({ instance, credentialsFile: options.credentialsFile }).request<{
        userId: string;
        email: string | null;
        orgs: { id: string; slug: string | null; name: string }[];
      }>('GET', '/api/cli/me');
      file.instances[instance] = { ...credentials, user: { userId: me.userId, email: me.email } };
      writeCredentials(file, options.credentialsFile);
      return me;
    }
    const error = typeof body.error === 'string' ? body.error : '';
    if (error === 'authorization_pending') continue;
    if (error === 'slow_down') {
      interval += 5000;
      continue;
    }
    if (error === 'access_denied') throw new ClientError('the sign-in was denied');
    if (error === 'expired_token') throw new ClientError('the code expired before it was approved; run wharf login again');
    throw new ClientError(`sign-in failed: ${errorText(body, status)}`);
  }
}
