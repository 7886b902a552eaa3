/** The identity plugin's config: `[plugins.identity]` and `[plugins.identity.oidc]`. */
import { z } from 'zod';
import type { ConfigProblem } from '../../core/plugin.ts';

const oidcConfig = z
  .strictObject({
    issuer: z
      .url()
      .optional()
      .describe(
        'Issuer URL of the OpenID Connect provider (required when mode = "oidc"); its discovery document is read from <issuer>/.well-known/openid-configuration.',
      ),
    audience: z.array(z.string().min(1)).default([]).describe('Accepted `aud` values of bearer tokens and session cookies. Empty: the `client_id` below.'),
    client_id: z
      .string()
      .min(1)
      .optional()
      .describe('OAuth client id of the command-line client at the provider (public client, device flow), announced by /api/cli/config.'),
    authorized_parties: z.array(z.string().min(1)).default([]).describe('When not empty, tokens whose `azp` claim is not one of these are refused.'),
    user_claim: z.string().min(1).default('sub').describe('Claim holding the stable user id.'),
    email_claim: z.string().min(1).default('email').describe('Claim holding the email address.'),
    name_claim: z.string().min(1).default('name').describe('Claim holding the display name.'),
    org_claim: z.string().min(1).default('org_id').describe('Claim holding the organization id; a dotted path reaches nested claims (Clerk: "o.id").'),
    org_name_claim: z
      .string()
      .min(1)
      .default('org_name')
      .describe('Claim holding the organization name, used when the organization is created on first sight (dotted paths allowed; Clerk: "o.slg").'),
    org_role_claim: z
      .string()
      .min(1)
      .default('org_role')
      .describe('Claim holding the role in the organization (owner, admin or member; Clerk\'s "org:admin" style is understood). Missing: member.'),
    auto_provision: z
      .boolean()
      .default(true)
      .describe('Create users, organizations and memberships the first time a valid token names them. Off: unknown users are refused (401).'),
    cookie: z.string().min(1).default('__session').describe("Cookie carrying the provider's session token for dashboard requests."),
    jwks_cache_seconds: z.int().min(10).default(600).describe('How long fetched signing keys are trusted before they are fetched again, in seconds.'),
  })
  .prefault({})
  .describe('External OpenID Connect mode.');

export const identityConfig = z.strictObject({
  mode: z
    .enum(['builtin', 'oidc'])
    .default('builtin')
    .describe(
      '"builtin": users, passwords and organizations kept by Wharf. "oidc": identities come from an external OpenID Connect provider ([plugins.identity.oidc]).',
    ),
  session_token_ttl_seconds: z
    .int()
    .min(60)
    .default(3600)
    .describe(
      'Lifetime of the signed __session cookie, in seconds. It is renewed once half of it has passed, so a dashboard in use stays signed in and one left idle this long signs out.',
    ),
  session_max_age_days: z.int().min(1).default(30).describe('A login session ends this long after sign-in however much it is used, in days.'),
  password_min_length: z.int().min(8).default(10).describe('Shortest password accepted, in characters.'),
  scrypt_cost: z
    .int()
    .min(1024)
    .refine((n) => (n & (n - 1)) === 0, 'must be a power of two')
    .default(32768)
    .describe('scrypt N (CPU/memory cost, a power of two) for new password hashes; r = 8, p = 1. Stored per hash, so raising it affects only new passwords.'),
  login_max_failures_per_account: z.int().min(1).default(5).describe('Failed sign-ins allowed per account per window before 429.'),
  login_max_failures_per_address: z.int().min(1).default(30).describe('Failed sign-ins allowed per client address per window before 429.'),
  login_window_seconds: z.int().min(1).default(900).describe('Window of the sign-in throttle, in seconds.'),
  setup_link_ttl_minutes: z.int().min(1).default(60).describe('How long the first-start setup link stays valid, in minutes.'),
  min_cli_version: z.string().default('0.1.0').describe('Oldest command-line client version the server supports (minCliVersion in /api/cli/config).'),
  cli_client_id: z.string().min(1).default('wharf-cli').describe('OAuth client id of the command-line client in built-in mode.'),
  device_code_ttl_seconds: z.int().min(1).default(600).describe('How long a device code can be approved and redeemed, in seconds.'),
  device_poll_interval_seconds: z.int().min(1).default(5).describe('Minimum seconds between two token polls of one device code; faster polls get slow_down.'),
  access_token_ttl_seconds: z.int().min(60).default(3600).describe('Lifetime of command-line access tokens (JWT), in seconds.'),
  refresh_token_ttl_days: z.int().min(1).default(30).describe('Lifetime of command-line refresh tokens, in days.'),
  invitation_ttl_days: z
    .int()
    .min(1)
    .max(365)
    .default(7)
    .describe('How long an invitation to an organization can be accepted, in days; inviting the same email again renews it.'),
  oidc: oidcConfig,
});

export type IdentityConfig = z.output<typeof identityConfig>;

/** What external mode needs besides the schema: checked by `wharf config check`, before anything starts. */
export function validateIdentity(config: IdentityConfig): ConfigProblem[] {
  if (config.mode !== 'oidc') return [];
  const { issuer, audience, client_id: clientId } = config.oidc;
  const problems: ConfigProblem[] = [];
  if (!issuer) {
    problems.push({
      key: 'oidc.issuer',
      message:
        'required when mode = "oidc": the URL of the OpenID Connect provider (its discovery document is read from <issuer>/.well-known/openid-configuration)',
    });
  } else if (!/^https?:$/.test(new URL(issuer).protocol)) {
    problems.push({ key: 'oidc.issuer', message: `must be an http(s) URL, got ${JSON.stringify(issuer)}` });
  }
  if (!audience.length && !clientId) {
    problems.push({
      key: 'oidc.audience',
      message: 'mode = "oidc" needs an audience (the aud value of the tokens Wharf accepts) or oidc.client_id (then the audience)',
    });
  }
  return problems;
}
