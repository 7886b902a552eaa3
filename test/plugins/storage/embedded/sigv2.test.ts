/**
 * AWS Signature Version 2 on the embedded endpoint, in the Authorization header (`AWS key:sig`)
 * and in query strings (`AWSAccessKeyId`, `Expires`, `Signature`): what `s3cmd signurl` makes by
 * default and what s3cmd sends with `signature_v2 = True` or after falling back. The string to
 * sign is first checked against the worked examples of AWS's documentation ("Signing and
 * Authenticating REST Requests"), then live requests signed that way go to the endpoint.
 */
import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Credential, stringToSignV2, Verifier } from '../../../../plugins/storage/drivers/fs/auth.ts';
import { S3Error } from '../../../../plugins/storage/drivers/fs/objects.ts';
import { type EmbeddedApp, errorCode, rawRequest, startEmbeddedApp } from '../../../helpers/embedded.ts';

// The key pair of AWS's documentation examples.
const DOC_KEY = 'AKIAIOSFODNN7EXAMPLE';
const DOC_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const sign = (secret: string, text: string) => createHmac('sha1', secret).update(text, 'utf8').digest('base64');

describe("the SigV2 string to sign agrees with AWS's documented examples", () => {
  it('object GET (Date header)', () => {
    const text = stringToSignV2({ method: 'GET', url: '/awsexamplebucket1/photos/puppy.jpg', headers: { date: 'Tue, 27 Mar 2007 19:36:42 +0000' } });
    expect(text).toBe('GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg');
    expect(sign(DOC_SECRET, text)).toBe('qgk2+6Sv9/oM7G3qLEjTH1a1l1g=');
  });

  it('upload with Content-MD5, x-amz-* headers (names lower-cased, sorted, repeated values joined by commas)', () => {
    const text = stringToSignV2({
      method: 'PUT',
      url: '/static.johnsmith.net/db-backup.dat.gz',
      headers: {
        date: 'Tue, 27 Mar 2007 21:06:08 +0000',
        'x-amz-acl': 'public-read',
        'content-type': 'application/x-download',
        'content-md5': '4gJE4saaMU4BqNR0kLY+lw==',
        'x-amz-meta-reviewedby': 'joe@johnsmith.net, jane@johnsmith.net',
        'x-amz-meta-filechecksum': '0x02661779',
        'x-amz-meta-checksumalgorithm': 'crc32',
        'content-disposition': 'attachment; filename=database.dat',
        'content-encoding': 'gzip',
        'content-length': '5913339',
      },
      headersDistinct: { 'x-amz-meta-reviewedby': ['joe@johnsmith.net', 'jane@johnsmith.net'] },
    });
    expect(sign(DOC_SECRET, text)).toBe('ilyl83RwaSoYIEdixDQcA4OnAnc=');
  });

  it('query string authentication (Expires in place of Date)', () => {
    const text = stringToSignV2(
      { method: 'GET', url: '/johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=x', headers: {} },
      '1175139620',
    );
    expect(sign(DOC_SECRET, text)).toBe('NpgCjnDzrM+WFzoENXmpNDUsSn8=');
  });

  it('sub-resources and response overrides are signed (sorted, values decoded); other parameters are not', () => {
    const text = stringToSignV2({
      method: 'GET',
      url: '/b/k?uploadId=abc&partNumber=2&prefix=zzz&response-content-disposition=attachment%3B%20filename%3D%22a%22',
      headers: { date: 'd' },
    });
    expect(text).toBe('GET\n\n\nd\n/b/k?partNumber=2&response-content-disposition=attachment; filename="a"&uploadId=abc');
    // With x-amz-date, the Date line is empty (the header is signed among the x-amz-* ones).
    expect(stringToSignV2({ method: 'GET', url: '/b?acl', headers: { date: 'ignored', 'x-amz-date': 'Tue, 27 Mar 2007 21:20:26 +0000' } })).toBe(
      'GET\n\n\n\nx-amz-date:Tue, 27 Mar 2007 21:20:26 +0000\n/b?acl',
    );
  });
});

describe('the verifier on SigV2 requests (clock fixed at the examples’ time)', () => {
  const lookup = (key: string): Credential | undefined =>
    key === DOC_KEY ? { principal: { kind: 'bucket', accessKey: key, bucket: 'johnsmith' }, secret: DOC_SECRET } : undefined;
  const at = (iso: string) => new Verifier(lookup, 'us-east-1', () => Date.parse(iso));
  const refusal = async (p: Promise<unknown>) => {
    try {
      await p;
      return 'accepted';
    } catch (err) {
      expect(err).toBeInstanceOf(S3Error);
      return `${(err as S3Error).status} ${(err as S3Error).code}`;
    }
  };

  it('accepts the documented header example, refuses it tampered, skewed, or with an unknown key', async () => {
    const req = {
      method: 'GET',
      url: '/johnsmith/photos/puppy.jpg',
      headers: { date: 'Tue, 27 Mar 2007 19:36:42 +0000', authorization: `AWS ${DOC_KEY}:bWq2s1WEIj+Ydj0vQ697zp+IXMU=` },
    };
    const ok = await at('2007-03-27T19:40:00Z').verify(req);
    expect(ok.principal).toMatchObject({ kind: 'bucket', bucket: 'johnsmith' });
    expect(ok.payload).toBe('UNSIGNED-PAYLOAD');
    expect(await refusal(at('2007-03-27T19:40:00Z').verify({ ...req, url: '/johnsmith/photos/kitten.jpg' }))).toBe('403 SignatureDoesNotMatch');
    expect(
      await refusal(at('2007-03-27T19:40:00Z').verify({ ...req, headers: { ...req.headers, authorization: `AWS ${DOC_KEY}:cWq2s1WEIj+Ydj0vQ697zp+IXMU=` } })),
    ).toBe('403 SignatureDoesNotMatch');
    expect(await refusal(at('2007-03-27T20:00:00Z').verify(req))).toBe('403 RequestTimeTooSkewed');
    expect(
      await refusal(
        at('2007-03-27T19:40:00Z').verify({ ...req, headers: { ...req.headers, authorization: 'AWS AKIANOSUCHKEY:bWq2s1WEIj+Ydj0vQ697zp+IXMU=' } }),
      ),
    ).toBe('403 InvalidAccessKeyId');
    expect(await refusal(at('2007-03-27T19:40:00Z').verify({ ...req, headers: { authorization: req.headers.authorization } }))).toBe('403 AccessDenied');
    expect(await refusal(at('2007-03-27T19:40:00Z').verify({ ...req, headers: { ...req.headers, authorization: 'AWS onlyonepart' } }))).toBe(
      '400 InvalidArgument',
    );
  });

  it('accepts the documented query example before it expires, not after, nor tampered', async () => {
    const url = '/johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D';
    expect((await at('2007-03-28T00:00:00Z').verify({ method: 'GET', url, headers: {} })).principal).toMatchObject({ bucket: 'johnsmith' });
    expect(await refusal(at('2007-03-30T00:00:00Z').verify({ method: 'GET', url, headers: {} }))).toBe('403 AccessDenied');
    expect(await refusal(at('2007-03-28T00:00:00Z').verify({ method: 'PUT', url, headers: {} }))).toBe('403 SignatureDoesNotMatch');
    expect(await refusal(at('2007-03-28T00:00:00Z').verify({ method: 'GET', url: url.replace('1175139620', '1175139621'), headers: {} }))).toBe(
      '403 SignatureDoesNotMatch',
    );
    expect(await refusal(at('2007-03-28T00:00:00Z').verify({ method: 'GET', url: url.replace(/&Signature=[^&]*/, ''), headers: {} }))).toBe('403 AccessDenied');
    expect(await refusal(at('2007-03-28T00:00:00Z').verify({ method: 'GET', url: url.replace('1175139620', 'soon'), headers: {} }))).toBe('403 AccessDenied');
    // Valid for more than 7 days from now: refused, as SigV4 URLs are.
    expect(await refusal(at('2007-03-01T00:00:00Z').verify({ method: 'GET', url, headers: {} }))).toBe('400 AuthorizationQueryParametersError');
  });
});

describe('SigV2 against the embedded endpoint with an app key', () => {
  let env: EmbeddedApp;
  beforeAll(async () => {
    env = await startEmbeddedApp();
  });
  afterAll(async () => {
    await env?.app.close();
  });

  const rfc1123 = (d = new Date()) => d.toUTCString().replace('GMT', '+0000');

  /** A header-signed SigV2 request, as s3cmd with signature_v2 makes it (x-amz-date, no Date). */
  function v2(method: string, target: string, headers: Record<string, string> = {}, body?: string | Buffer, secret = env.creds.secretKey) {
    const all = { 'x-amz-date': rfc1123(), ...headers };
    const text = stringToSignV2({ method, url: target, headers: all });
    return rawRequest(`${env.endpoint}${target}`, { method, headers: { ...all, authorization: `AWS ${env.creds.accessKey}:${sign(secret, text)}` }, body });
  }

  it('header-signed PUT (Content-MD5, Content-Type, x-amz-meta), GET, a ranged GET, ListObjects, DELETE', async () => {
    const b = env.mine.bucketName;
    const body = 'signed the old way';
    const md5 = createHash('md5').update(body).digest('base64');
    const put = await v2('PUT', `/${b}/v2/a%20b.txt`, { 'content-type': 'text/plain', 'content-md5': md5, 'x-amz-meta-colour': 'blue' }, body);
    expect(put.status, put.text).toBe(200);
    const get = await v2('GET', `/${b}/v2/a%20b.txt`);
    expect(get.status).toBe(200);
    expect(get.text).toBe(body);
    expect(get.headers['x-amz-meta-colour']).toBe('blue');
    const part = await v2('GET', `/${b}/v2/a%20b.txt`, { range: 'bytes=0-5' });
    expect(part.text).toBe('signed');
    const list = await v2('GET', `/${b}?prefix=v2%2F`);
    expect(list.text).toMatch(/<Key>v2\/a b\.txt<\/Key>/);
    expect((await v2('DELETE', `/${b}/v2/a%20b.txt`)).status).toBe(204);
  });

  it('a wrong signature is 403 SignatureDoesNotMatch, never "Anonymous access"; another bucket is AccessDenied', async () => {
    const b = env.mine.bucketName;
    const bad = await v2('GET', `/${b}?list-type=2`, {}, undefined, 'not-the-secret');
    expect(bad.status).toBe(403);
    expect(errorCode(bad.text)).toBe('SignatureDoesNotMatch');
    expect(bad.text).not.toMatch(/Anonymous/i);
    const other = await v2('GET', `/${env.other.bucketName}?list-type=2`);
    expect(other.status).toBe(403);
    expect(errorCode(other.text)).toBe('AccessDenied');
    // A changed signed header (Content-Type) after signing.
    const text = stringToSignV2({ method: 'PUT', url: `/${b}/v2/t.txt`, headers: { 'x-amz-date': rfc1123(), 'content-type': 'text/plain' } });
    const changed = await rawRequest(`${env.endpoint}/${b}/v2/t.txt`, {
      method: 'PUT',
      headers: { 'x-amz-date': rfc1123(), 'content-type': 'text/html', authorization: `AWS ${env.creds.accessKey}:${sign(env.creds.secretKey, text)}` },
      body: 'x',
    });
    expect(errorCode(changed.text)).toBe('SignatureDoesNotMatch');
  });

  it('a query-signed (presigned) GET with a response override; expired and tampered URLs refused', async () => {
    const b = env.mine.bucketName;
    expect((await v2('PUT', `/${b}/v2/shared.txt`, {}, 'shared by URL')).status).toBe(200);
    const presign = (expires: number, extra = '') => {
      const target = `/${b}/v2/shared.txt${extra ? `?${extra}` : ''}`;
      const sig = sign(env.creds.secretKey, stringToSignV2({ method: 'GET', url: target, headers: {} }, String(expires)));
      return `${env.endpoint}${target}${extra ? '&' : '?'}AWSAccessKeyId=${env.creds.accessKey}&Expires=${expires}&Signature=${encodeURIComponent(sig)}`;
    };
    const now = Math.floor(Date.now() / 1000);
    const ok = await rawRequest(presign(now + 60, 'response-content-disposition=attachment%3B%20filename%3D%22s.txt%22'));
    expect(ok.status, ok.text).toBe(200);
    expect(ok.text).toBe('shared by URL');
    expect(ok.headers['content-disposition']).toBe('attachment; filename="s.txt"');
    const expired = await rawRequest(presign(now - 1));
    expect(expired.status).toBe(403);
    expect(expired.text).toMatch(/<Code>AccessDenied<\/Code><Message>Request has expired<\/Message>/);
    const tampered = await rawRequest(presign(now + 60).replace('/shared.txt', '/other.txt'));
    expect(errorCode(tampered.text)).toBe('SignatureDoesNotMatch');
  });
});
