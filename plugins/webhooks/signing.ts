/**
 * Signature headers of a delivery. Default mode (`secret`): `X-Webhook-Signature` carries the
 * webhook secret itself, as the spec says. HMAC mode: it carries the hex HMAC-SHA256 of the exact
 * body bytes, keyed with the secret's UTF-8 bytes, and the Standard Webhooks headers are added:
 * `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`
 * (`v1,<base64 HMAC-SHA256 of "<webhook-id>.<timestamp>.<body>">`, keyed with the secret read as
 * base64, the way the standardwebhooks libraries read a `whsec_` secret, so the session's secret
 * passed as is to `new Webhook(secret)` verifies). `webhook-id` is sent in both modes and is
 * stable across retries and redeliveries, for deduplication.
 *
 * During a rotation's grace period both secrets sign: `X-Webhook-Signature` with the new one,
 * `X-Webhook-Signature-Previous` with the old one, and `webhook-signature` lists both
 * (space-separated, as Standard Webhooks allows).
 */
import { createHmac } from 'node:crypto';
import type { SigningMode } from '../sessions/types.ts';

export interface SignInput {
  mode: SigningMode;
  secret: string;
  /** The secret before the last rotation, while its grace period lasts. */
  previousSecret?: string | undefined;
  webhookId: string;
  body: Buffer;
  /** Unix seconds. */
  timestamp: number;
}

/** The key Standard Webhooks libraries derive from a secret: its base64 decoding (a `whsec_` prefix dropped). */
function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

function hexHmac(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

function standardSignature(secret: string, webhookId: string, timestamp: number, body: Buffer): string {
  const mac = createHmac('sha256', standardWebhooksKey(secret)).update(`${webhookId}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

export function signatureHeaders(input: SignInput): Record<string, string> {
  const { mode, secret, previousSecret, webhookId, body, timestamp } = input;
  const headers: Record<string, string> = { 'webhook-id': webhookId };
  if (mode === 'secret') {
    headers['x-webhook-signature'] = secret;
    if (previousSecret) headers['x-webhook-signature-previous'] = previousSecret;
    return headers;
  }
  headers['x-webhook-signature'] = hexHmac(secret, body);
  if (previousSecret) headers['x-webhook-signature-previous'] = hexHmac(previousSecret, body);
  headers['webhook-timestamp'] = String(timestamp);
  const signatures = [standardSignature(secret, webhookId, timestamp, body)];
  if (previousSecret) signatures.push(standardSignature(previousSecret, webhookId, timestamp, body));
  headers['webhook-signature'] = signatures.join(' ');
  return headers;
}
