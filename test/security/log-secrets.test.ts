/**
 * No live credential in a log. A session of typical use, with the log at its most verbose
 * (trace): a password sign-in and a wrong password, an app and its token, token validation (the
 * store's keys), a presigned upload and download, a client that aborts a presigned PUT, the
 * device flow with a refresh, a personal access token, a sandbox session's key and webhook
 * secret, a signed delivery and a secret rotation, and requests with broken credentials and
 * malformed bodies. Then every secret it created is looked for in every log line.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.ts';
import { signIn } from '../helpers/identity.ts';
import { answer, call, eventually, hookedSession, receive, Receiver } from '../plugins/webhooks/helpers.ts';

let app: TestApp;
let receiver: Receiver;
const secrets = new Map<string, string>();

/** Records a secret under a name, for the final check. */
function keep(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length < 8) throw new Error(`${name}: not a secret string: ${String(value)}`);
  secrets.set(name, value);
  return value;
}

beforeAll(async () => {
  receiver = await Receiver.start(answer(200));
  app = await startApp(
    '[plugins.identity]\nscrypt_cost = 1024\ndevice_poll_interval_seconds = 1\n[plugins.webhooks]\nallow_private_networks = true\nretry_jitter = 0\n',
    { logLevel: 'trace' },
  );
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

describe('a session of typical use, logged at trace level', () => {
  it('leaves none of the secrets it created in any log line', async () => {
    const user = await signIn(app, { password: 'correct horse battery staple' });
    keep('password', user.password);
    keep('session cookie', user.cookie.split('=')[1]);
    // A wrong password, and a body whose JSON is broken right after a secret.
    expect(
      (await app.request('POST', '/auth/login', { body: { email: user.email, password: 'wrong-horse-battery-staple' }, headers: { origin: app.url } })).status,
    ).toBe(401);
    keep('wrong password', 'wrong-horse-battery-staple');
    expect(
      (
        await app.request('POST', '/auth/login', {
          raw: '{"email":"a@b.c","password":"broken-json-password-123"',
          headers: { 'content-type': 'application/json', origin: app.url },
        })
      ).status,
    ).toBe(400);
    keep('password in malformed JSON', 'broken-json-password-123');
    // V8 quotes the text around a parse error in its message: that text must not come back.
    const quoted = await app.request('POST', '/auth/login', {
      raw: '{"email":"a@b.c","password":quoted-json-password-456}',
      headers: { 'content-type': 'application/json', origin: app.url },
    });
    expect(quoted.status).toBe(400);
    expect(quoted.text).not.toContain('quoted');
    keep('password quoted by the JSON parser', 'quoted-json-password-456');

    // File storage: an app, a token, its validation (the store's keys), a presigned round trip.
    const created = await app.request('POST', '/api/apps', { body: { name: 'Logs' }, headers: user.headers });
    expect(created.status).toBe(201);
    const appId = created.body.id as string;
    const token = keep('app token', (await app.request('POST', '/api/tokens', { body: { appId, name: 'ci' }, headers: user.headers })).body.token);
    const validated = await app.request('POST', '/api/tokens/validate', { body: { token } });
    expect(validated.status).toBe(200);
    keep('S3 secret key', validated.body.storage.secretKey);
    const phase1 = await app.request('POST', '/api/files/upload', {
      body: { appId, files: [{ name: 'a.txt', size: 5, type: 'text/plain' }] },
      headers: user.headers,
    });
    const upload = phase1.body.uploads[0];
    keep('upload signature', new URL(upload.presignedUrl).searchParams.get('X-Amz-Signature'));
    expect((await fetch(upload.presignedUrl, { method: 'PUT', body: 'hello', headers: { 'content-type': 'text/plain' } })).status).toBe(200);
    const completed = await app.request('POST', '/api/files/upload', {
      body: { appId, action: 'complete', files: [{ key: upload.key, name: 'a.txt', size: 5, type: 'text/plain' }] },
      headers: user.headers,
    });
    expect(completed.status).toBe(200);
    const download = await app.request('GET', `/api/files/download?fileId=${completed.body.files[0].id}`, { headers: user.headers });
    keep('download signature', new URL(download.body.url).searchParams.get('X-Amz-Signature'));
    expect(await (await fetch(download.body.url)).text()).toBe('hello');
    expect((await app.request('GET', '/api/files', { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

    // A client that aborts a presigned PUT half way.
    const aborted = (
      await app.request('POST', '/api/files/upload', {
        body: { appId, files: [{ name: 'big.bin', size: 1_000_000, type: 'application/octet-stream' }] },
        headers: user.headers,
      })
    ).body.uploads[0];
    keep('aborted upload signature', new URL(aborted.presignedUrl).searchParams.get('X-Amz-Signature'));
    await abortedPut(aborted.presignedUrl, 1_000_000, 'application/octet-stream');

    // The device flow, with a refresh.
    const code = await app.request('POST', '/oauth/device/code', { body: { client_id: 'wharf-cli' } });
    keep('device code', code.body.device_code);
    expect(
      (
        await app.request('POST', '/oauth/device/approve', {
          body: { user_code: code.body.user_code, orgId: user.orgId, approve: true },
          headers: user.headers,
        })
      ).status,
    ).toBe(200);
    const tokens = await app.request('POST', '/oauth/token', {
      body: { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: code.body.device_code, client_id: 'wharf-cli' },
    });
    keep('access token', tokens.body.access_token);
    keep('refresh token', tokens.body.refresh_token);
    const refreshed = await app.request('POST', '/oauth/token', {
      body: { grant_type: 'refresh_token', refresh_token: tokens.body.refresh_token, client_id: 'wharf-cli' },
    });
    keep('rotated refresh token', refreshed.body.refresh_token);
    expect((await app.request('GET', '/api/cli/me', { headers: { authorization: `Bearer ${refreshed.body.access_token}` } })).status).toBe(200);

    // Messaging: a PAT, a sandbox session with a webhook, a signed delivery, a rotated secret.
    const pat = keep(
      'personal access token',
      (await app.request('POST', '/api/personal-access-tokens', { body: { name: 'logs' }, headers: user.headers })).body.data.token,
    );
    const session = await hookedSession(app, pat, `http://127.0.0.1:${receiver.port}/hook`);
    keep('session API key', session.apiKey);
    keep('webhook secret', session.body.webhook_secret);
    await receive(app, session, 'hello from the log test');
    await eventually(() => receiver.requests.length > 0);
    const rotated = await call(app, pat, 'POST', `/api/whatsapp-sessions/${session.id}/rotate-webhook-secret`);
    keep('rotated webhook secret', rotated.body.data?.webhook_secret ?? rotated.body.webhook_secret);
    const regenerated = await call(app, pat, 'POST', `/api/whatsapp-sessions/${session.id}/regenerate-key`);
    keep('regenerated session key', regenerated.body.api_key);

    // Broken credentials: near-misses of real ones.
    for (const bad of [`${token}x`, `${pat}x`, `${session.apiKey}x`, `${refreshed.body.access_token}x`]) {
      expect((await app.request('GET', '/api/cli/me', { headers: { authorization: `Bearer ${bad}` } })).status).toBe(401);
    }

    await new Promise((r) => setTimeout(r, 200));
    const log = app.logs.map((line) => JSON.stringify(line));
    expect(log.length).toBeGreaterThan(30);
    const leaked = [...secrets].filter(([, value]) => log.some((l) => l.includes(value))).map(([name]) => name);
    expect(leaked, `secrets in the log: ${leaked.join(', ')}\n${log.filter((l) => [...secrets.values()].some((v) => l.includes(v))).join('\n')}`).toEqual([]);
    // The log did see this session: its requests, the upload and the delivery.
    for (const seen of ['/api/files/upload', '/oauth/token', '/api/personal-access-tokens']) {
      expect(
        log.some((l) => l.includes(seen)),
        seen,
      ).toBe(true);
    }
  });
});

/** Sends the headers and part of the body of a PUT, then drops the connection. */
function abortedPut(url: string, size: number, type: string): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'PUT', headers: { 'content-type': type, 'content-length': size } });
    req.on('error', () => resolve());
    req.write(Buffer.alloc(64 * 1024));
    setTimeout(() => {
      req.destroy();
      setTimeout(resolve, 200);
    }, 100);
  });
}
