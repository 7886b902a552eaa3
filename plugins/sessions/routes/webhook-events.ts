/** `GET /api/webhook-events` (public): the event names a webhook can subscribe to, and their aliases. */
import { z } from 'zod';
import { PUBLIC, type RouteGroup } from '../../../core/api.ts';
import { EVENT_ALIASES, EVENT_NAMES } from '../events.ts';
import { type RouteDeps, success } from './common.ts';

export function webhookEventRoutes(deps: RouteDeps): RouteGroup {
  const group = deps.api.group({ prefixes: ['/api/webhook-events'], envelope: 'messaging' });
  group.route({
    method: 'GET',
    path: '/api/webhook-events',
    summary: 'The 22 event names a webhook can subscribe to, and the accepted aliases',
    tag: 'Webhooks',
    auth: PUBLIC,
    success: { schema: z.lazy(() => success(z.array(z.string())).extend({ aliases: z.record(z.string(), z.string()) })) },
    async handler(ctx) {
      ctx.body = { success: true, data: EVENT_NAMES, aliases: Object.fromEntries(EVENT_ALIASES) };
    },
  });
  return group;
}
