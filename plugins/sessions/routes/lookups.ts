/**
 * Number lookups (session API key): `GET /api/on-whatsapp/{phone}`, `GET /api/lid-from-pn/{pn}`,
 * `GET /api/pn-from-lid/{lid}`.
 */
import { z } from 'zod';
import type { RouteGroup } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import { digitsOf, normalizePhone, participantJid } from '../networks/nodes.ts';
import { invalid, NOT_CONNECTED, type RouteDeps, success } from './common.ts';

export function lookupRoutes(deps: RouteDeps): RouteGroup {
  const { sessions } = deps;
  const group = deps.api.group({ prefixes: ['/api/on-whatsapp', '/api/lid-from-pn', '/api/pn-from-lid'], envelope: 'messaging' });
  const auth = sessions.credentials.sessionKey;
  const tag = 'Lookups';

  group.route({
    method: 'GET',
    path: '/api/on-whatsapp/:phone',
    summary: 'Whether a phone number has an account on the network, with its JID and LID',
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.object({ phone: z.string(), exists: z.boolean(), jid: z.string(), lid: z.string().nullable() }))) },
    errors: NOT_CONNECTED,
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const phone = normalizePhone(params.phone ?? '');
      if (!phone) throw invalid('phone', 'phone must be a phone number in E.164 format, for example +14155550123');
      const found = await network.onWhatsApp(session, phone);
      ctx.body = { success: true, data: { phone, exists: found.exists, jid: found.jid, lid: found.lid } };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/lid-from-pn/:pn',
    summary: 'The LID (…@lid) of a phone number',
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.object({ pn: z.string(), lid: z.string() }))) },
    errors: { 404: 'No LID known for it: `{success: false, error, message}`', ...NOT_CONNECTED },
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const pn = participantJid(params.pn ?? '');
      if (!pn) throw invalid('pn', 'pn must be a phone number in E.164 format or a phone JID (…@s.whatsapp.net)');
      const lid = await network.lidFromPn(session, pn);
      if (!lid) throw new WharfError('not_found', 'No LID is known for this phone number');
      ctx.body = { success: true, data: { pn, lid } };
    },
  });

  group.route({
    method: 'GET',
    path: '/api/pn-from-lid/:lid',
    summary: 'The phone number JID (…@s.whatsapp.net) behind a LID',
    tag,
    auth,
    success: { schema: z.lazy(() => success(z.object({ lid: z.string(), pn: z.string(), phone: z.string() }))) },
    errors: { 404: 'No phone number known for it: `{success: false, error, message}`', ...NOT_CONNECTED },
    async handler(ctx, { auth, params }) {
      const { session, network } = sessions.connected(auth);
      const match = /^(\d{6,20})(?:@lid)?$/.exec((params.lid ?? '').trim());
      if (!match) throw invalid('lid', 'lid must be a LID such as 123456789012345@lid');
      const lid = `${match[1]}@lid`;
      const pn = await network.pnFromLid(session, lid);
      if (!pn) throw new WharfError('not_found', 'No phone number is known for this LID');
      ctx.body = { success: true, data: { lid, pn, phone: `+${digitsOf(pn)}` } };
    },
  });

  return group;
}
