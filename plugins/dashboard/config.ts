/** The dashboard plugin's config: `[plugins.dashboard]` and `[plugins.dashboard.oidc]`. */
import { z } from 'zod';

/** How the dashboard signs in when identity comes from an external OpenID Connect provider. */
export const dashboardOidcConfig = z
  .strictObject({
    client_id: z
      .string()
      .min(1)
      .optional()
      .describe(
        'OAuth client id of the dashboard at the provider ([plugins.identity] mode = "oidc"): a public client allowed the authorization code flow with PKCE and the redirect URI <public_url>/login. Default: the command-line client\'s id ([plugins.identity.oidc] client_id).',
      ),
    scope: z.string().min(1).default('openid email profile').describe('Scopes the dashboard asks the provider for.'),
    resource: z
      .string()
      .min(1)
      .optional()
      .describe("Resource indicator (RFC 8707) sent with the authorization and token requests, so the provider issues an access token for Wharf's audience."),
    token: z
      .enum(['access_token', 'id_token'])
      .default('access_token')
      .describe(
        "Which token of the provider's answer the dashboard keeps in the cookie: the access token (a JWT for one of [plugins.identity.oidc] audience) or the ID token (its audience is the client id).",
      ),
    cookie: z.string().min(1).default('__session').describe('Cookie the token is kept in: the one [plugins.identity.oidc] cookie names.'),
  })
  .prefault({})
  .describe('Sign-in through an external OpenID Connect provider.');

export const dashboardConfig = z.strictObject({
  oidc: dashboardOidcConfig,
});

export type DashboardConfig = z.output<typeof dashboardConfig>;
