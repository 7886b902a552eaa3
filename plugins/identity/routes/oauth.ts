/**
 * `/oauth/*` in built-in mode: the device authorization endpoint (RFC 8628 §3.1), the token
 * endpoint (RFC 6749 §3.2: device code and refresh token grants), and the JSON approval a
 * signed-in dashboard user gives a device code. Parameters come form-encoded (as the RFCs say)
 * or as JSON; the two RFC endpoints answer every refusal as 400 `{error, error_description}` with
 * the RFC's codes (a malformed parameter is `invalid_request`).
 */
import { z } from 'zod';
import { type ApiRegistry, PUBLIC } from '../../../core/api.ts';
import { WharfError } from '../../../core/errors.ts';
import type { RouteGroup } from '../../../core/api.ts';
import { validate } from '../../../core/validate.ts';
import { dashboardSession } from '../credentials.ts';
import { DEVICE_CODE_GRANT, OAuthError, REFRESH_TOKEN_GRANT, type DeviceFlow } from '../device.ts';
import { TAG as tag } from './auth.ts';

const param = z.lazy(() => z.string().min(1).max(2048));
const deviceCodeBody = z.lazy(() => z.object({ client_id: param, scope: z.string().max(1024).optional() }));
const tokenBody = z.lazy(() =>
  z.object({
    grant_type: param.describe(`${DEVICE_CODE_GRANT} or ${REFRESH_TOKEN_GRANT}`),
    device_code: param.optional().describe('With the device code grant'),
    refresh_token: param.optional().describe('With the refresh token grant'),
    client_id: param.optional().describe('Required with the device code grant'),
  }),
);
const deviceGrantBody = z.lazy(() => z.object({ device_code: param, client_id: param }));
const approveBody = z.lazy(() =>
  z.object({
    user_code: z.string().min(1).max(64),
    orgId: z.string().min(1).max(100).optional(),
    approve: z.boolean(),
  }),
);
const FORM = ['application/x-www-form-urlencoded'];
const OAUTH_ERRORS = {
  400: 'RFC 6749 §5.2: `{error, error_description?}` (`invalid_request`, `invalid_client`, `invalid_grant`, `unsupported_grant_type`, `authorization_pending`, `slow_down`, `access_denied`, `expired_token`)',
};

export function oauthRoutes(api: ApiRegistry, flow: DeviceFlow): RouteGroup[] {
  const rfc = api.group({ prefixes: ['/oauth'], envelope: 'plain' });
  // RFC 6749 §5.1: responses carrying tokens are never cached. Refusals are written in the RFC's
  // shape here, validation failures included; anything else goes to the plain envelope.
  rfc.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Pragma', 'no-cache');
    try {
      await next();
    } catch (thrown) {
      const err =
        thrown instanceof WharfError && ['bad_request', 'invalid_json', 'unsupported_media_type'].includes(thrown.code) && !(thrown instanceof OAuthError)
          ? new OAuthError('invalid_request', thrown.message)
          : thrown;
      if (!(err instanceof OAuthError)) throw err;
      ctx.log.debug({ code: err.message, description: err.description }, 'oauth request refused');
      ctx.status = err.status;
      ctx.body = err.body();
    }
  });

  rfc.route({
    method: 'POST',
    path: '/oauth/device/code',
    summary: 'Device authorization request (RFC 8628 §3.1): a device code, a user code and where to approve it',
    tag,
    auth: PUBLIC,
    body: deviceCodeBody,
    bodyTypes: FORM,
    errors: OAUTH_ERRORS,
    async handler(ctx, { body }) {
      ctx.body = await flow.authorize({ clientId: body.client_id, scope: body.scope });
    },
  });

  rfc.route({
    method: 'POST',
    path: '/oauth/token',
    summary: 'Token endpoint (RFC 6749 §3.2): redeem an approved device code, or rotate a refresh token',
    tag,
    auth: PUBLIC,
    body: tokenBody,
    bodyTypes: FORM,
    errors: OAUTH_ERRORS,
    async handler(ctx, { body }) {
      if (body.grant_type === DEVICE_CODE_GRANT) {
        const grant = validate(deviceGrantBody, body);
        ctx.body = await flow.redeemDeviceCode({ deviceCode: grant.device_code, clientId: grant.client_id });
      } else if (body.grant_type === REFRESH_TOKEN_GRANT) {
        if (!body.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required');
        ctx.body = await flow.refresh({ refreshToken: body.refresh_token, clientId: body.client_id });
      } else {
        throw new OAuthError('unsupported_grant_type', `Supported grant types: ${DEVICE_CODE_GRANT}, ${REFRESH_TOKEN_GRANT}`);
      }
    },
  });

  const approval = api.group({ prefixes: ['/oauth/device/approve'], envelope: 'plain' });
  approval.route({
    method: 'POST',
    path: '/oauth/device/approve',
    summary: "Approve or deny a device's user code as the signed-in dashboard user, in one of its organizations",
    tag,
    auth: dashboardSession,
    body: approveBody,
    errors: {
      403: 'Not a member of that organization: `{error}`',
      404: 'Unknown or expired code: `{error}`',
      409: 'Already decided: `{error}`',
      429: 'Ten wrong codes in ten minutes: `{message, retry_after}`',
    },
    async handler(ctx, { body, auth: principal }) {
      const decision = await flow.decide({ userCode: body.user_code, userId: principal.userId, orgId: body.orgId, approve: body.approve });
      ctx.body = decision.status === 'approved' ? { success: true, status: 'approved', orgId: decision.org.id } : { success: true, status: 'denied' };
    },
  });

  return [rfc, approval];
}
