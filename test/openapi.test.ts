/** GET /api/openapi.json describes both Wharf APIs from the schemas that validate them. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from './helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startApp('[plugins.identity]\nscrypt_cost = 1024\n');
});
afterAll(() => app?.close());

describe('GET /api/openapi.json', () => {
  it('is OpenAPI 3.1, version 1.0.0, with the file-storage and messaging operations', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc).toMatchObject({ openapi: '3.1.0', info: { version: '1.0.0' } });
    const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const op of [
      'GET /api/apps',
      'POST /api/apps',
      'PATCH /api/apps',
      'DELETE /api/apps',
      'GET /api/tokens',
      'POST /api/tokens',
      'DELETE /api/tokens',
      'POST /api/tokens/validate',
      'GET /api/files',
      'POST /api/files',
      'DELETE /api/files',
      'GET /api/files/download',
      'POST /api/files/upload',
      'POST /api/send-message',
      'GET /api/status',
      'GET /api/whatsapp-sessions',
      'GET /api/dispatches',
      'POST /auth/login',
      'POST /auth/logout',
      'GET /auth/session',
      'PUT /auth/active-org',
      'GET /setup',
      'POST /setup',
      'GET /api/orgs',
      'POST /api/orgs',
      'POST /api/orgs/{org}/invitations',
      'GET /api/orgs/invitations',
      'POST /oauth/device/code',
      'POST /oauth/token',
      'POST /oauth/device/approve',
      'GET /device',
      'POST /device',
      'GET /api/cli/config',
      'GET /api/cli/me',
      'GET /healthz',
      'GET /readyz',
      'GET /metrics',
      'GET /api/openapi.json',
    ]) {
      expect(ops).toContain(op);
    }
    // The documented request body is the schema the route validates with.
    const createApp = doc.paths['/api/apps'].post.requestBody.content['application/json'].schema;
    expect(createApp.required).toEqual(['name']);
    expect(Object.keys(createApp.properties)).toEqual(['name', 'storageLimit']);
    expect(doc.components.securitySchemes).toHaveProperty('appToken');
    expect(doc.components.securitySchemes).toHaveProperty('cliToken');
    // OAuth's endpoints take form bodies, as the RFCs say.
    expect(Object.keys(doc.paths['/oauth/token'].post.requestBody.content)).toEqual(['application/json', 'application/x-www-form-urlencoded']);
    // Every operation names the shape of its errors.
    const envelopes = Object.values(doc.paths as Record<string, Record<string, { 'x-error-envelope': string }>>).flatMap((m) =>
      Object.values(m).map((o) => o['x-error-envelope']),
    );
    expect(new Set(envelopes)).toEqual(new Set(['plain', 'messaging']));
    expect(doc.components.securitySchemes).toHaveProperty('personalAccessToken');
  });

  it('documents every route the server answers: each registered route has its operation', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    const documented = new Set(
      Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
        Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
      ),
    );
    const routed = app.running.api.operations().map((o) => `${o.method} ${o.path}`);
    expect(routed.length).toBeGreaterThan(100);
    for (const op of routed) expect(documented.has(op), op).toBe(true);
    expect(documented.size).toBe(new Set(routed).size);
  });
});
