/**
 * `/oauth/*` in built-in mode: the device authorization endpoint (RFC 8628 §3.1), the token
 * endpoint (RFC 6749 §3.2: device code and refresh token grants), and the JSON approval a
 * signed-in dashboard user gives a device code. Parameters come form-encoded (as the RFCs say)
 * or as JSON; OAuth failures answer 400 `{error, error_description}` with the RFC's codes.
 */
import Router from '@koa/router';
import { z } from 'zod';
import { requirePrincipal } from '../../../core/auth.ts';
import { WharfError } from '../../../core/errors.ts';
import { validate } from '../../../core/validate.ts';
import { DEVICE_CODE_GRANT, OAuthError, REFRESH_TOKEN_GRANT, type DeviceFlow } from '../device.ts';

const param = z.string().min(1).max(2048);
const deviceCodeBody = z.object({ client_id: param, scope: z.string().max(1024).optional() });
const grantBody = z.object({ grant_type: param });
const deviceGrantBody = z.object({ device_code: param, client_id: param });
const refreshGrantBody = z.object({ refresh_token: param, client_id: param.optional() });
const approveBody = z.object({
  user_code: z.string().min(1).max(64),
  orgId: z.string().min(1).max(100).optional(),
  approve: z.boolean(),
});

/** `validate`, with a failure answered as the RFC's `invalid_request` naming the problem. */
function oauthParams<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  try {
    return validate(schema, body);
  } catch (err) {
    if (err instanceof WharfError && err.status === 400) throw new OAuthError('invalid_request', err.message);
    throw err;
  }
}

export function oauthRoutes(flow: DeviceFlow): Router {
  const router = new Router({ prefix: '/oauth' });

  // RFC 6749 §5.1: responses carrying tokens are never cached. OAuth errors are written here,
  // with their description; every other error goes to the plain envelope.
  router.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Pragma', 'no-cache');
    try {
      await next();
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err;
      ctx.log.debug({ code: err.message, description: err.description }, 'oauth request refused');
      ctx.status = err.status;
      ctx.body = err.body();
    }
  });

  router.post('/device/code', (ctx) => {
    const body = oauthParams(deviceCodeBody, ctx.request.body);
    ctx.body = flow.authorize({ clientId: body.client_id, scope: body.scope });
  });

  router.post('/token', async (ctx) => {
    const { grant_type: grantType } = oauthParams(grantBody, ctx.request.body);
    if (grantType === DEVICE_CODE_GRANT) {
      const body = oauthParams(deviceGrantBody, ctx.request.body);
      ctx.body = await flow.redeemDeviceCode({ deviceCode: body.device_code, clientId: body.client_id });
    } else if (grantType === REFRESH_TOKEN_GRANT) {
      const body = oauthParams(refreshGrantBody, ctx.request.body);
      ctx.body = await flow.refresh({ refreshToken: body.refresh_token, clientId: body.client_id });
    } else {
      throw new OAuthError('unsupported_grant_type', `Supported grant types: ${DEVICE_CODE_GRANT}, ${REFRESH_TOKEN_GRANT}`);
    }
  });

  router.post('/device/approve', async (ctx) => {
    const principal = await requirePrincipal(ctx, ['session'], 'dashboard session');
    const body = validate(approveBody, ctx.request.body);
    const decision = await flow.decide({ userCode: body.user_code, userId: principal.userId, orgId: body.orgId, approve: body.approve });
    ctx.body = decision.status === 'approved' ? { success: true, status: 'approved', orgId: decision.org.id } : { success: true, status: 'denied' };
  });

  return router;
}
