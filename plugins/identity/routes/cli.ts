/** `GET /api/cli/config` (discovery, public) and `GET /api/cli/me` (who the caller is). */
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from '../../../core/api.ts';
import type { AuthRegistry } from '../../../core/auth.ts';
import { authenticate } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { anyCredential } from '../credentials.ts';
import type { IdentityStore } from '../store.ts';
import type { UserPrincipal } from '../types.ts';
import { TAG as tag } from './auth.ts';

export interface CliDiscovery {
  instanceUrl: string;
  idpFapiUrl: string | null;
  oauthClientId: string | null;
  minCliVersion: string;
  configured: boolean;
}

const discoverySchema = z.lazy(() =>
  z.object({
    instanceUrl: z.string(),
    idpFapiUrl: z.string().nullable(),
    oauthClientId: z.string().nullable(),
    minCliVersion: z.string(),
    configured: z.boolean(),
  }),
);

export function cliRoutes(api: ApiRegistry, store: IdentityStore, auth: AuthRegistry, discovery: () => CliDiscovery): RouteGroup {
  const group = api.group({ prefixes: ['/api/cli'], envelope: 'plain' });

  group.route({
    method: 'GET',
    path: '/api/cli/config',
    summary: 'Discovery for the command-line client: the instance, the OAuth client and the oldest supported client version',
    tag,
    auth: PUBLIC,
    success: { schema: discoverySchema },
    handler(ctx) {
      ctx.body = discovery();
    },
  });

  group.route({
    method: 'GET',
    path: '/api/cli/me',
    summary: 'Who the credential is: a user (kind session or oauth) with its organizations, or an app token (kind appToken)',
    tag,
    auth: anyCredential,
    errors: { 403: 'A credential with no identity to show: `{error}`' },
    async handler(ctx, { auth: principal }) {
      if (principal.kind === 'session' || principal.kind === 'oauth') {
        const user = principal as UserPrincipal;
        ctx.body = {
          kind: user.kind,
          userId: user.userId,
          email: user.email,
          name: user.name,
          orgs: (await store.orgsOf(user.userId)).map(({ id, slug, name }) => ({ id, slug, name })),
        };
        return;
      }
      const described = await auth.describe(principal, (await authenticate(ctx)).resolver);
      if (!described) throw new WharfError('forbidden', 'This credential has no identity to show');
      ctx.body = described;
    },
  });

  return group;
}
