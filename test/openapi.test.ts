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
    const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    for (const op of [
      'GET /api/apps', 'POST /api/apps', 'PATCH /api/apps', 'DELETE /api/apps',
      'GET /api/tokens', 'POST /api/tokens', 'DELETE /api/tokens', 'POST /api/tokens/validate',
      'GET /api/files', 'POST /api/files', 'DELETE /api/files', 'GET /api/files/download', 'POST /api/files/upload',
      'POST /api/send-message', 'GET /api/status', 'GET /api/whatsapp-sessions', 'GET /api/dispatches',
    ]) {
      expect(ops).toContain(op);
    }
    // The documented request body is the schema the route validates with.
    const createApp = doc.paths['/api/apps'].post.requestBody.content['application/json'].schema;
    expect(createApp.required).toEqual(['name']);
    expect(Object.keys(createApp.properties)).toEqual(['name', 'storageLimit']);
    expect(doc.components.securitySchemes).toHaveProperty('appToken');
    expect(doc.components.securitySchemes).toHaveProperty('personalAccessToken');
  });
});
