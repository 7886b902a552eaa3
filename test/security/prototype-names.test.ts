/**
 * Names of Object.prototype's members (`constructor`, `__proto__`, `toString`, `hasOwnProperty`)
 * sent where the server looks names up: unknown body and query fields, event names, XML entities,
 * S3 query parameters. Each must be an ordinary unknown name: a 4xx in the route's envelope, never
 * a 500 and never a stored `null`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseXml } from '../../plugins/storage/drivers/fs/xml.ts';
import { canonicalEvent } from '../../plugins/sessions/events.ts';
import { fieldErrors } from '../../core/validate.ts';
import { z } from 'zod';
import type { TestApp } from '../helpers/app.ts';
import { call, sandboxSession, type SessionInfo, startWebhooksApp, tenant, type Tenant } from '../plugins/webhooks/helpers.ts';

const NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'] as const;

describe('Object.prototype names in user input', () => {
  let app: TestApp;
  let owner: Tenant;
  let session: SessionInfo;

  beforeAll(async () => {
    app = await startWebhooksApp();
    owner = await tenant(app);
    session = await sandboxSession(app, owner.pat);
  });
  afterAll(() => app?.close());

  it.each(NAMES)('an unknown body field %s on a strict messaging route is a 422 naming it', async (name) => {
    // JSON.parse makes `__proto__` an own property, as a client's JSON does.
    const raw = `{"to":"+15550001002","text":"hi",${JSON.stringify(name)}:1}`;
    const res = await app.request('POST', '/api/send-message', {
      raw,
      headers: { authorization: `Bearer ${session.apiKey}`, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.errors[name]).toEqual([`unknown field ${name}`]);
  });

  it.each(NAMES)('an unknown query field %s is a 422 naming it', async (name) => {
    const res = await call(app, session.apiKey, 'GET', `/api/contacts?${name}=1`);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([name]);
  });

  it.each(NAMES)('GET /api/dispatches?event=%s is a 422, not a 500', async (name) => {
    const res = await call(app, owner.pat, 'GET', `/api/dispatches?event=${name}`);
    expect(res.status).toBe(422);
    expect(res.body.errors.event).toBeDefined();
  });

  it.each(NAMES)('webhook_events ["%s"] is refused with 422 and nothing is stored', async (name) => {
    expect((await call(app, owner.pat, 'PUT', `/api/whatsapp-sessions/${session.id}`, { webhook_events: ['messages.received'] })).status).toBe(200);
    const res = await call(app, owner.pat, 'PUT', `/api/whatsapp-sessions/${session.id}`, { webhook_events: [name] });
    expect(res.status).toBe(422);
    expect(res.body.errors['webhook_events.0']).toBeDefined();
    const read = await call(app, owner.pat, 'GET', `/api/whatsapp-sessions/${session.id}`);
    expect(read.body.data.webhook_events).toEqual(['messages.received']);
  });

  it('canonicalEvent knows only event names and aliases', () => {
    for (const name of NAMES) expect(canonicalEvent(name)).toBeUndefined();
    expect(canonicalEvent('messages-personal.received')).toBe('messages-personal');
  });

  it('field errors keep prototype names as plain keys', () => {
    const result = z.strictObject({ a: z.string() }).safeParse(JSON.parse('{"a":"x","__proto__":1,"constructor":2}'));
    expect(result.success).toBe(false);
    const fields = fieldErrors(result.error!);
    expect(Object.keys(fields).sort()).toEqual(['__proto__', 'constructor']);
    expect(fields.constructor).toEqual(['unknown fields __proto__, constructor']);
  });

  it.each(NAMES)('an XML entity &%s; is refused as unknown, not expanded to a function', (name) => {
    expect(() => parseXml(`<Delete><Object><Key>a&${name};</Key></Object></Delete>`)).toThrow(`unknown entity &${name};`);
  });
});
