/**
 * External OpenID Connect mode (`[plugins.identity] mode = "oidc"`): identities come from a
 * provider (Keycloak, Authentik, Zitadel, Clerk, ...) instead of Wharf's own passwords.
 *
 * - At setup the provider's discovery document is read from
 *   `<issuer>/.well-known/openid-configuration`; an unreachable provider or a malformed document
 *   fails the start with a message naming the issuer.
 * - Bearer tokens that look like JWTs (principal kind `oauth`) and the dashboard cookie
 *   (`oidc.cookie`, kind `session`, no server-side session row) are verified with jose against
 *   the provider's JWKS (fetched lazily, cached `jwks_cache_seconds`): signature, `iss`, `aud`,
 *   `exp` (required) and `nbf`, and the `azp` allow-list when one is configured.
 * - Claims are mapped to a user, an organization and a role; users, organizations and
 *   memberships are created on first sight when `auto_provision` is on.
 * - The only outbound requests go to the issuer's discovery document and its `jwks_uri`.
 *
 * A credential that fails any check resolves to null (401); so does one that cannot be checked
 * because the provider's keys cannot be fetched (logged as a warning): never a 500.
 */
import type { Context } from 'koa';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { ApiRegistry } from '../../core/api.ts';
import type { AuthRegistry } from '../../core/auth.ts';
import type { CoreConfig } from '../../core/config.ts';
import type { Logger } from '../../core/logger.ts';
import type { PluginInstance } from '../../core/plugin.ts';
import { JWT_SHAPE } from './access-tokens.ts';
import type { IdentityConfig } from './config.ts';
import { declareSchemes } from './credentials.ts';
import { crossSiteGuard } from './guards.ts';
import { cliRoutes } from './routes/cli.ts';
import { orgRoutes } from './routes/orgs.ts';
import type { IdentityStore } from './store.ts';
import type { IdentityService, OAuthPrincipal, Org, Role, DashboardPrincipal, User, UserPrincipal } from './types.ts';

const DISCOVERY_TIMEOUT_MS = 10_000;
const JWKS_TIMEOUT_MS = 5_000;
/** Accepted clock difference between Wharf and the provider for `exp`, `nbf` and `iat`. */
const CLOCK_TOLERANCE_SECONDS = 5;
/** Asymmetric signatures only: a JWKS never carries the shared secret an HS* token would need. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
const VERIFIED_CACHE_LIMIT = 10_000;
const OUTAGE_LOG_EVERY_MS = 10_000;
const MAX_ID_LENGTH = 255;

/** What Wharf uses of the provider's discovery document. */
export interface ProviderMetadata {
  issuer: string;
  jwksUri: string;
}

/**
 * Reads and checks `<issuer>/.well-known/openid-configuration` (OpenID Connect Discovery 1.0):
 * HTTP 200, JSON, `issuer` exactly the configured one, an http(s) `jwks_uri`. Redirects are not
 * followed. Throws an Error naming the issuer otherwise.
 */
async function discoverProvider(issuer: string): Promise<ProviderMetadata> {
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const fail = (why: string) => new Error(`OpenID provider ${issuer}: ${why}`);
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS) });
  } catch (err) {
    throw fail(`unreachable, GET ${url} failed (${describeFetchError(err)})`);
  }
  if (res.status !== 200) {
    await res.body?.cancel();
    const redirect = res.status >= 300 && res.status < 400 ? `, redirects are not followed (Location: ${res.headers.get('location') ?? 'none'})` : '';
    throw fail(`GET ${url} answered HTTP ${res.status}${redirect}; expected 200 with the discovery document`);
  }
  let doc: unknown;
  try {
    doc = await res.json();
  } catch {
    throw fail(`the discovery document at ${url} is not JSON`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw fail(`the discovery document at ${url} is not a JSON object`);
  const { issuer: announced, jwks_uri: jwksUri } = doc as Record<string, unknown>;
  if (announced !== issuer) {
    throw fail(
      `the discovery document names issuer ${JSON.stringify(announced)}, not the configured one; tokens carry the provider's own value, so set plugins.identity.oidc.issuer to exactly it`,
    );
  }
  if (typeof jwksUri !== 'string' || !isHttpUrl(jwksUri)) throw fail(`the discovery document at ${url} has no http(s) jwks_uri`);
  return { issuer, jwksUri };
}

function isHttpUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === 'https:' || protocol === 'http:';
  } catch {
    return false;
  }
}

function describeFetchError(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${DISCOVERY_TIMEOUT_MS / 1000} s`;
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

/** The provider's keys could not be fetched: the token was not judged. */
class ProviderUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProviderUnavailableError';
  }
}

/** A token that verified but is refused by a rule of Wharf's (the `azp` allow-list). */
class TokenRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenRefusedError';
  }
}

export interface VerifierOptions {
  issuer: string;
  jwksUri: string;
  /** Accepted `aud` values (any one of them). */
  audience: readonly string[];
  /** When not empty, `azp` (or, lacking it, RFC 9068's `client_id`) must be one of these. */
  authorizedParties: readonly string[];
  jwksCacheSeconds: number;
}

/** Verifies the provider's JWTs against its JWKS, and remembers verified ones until they expire. */
class OidcTokenVerifier {
  readonly #options: VerifierOptions;
  readonly #getKey: JWTVerifyGetKey;
  readonly #verified = new Map<string, JWTPayload>();

  constructor(options: VerifierOptions) {
    this.#options = options;
    const remote = createRemoteJWKSet(new URL(options.jwksUri), {
      cacheMaxAge: options.jwksCacheSeconds * 1000,
      timeoutDuration: JWKS_TIMEOUT_MS,
    });
    this.#getKey = async (header, token) => {
      try {
        return await remote(header, token);
      } catch (err) {
        // A key the set does not have (or has twice), or an algorithm jose does not know: the token's fault.
        if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys || err instanceof joseErrors.JOSENotSupported) {
          throw err;
        }
        // Anything else happened while fetching the key set: the provider's.
        throw new ProviderUnavailableError(`fetching the provider's keys from ${options.jwksUri} failed: ${describeFetchError(err)}`, { cause: err });
      }
    };
  }

  /**
   * The payload of a valid token. Throws a jose error (bad signature, expired, wrong issuer or
   * audience, malformed), TokenRefusedError (azp) or ProviderUnavailableError (keys unreachable).
   */
  async verify(token: string): Promise<JWTPayload> {
    const now = Math.floor(Date.now() / 1000);
    const cached = this.#verified.get(token);
    if (cached) {
      if ((cached.exp ?? 0) + CLOCK_TOLERANCE_SECONDS > now) return cached;
      this.#verified.delete(token);
    }
    const { payload } = await jwtVerify(token, this.#getKey, {
      issuer: this.#options.issuer,
      audience: [...this.#options.audience],
      algorithms: ALGORITHMS,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['exp'],
    });
    const parties = this.#options.authorizedParties;
    if (parties.length) {
      const party = typeof payload.azp === 'string' ? payload.azp : typeof payload.client_id === 'string' ? payload.client_id : undefined;
      if (!party || !parties.includes(party)) throw new TokenRefusedError(`authorized party ${JSON.stringify(party ?? null)} is not allowed`);
    }
    if (this.#verified.size >= VERIFIED_CACHE_LIMIT) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(token, payload);
    return payload;
  }
}

/**
 * A claim by name, or by dotted path into nested objects (`o.id`). A claim whose own name
 * contains dots (`https://example.com/org`) is found by that name first.
 */
export function claimAt(claims: Readonly<Record<string, unknown>>, path: string): unknown {
  if (Object.hasOwn(claims, path)) return claims[path];
  let node: unknown = claims;
  for (const part of path.split('.')) {
    if (!node || typeof node !== 'object' || Array.isArray(node) || !Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/**
 * A role claim as a Wharf role: `owner`, `admin`, `member`, Clerk's `org:admin` / `org:member`
 * (any case). Other strings (custom roles) are `member`; no string at all is null (not stated).
 */
export function roleFromClaim(value: unknown): Role | null {
  if (typeof value !== 'string' || !value.trim()) return null;
  const role = value.trim().toLowerCase().replace(/^org:/, '');
  return role === 'owner' || role === 'admin' ? role : 'member';
}

function idClaim(value: unknown): string | null {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value !== 'string') return null;
  const id = value.trim();
  return id && id.length <= MAX_ID_LENGTH ? id : null;
}

function textClaim(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return null;
  const text = value.trim();
  return text ? text.slice(0, max) : null;
}

function emailClaim(value: unknown): string | null {
  const email = typeof value === 'string' ? value.trim() : '';
  return email.length <= 320 && /^[^\s@]+@[^\s@]+$/.test(email) ? email : null;
}

/** What a verified token says about its user. */
export interface MappedClaims {
  /** `<issuer>|<user claim>`. */
  externalId: string;
  email: string | null;
  name: string | null;
  /** The organization the token acts in: the provider's id, `<issuer>|<id>`, its name and the role. */
  org: { id: string; externalId: string; name: string | null; role: Role | null } | null;
}

function mapClaims(payload: Readonly<Record<string, unknown>>, config: IdentityConfig['oidc'], issuer: string): MappedClaims | null {
  const subject = idClaim(claimAt(payload, config.user_claim));
  if (!subject) return null;
  const orgId = idClaim(claimAt(payload, config.org_claim));
  return {
    externalId: `${issuer}|${subject}`,
    email: emailClaim(claimAt(payload, config.email_claim)),
    name: textClaim(claimAt(payload, config.name_claim), 200),
    org: orgId
      ? {
          id: orgId,
          externalId: `${issuer}|${orgId}`,
          name: textClaim(claimAt(payload, config.org_name_claim), 100),
          role: roleFromClaim(claimAt(payload, config.org_role_claim)),
        }
      : null,
  };
}

/** The user behind a token and the organization it acts in. */
export interface Account {
  user: User;
  orgId: string | null;
  role: Role | null;
}

/**
 * Turns mapped claims into Wharf's rows. Reads first and writes only when something is missing
 * or changed, in one transaction; all of it synchronous, so two first requests of one user
 * cannot both create it.
 */
class OidcAccounts {
  readonly #store: IdentityStore;
  readonly #autoProvision: boolean;
  readonly #log: Logger;

  constructor(store: IdentityStore, options: { autoProvision: boolean; log: Logger }) {
    this.#store = store;
    this.#autoProvision = options.autoProvision;
    this.#log = options.log;
  }

  /** The account for the claims, or null when the user is unknown and provisioning is off. */
  async account(claims: MappedClaims): Promise<Account | null> {
    const store = this.#store;
    const known = await store.userByExternalId(claims.externalId);
    if (!known && !this.#autoProvision) return null;
    // A claim the token lacks leaves what is stored; an email another user has is not taken over.
    const holder = claims.email ? (await store.credentialsByEmail(claims.email))?.user : undefined;
    const emailTaken = !!holder && holder.id !== known?.id;
    const email = claims.email && !emailTaken ? claims.email : claims.email ? null : (known?.email ?? null);
    const name = claims.name ?? known?.name ?? null;
    let org = claims.org ? await store.orgByExternalId(claims.org.externalId) : undefined;
    let role = known && org ? await store.role(known.id, org.id) : undefined;

    let user = known;
    const userStale = !known || known.email !== email || known.name !== name;
    const orgStale =
      this.#autoProvision &&
      !!claims.org &&
      (!org || !role || (claims.org.name !== null && claims.org.name !== org.name) || (claims.org.role !== null && claims.org.role !== role));
    if (userStale || orgStale) {
      if (emailTaken)
        this.#log.warn(
          { external_id: claims.externalId, holder_id: holder!.id },
          'the email from the OpenID provider belongs to another Wharf user; stored without it',
        );
      ({ user, org, role } = await store.transaction((tx) => this.#write(tx, claims, email, name)));
    }
    if (claims.org) return { user: user!, orgId: org && role ? org.id : null, role: (org && role) || null };
    // The token names no organization: act in the user's first one, as a fresh sign-in does in built-in mode.
    const first = (await store.orgsOf(user!.id))[0];
    return { user: user!, orgId: first?.id ?? null, role: first?.role ?? null };
  }

  /** Creates or updates the user, and (provisioning on) the organization and membership; inside a transaction. */
  async #write(
    store: IdentityStore,
    claims: MappedClaims,
    email: string | null,
    name: string | null,
  ): Promise<{ user: User; org: Org | undefined; role: Role | undefined }> {
    let user = await store.userByExternalId(claims.externalId);
    if (!user) {
      user = await store.insertUser({ email, name, passwordHash: null, externalId: claims.externalId });
      this.#log.info({ user_id: user.id, external_id: claims.externalId }, 'user created from the OpenID provider');
    } else if (user.email !== email || user.name !== name) {
      await store.updateProfile(user.id, email, name);
      user = { ...user, email, name };
    }
    const wanted = claims.org;
    if (!wanted) return { user, org: undefined, role: undefined };
    let org = await store.orgByExternalId(wanted.externalId);
    if (!this.#autoProvision) return { user, org, role: org && (await store.role(user.id, org.id)) };
    if (!org) {
      org = await store.insertOrg({ name: wanted.name ?? wanted.id.slice(0, 100), externalId: wanted.externalId });
      this.#log.info({ org_id: org.id, external_id: wanted.externalId }, 'organization created from the OpenID provider');
    } else if (wanted.name !== null && wanted.name !== org.name) {
      await store.renameOrg(org.id, wanted.name);
      org = { ...org, name: wanted.name };
    }
    const current = await store.role(user.id, org.id);
    const role = wanted.role ?? current ?? 'member';
    if (current !== role) await store.setMember(org.id, user.id, role);
    return { user, org, role };
  }
}

export interface OidcDeps {
  config: IdentityConfig;
  core: CoreConfig;
  store: IdentityStore;
  identity: IdentityService;
  auth: AuthRegistry;
  api: ApiRegistry;
  log: Logger;
  /** `X-Service-Org`, after a membership check (index.ts's `withOrgOverride`). */
  orgOverride<P extends UserPrincipal>(principal: P, ctx: Context, store: IdentityStore): Promise<P>;
}

/** Reads the provider's discovery document, registers the resolvers and returns the plugin's parts. */
export async function setupOidc(deps: OidcDeps): Promise<PluginInstance<IdentityService>> {
  const { config, core, store, identity, auth, log } = deps;
  const oidc = config.oidc;
  // An http(s) issuer and an audience (or a client id) are required by validateIdentity (config.ts).
  const issuer = oidc.issuer ?? '';
  const audience = oidc.audience.length ? oidc.audience : oidc.client_id ? [oidc.client_id] : [];
  const { hostname, protocol } = new URL(issuer);
  if (protocol === 'http:' && !['localhost', '127.0.0.1', '[::1]'].includes(hostname)) {
    log.warn({ issuer }, 'the OpenID provider is reached over plain http: its keys and discovery document can be tampered with on the way');
  }

  const metadata = await discoverProvider(issuer);
  const verifier = new OidcTokenVerifier({
    issuer,
    jwksUri: metadata.jwksUri,
    audience,
    authorizedParties: oidc.authorized_parties,
    jwksCacheSeconds: oidc.jwks_cache_seconds,
  });
  const accounts = new OidcAccounts(store, { autoProvision: oidc.auto_provision, log });
  let lastOutageLog = 0;

  async function resolve(kind: 'oauth' | 'session', token: string, ctx: Context): Promise<UserPrincipal | null> {
    if (!JWT_SHAPE.test(token)) return null;
    let payload: JWTPayload;
    try {
      payload = await verifier.verify(token);
    } catch (err) {
      if (err instanceof ProviderUnavailableError) {
        if (Date.now() - lastOutageLog > OUTAGE_LOG_EVERY_MS) {
          lastOutageLog = Date.now();
          ctx.log.warn(
            { issuer, jwks_uri: metadata.jwksUri, reason: err.message },
            'OpenID provider unreachable: credentials cannot be verified and are refused',
          );
        }
      } else {
        ctx.log.debug({ kind, reason: (err as Error).message, code: (err as { code?: string }).code }, 'OpenID token refused');
      }
      return null;
    }
    const claims = mapClaims(payload, oidc, issuer);
    if (!claims) {
      ctx.log.debug({ kind, claim: oidc.user_claim }, 'OpenID token refused: no usable user claim');
      return null;
    }
    const account = await accounts.account(claims);
    if (!account) {
      ctx.log.debug({ kind, external_id: claims.externalId }, 'OpenID token refused: unknown user and auto_provision is off');
      return null;
    }
    const { user, orgId, role } = account;
    const principal = { kind, userId: user.id, email: user.email, name: user.name, orgId, role } as UserPrincipal;
    return deps.orgOverride(principal, ctx, store);
  }

  auth.register({
    name: 'identity:oidc-bearer',
    source: { bearer: (token) => JWT_SHAPE.test(token) },
    resolve: (token, ctx) => resolve('oauth', token, ctx) as Promise<OAuthPrincipal | null>,
  });
  auth.register({
    name: 'identity:oidc-cookie',
    source: { cookie: oidc.cookie },
    resolve: (token, ctx) => resolve('session', token, ctx) as Promise<DashboardPrincipal | null>,
  });

  log.info(
    { issuer, jwks_uri: metadata.jwksUri, audience, cookie: oidc.cookie, auto_provision: oidc.auto_provision },
    'identity from an external OpenID Connect provider',
  );
  declareSchemes(deps.api, oidc.cookie);

  return {
    service: identity,
    middleware: [
      {
        name: 'identity:cross-site-guard',
        priority: 'guards',
        fn: crossSiteGuard({ publicOrigin: new URL(core.server.public_url).origin, cookieNames: [oidc.cookie], formPaths: [] }),
      },
    ],
    routes: [
      // Invitations match accounts by email, and this mode never links accounts by email: the
      // provider says who belongs to its organizations.
      orgRoutes(deps.api, store, identity, {
        unavailable: `Not available: this instance takes organization memberships from its OpenID Connect provider (${issuer}); invitations are off`,
      }),
      cliRoutes(deps.api, store, auth, () => ({
        instanceUrl: core.server.public_url,
        idpFapiUrl: issuer,
        oauthClientId: oidc.client_id ?? null,
        minCliVersion: config.min_cli_version,
        configured: oidc.client_id !== undefined,
      })),
      // Password sign-in, the setup link and Wharf's own device flow are not served here: their
      // paths answer 404 saying why.
      deps.api.group({
        prefixes: BUILTIN_ONLY_PREFIXES,
        envelope: 'plain',
        notFound: `Not available: this instance signs users in with its OpenID Connect provider (${issuer}); password sign-in, the setup link and Wharf's own device flow are off`,
      }),
    ],
  };
}

/** What only built-in mode serves: password sign-in, the setup link, Wharf's own device flow. */
const BUILTIN_ONLY_PREFIXES = ['/auth', '/setup', '/device', '/oauth'];
