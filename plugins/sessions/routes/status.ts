/**
 * The key's session (session API key): `GET /api/status` (its connection status) and
 * `GET /api/user` (the account behind it).
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { NOT_CONNECTED, type RouteDeps } from './common.ts';

export function statusRoutes(deps: RouteDeps): RouteGroup[] {
  const { sessions } = deps;
  const auth = sessions.credentials.sessionKey;

  const status = deps.api.group({ prefixes: ['/api/status'], envelope: 'messaging' });
  status.route({
    method: 'GET',
    path: '/api/status',
    summary: "The connection status of the key's session: {status} (connecting, connected, disconnected, need_scan, logged_out, expired, failed)",
    tag: 'Session',
    auth,
    success: { schema: z.lazy(() => z.object({ status: z.string() })) },
    async handler(ctx, { auth }) {
      ctx.body = { status: auth.session.status };
    },
  });

  const user = deps.api.group({ prefixes: ['/api/user'], envelope: 'messaging' });
  user.route({
    method: 'GET',
    path: '/api/user',
    summary: "The account behind the key's session (id, lid, name, phone_number)",
    tag: 'Session',
    auth,
    errors: NOT_CONNECTED,
    async handler(ctx, { auth }) {
      const { session, network } = sessions.connected(auth);
      ctx.body = { success: true, data: await network.user(session) };
    },
  });

  return [status, user];
}
