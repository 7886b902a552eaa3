/** `GET /api/cli/config` (discovery, public) and `GET /api/cli/me` (who the caller is). */
import Router from '@koa/router';
import { authenticate, type AuthRegistry } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import type { IdentityStore } from '../store.ts';
import type { UserPrincipal } from '../types.ts';

export interface CliDiscovery {
  instanceUrl: string;
  idpFapiUrl: string | null;
  oauthClientId: string | null;
  minCliVersion: string;
  configured: boolean;
}

export function cliRoutes(store: IdentityStore, auth: AuthRegistry, discovery: () => CliDiscovery): Router {
  const router = new Router({ prefix: '/api/cli' });

  router.get('/config', (ctx) => {
    ctx.body = discovery();
  });

  router.get('/me', async (ctx) => {
    const result = await authenticate(ctx);
    const principal = result.principal as (UserPrincipal | { kind: string }) | undefined;
    if (!principal) throw new WharfError('unauthorized', result.failure === 'invalid' ? 'Invalid or expired credential' : 'Authentication required');
    if (principal.kind === 'session' || principal.kind === 'oauth') {
      const user = principal as UserPrincipal;
      ctx.body = {
        kind: user.kind,
        userId: user.userId,
        email: user.email,
        name: user.name,
        orgs: store.orgsOf(user.userId).map(({ id, slug, name }) => ({ id, slug, name })),
      };
      return;
    }
    const described = auth.describe(result.principal!, result.resolver);
    if (!described) throw new WharfError('forbidden', 'This credential has no identity to show');
    ctx.body = described;
  });

  return router;
}
