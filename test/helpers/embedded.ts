/**
 * The embedded S3 endpoint in tests: a server on the `fs` driver with two apps, the storage
 * credentials POST /api/tokens/validate hands out for the first, an AWS SDK client with them,
 * and raw HTTP requests for what an SDK would never send.
 */
import http from 'node:http';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { startApp, type StartOptions, type TestApp } from './app.ts';
import { type SignedIn, signIn } from './identity.ts';
import { createApp, createToken } from './storage.ts';

/** The `storage` object of POST /api/tokens/validate. */
export interface StoreCreds {
  endPoint: string;
  port: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
}

export interface EmbeddedApp {
  app: TestApp;
  owner: SignedIn;
  /** The app whose key `creds` is. */
  mine: { id: string; bucketName: string };
  /** Another app of the same organization: its bucket is not `creds`'s. */
  other: { id: string; bucketName: string };
  creds: StoreCreds;
  /** The endpoint's base URL, `http://host:port`. */
  endpoint: string;
}

/** Starts a server on the embedded store (extra TOML appended) and validates a token of its first app. */
export async function startEmbeddedApp(toml = '', options: StartOptions = {}): Promise<EmbeddedApp> {
  const app = await startApp(`[plugins.identity]\nscrypt_cost = 1024\n${toml}`, options);
  try {
    const owner = await signIn(app);
    const mine = await createApp(app, owner, 'mine');
    const other = await createApp(app, owner, 'other');
    const res = await app.request('POST', '/api/tokens/validate', { body: { token: await createToken(app, owner, mine.id) } });
    if (res.status !== 200) throw new Error(`validate: ${res.status} ${res.text}`);
    const creds = res.body.storage as StoreCreds;
    return { app, owner, mine, other, creds, endpoint: `${creds.useSSL ? 'https' : 'http'}://${creds.endPoint}:${creds.port}` };
  } catch (err) {
    await app.close();
    throw err;
  }
}

/** An AWS SDK client for the credentials, with its defaults but path-style and no retries. */
export function s3Client(creds: StoreCreds, extra: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    endpoint: `${creds.useSSL ? 'https' : 'http'}://${creds.endPoint}:${creds.port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: creds.accessKey, secretAccessKey: creds.secretKey },
    maxAttempts: 1,
    ...extra,
  });
}

export interface SdkOutcome {
  status: number | undefined;
  /** The S3 error code (the SDK's error name); undefined on success. */
  name: string | undefined;
  message?: string;
}

/** The HTTP status and S3 error code an SDK call ended with (200 and no name on success). */
export async function outcome(p: Promise<unknown>): Promise<SdkOutcome> {
  try {
    await p;
    return { status: 200, name: undefined };
  } catch (err) {
    const e = err as { $metadata?: { httpStatusCode?: number }; name?: string; message?: string };
    return { status: e.$metadata?.httpStatusCode, name: e.name, message: e.message };
  }
}

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One HTTP request as written (no SDK, no fetch normalisation); `body` is sent whole. */
export function rawRequest(url: string, init: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** The `<Code>` of an S3 XML error body. */
export function errorCode(text: string): string | undefined {
  return /<Code>([^<]*)<\/Code>/.exec(text)?.[1];
}
