/**
 * The identity plugin's credentials for route declarations, and the OpenAPI schemes they name:
 * a dashboard session (the `__session` cookie) and a signed-in user (that cookie or a
 * command-line OAuth token).
 */
import type { ApiRegistry, Credential } from '../../core/api.ts';
import type { DashboardPrincipal, UserPrincipal } from './types.ts';

/** The `__session` cookie of a signed-in browser. */
export const dashboardSession: Credential<DashboardPrincipal> = {
  kinds: ['session'],
  needs: 'dashboard session',
  schemes: ['dashboardSession'],
  load: (_ctx, principal) => principal as DashboardPrincipal,
};

/** A signed-in user: the dashboard cookie or a command-line OAuth token. */
export const signedInUser: Credential<UserPrincipal> = {
  kinds: ['session', 'oauth'],
  needs: 'signed-in user',
  schemes: ['dashboardSession', 'cliToken'],
  load: (_ctx, principal) => principal as UserPrincipal,
};

/** Any credential at all (`GET /api/cli/me` tells each kind who it is). */
export const anyCredential: Credential = {
  kinds: 'any',
  needs: 'credential',
  schemes: ['dashboardSession', 'cliToken', 'appToken', 'personalAccessToken', 'sessionApiKey'],
};

export function declareSchemes(api: ApiRegistry, cookie: string): void {
  api.scheme('dashboardSession', { type: 'apiKey', in: 'cookie', name: cookie, description: 'A signed-in dashboard session.' });
  api.scheme('cliToken', { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A command-line OAuth access token (device flow).' });
}
