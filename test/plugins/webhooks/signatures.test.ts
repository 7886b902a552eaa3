/**
 * Signatures as a receiver checks them: the default mode's secret in X-Webhook-Signature; HMAC
 * mode's hex HMAC-SHA256 of the raw body and the Standard Webhooks headers, verified with the npm
 * `standardwebhooks` library; webhook-id stable across retries and redelivery; a rotated secret
 * that keeps signing, beside the new one, for the grace period and not after.
 */
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { Boom } from '@hapi/boom';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FakeWhatsApp, mockedBaileys } from '../../helpers/fake-whatsapp.ts';
import { testNetworks } from '../sessions/test-networks.ts';
import type { TestApp } from '../../helpers/app.ts';
import { answer, call, eventually, FAST_TOML, hookedSession, receive, type Received, Receiver, startWebhooksApp, type Tenant, tenant } from './helpers.ts';

const fake = vi.hoisted(() => ({}) as { network?: FakeWhatsApp });
vi.mock('baileys', async (importOriginal) => mockedBaileys(await importOriginal(), fake.network!, Boom));
const networks = testNetworks((fake.network = new FakeWhatsApp()));

let app: TestApp;
let t: Tenant;
let receiver: Receiver;

beforeAll(async () => {
  app = await startWebhooksApp(`${FAST_TOML}secret_rotation_grace_seconds = 2\n`);
  t = await tenant(app);
  receiver = await Receiver.start();
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

const hexHmac = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');
const standardHeaders = (r: Received) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

async function secretOf(sessionId: number): Promise<string> {
  const res = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${sessionId}`);
  return res.body.data.webhook_secret;
}

async function nextDelivery(path: string, after: number): Promise<Received> {
  return eventually(() => receiver.requests.filter((r) => r.path === path)[after], 5000, `delivery ${after + 1} to ${path}`);
}

describe.each(networks)('default mode, on $name sessions', (net) => {
  it('puts the webhook secret in X-Webhook-Signature and no Standard Webhooks signature', async () => {
    const path = `/default-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received'], {}, net);
    const secret = await secretOf(s.id);
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    await receive(app, s, 'plain', {}, net);
    const r = await nextDelivery(path, 0);
    expect(r.headers['x-webhook-signature']).toBe(secret);
    expect(r.headers['webhook-id']).toMatch(/^msg_/);
    expect(r.headers['webhook-signature']).toBeUndefined();
    expect(r.headers['x-webhook-signature-previous']).toBeUndefined();
    // A receiver that verifies Standard Webhooks finds nothing to verify in this mode.
    expect(() => new Webhook(secret).verify(r.body.toString(), r.headers as Record<string, string>)).toThrow('Missing required headers');
  });
});

describe.each(networks)('HMAC mode, on $name sessions', (net) => {
  it('signs the exact bytes sent, verifiable with the standardwebhooks library, webhook-id stable across retries', async () => {
    const path = `/hmac-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received'], {}, net);
    // The PAT route switches the mode (the dashboard uses the same one).
    const put = await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/webhook-signing`, { mode: 'hmac' });
    expect(put.status).toBe(200);
    expect((await call(app, t.pat, 'GET', `/api/messaging-sessions/${s.id}/webhook-signing`)).body.data).toEqual({ mode: 'hmac' });
    const secret = await secretOf(s.id);

    // Two failures, then success: three attempts of one delivery.
    let calls = 0;
    const previous = receiver.behaviour;
    receiver.behaviour = (req, res, received) => {
      if (received.path === path && ++calls <= 2) return answer(503, 'busy')(req, res, received);
      return previous(req, res, received);
    };
    try {
      await receive(app, s, 'héllo ✓ signed', {}, net);
      const third = await nextDelivery(path, 2);
      const attempts = receiver.requests.filter((r) => r.path === path);
      expect(attempts).toHaveLength(3);
      for (const r of attempts) {
        expect(r.headers['x-webhook-signature']).toBe(hexHmac(secret, r.body));
        expect(r.headers['x-webhook-signature']).not.toBe(secret);
        const verified = new Webhook(secret).verify(r.body, standardHeaders(r)) as { event: string; data: { message: unknown } };
        expect(verified.event).toBe('messages.received');
        expect(verified.data.message).toEqual({ conversation: 'héllo ✓ signed' });
        expect(Number(r.headers['webhook-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
      }
      // The same id and body on every attempt.
      expect(new Set(attempts.map((r) => r.headers['webhook-id'])).size).toBe(1);
      expect(new Set(attempts.map((r) => r.body.toString('base64'))).size).toBe(1);
      // A tampered body, or another secret, fails verification.
      const tampered = Buffer.from(third.body.toString().replace('signed', 'forged'));
      expect(() => new Webhook(secret).verify(tampered, standardHeaders(third))).toThrow('No matching signature found');
      expect(() => new Webhook('a'.repeat(64)).verify(third.body, standardHeaders(third))).toThrow('No matching signature found');
      // A replayed delivery with an old timestamp is refused by the library.
      const old = { ...standardHeaders(third), 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) };
      expect(() => new Webhook(secret).verify(third.body, old)).toThrow('Message timestamp too old');

      // Redelivery: a new dispatch, the same webhook-id, still verifiable.
      // The outcome of an attempt is recorded a few milliseconds after the receiver answered.
      const dispatch = await eventually(
        async () => {
          const list = await call(app, t.pat, 'GET', `/api/dispatches?session_id=${s.id}`);
          const row = list.body.data.data[0];
          return row?.status === 'delivered' ? row : undefined;
        },
        5000,
        'the dispatch recorded as delivered',
      );
      expect(dispatch).toMatchObject({ status: 'delivered', attempt_count: 3, webhook_id: third.headers['webhook-id'] });
      const again = await call(app, t.pat, 'POST', `/api/dispatches/${dispatch.id}/redeliver`);
      expect(again.status).toBe(202);
      const fourth = await nextDelivery(path, 3);
      expect(fourth.headers['webhook-id']).toBe(third.headers['webhook-id']);
      expect(fourth.body.equals(third.body)).toBe(true);
      expect(new Webhook(secret).verify(fourth.body, standardHeaders(fourth))).toMatchObject({ event: 'messages.received' });
    } finally {
      receiver.behaviour = previous;
    }
  });
});

describe.each(networks)('secret rotation, on $name sessions', (net) => {
  it('sends both signatures during the grace period, then only the new one', async () => {
    const path = `/rotate-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received'], {}, net);
    await call(app, t.pat, 'PUT', `/api/whatsapp-sessions/${s.id}/webhook-signing`, { mode: 'hmac' });
    const oldSecret = await secretOf(s.id);

    const rotatedAt = Date.now();
    const rotated = await call(app, t.pat, 'POST', `/api/whatsapp-sessions/${s.id}/rotate-webhook-secret`);
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.data.webhook_secret;
    expect(newSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(newSecret).not.toBe(oldSecret);
    expect(await secretOf(s.id)).toBe(newSecret);
    const until = Date.parse(rotated.body.data.previous_secret_valid_until);
    expect(until).toBeGreaterThanOrEqual(rotatedAt + 2000 - 50);
    expect(until).toBeLessThanOrEqual(Date.now() + 2000);

    await receive(app, s, 'during grace', {}, net);
    const during = await nextDelivery(path, 0);
    expect(during.headers['x-webhook-signature']).toBe(hexHmac(newSecret, during.body));
    expect(during.headers['x-webhook-signature-previous']).toBe(hexHmac(oldSecret, during.body));
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    // A receiver on either secret accepts it.
    expect(new Webhook(newSecret).verify(during.body, standardHeaders(during))).toMatchObject({ event: 'messages.received' });
    expect(new Webhook(oldSecret).verify(during.body, standardHeaders(during))).toMatchObject({ event: 'messages.received' });

    // After the grace period only the new secret signs.
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now() + 50)));
    await receive(app, s, 'after grace', {}, net);
    const after = await nextDelivery(path, 1);
    expect(after.headers['x-webhook-signature']).toBe(hexHmac(newSecret, after.body));
    expect(after.headers['x-webhook-signature-previous']).toBeUndefined();
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(new Webhook(newSecret).verify(after.body, standardHeaders(after))).toMatchObject({ event: 'messages.received' });
    expect(() => new Webhook(oldSecret).verify(after.body, standardHeaders(after))).toThrow('No matching signature found');

    // The rotation is in the audit log.
    const audit = await call(app, t.pat, 'GET', `/api/whatsapp-sessions/${s.id}/audit-logs`);
    expect(audit.body.data.data.map((a: { action: string }) => a.action)).toContain('session.webhook_secret_rotated');
  });

  it('in default mode sends the old secret in X-Webhook-Signature-Previous; another organization cannot rotate', async () => {
    const path = `/rotate-default-${Date.now()}`;
    const s = await hookedSession(app, t.pat, receiver.url(path), ['messages.received'], {}, net);
    const oldSecret = await secretOf(s.id);
    const other = await tenant(app);
    const foreign = await call(app, other.pat, 'POST', `/api/whatsapp-sessions/${s.id}/rotate-webhook-secret`);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ success: false, error: 'Session not found', message: 'Session not found' });
    expect((await call(app, s.apiKey, 'POST', `/api/whatsapp-sessions/${s.id}/rotate-webhook-secret`)).status).toBe(403);
    expect(await secretOf(s.id)).toBe(oldSecret);

    const rotated = await call(app, t.pat, 'POST', `/api/messaging-sessions/${s.id}/rotate-webhook-secret`, {});
    expect(rotated.status).toBe(200);
    await receive(app, s, 'default rotated', {}, net);
    const r = await nextDelivery(path, 0);
    expect(r.headers['x-webhook-signature']).toBe(rotated.body.data.webhook_secret);
    expect(r.headers['x-webhook-signature-previous']).toBe(oldSecret);
  });
});
