/** The SigV4 presigner gives byte for byte the URLs of the AWS SDK's presigner. */
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { SigV4Presigner } from '../../../plugins/storage/drivers/sigv4.ts';

const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
const date = new Date('2026-11-22T07:04:05.678Z');

function sdk(endpoint: string, forcePathStyle: boolean, region = 'us-east-1') {
  return new S3Client({
    endpoint,
    region,
    forcePathStyle,
    credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** The same URL regardless of query parameter order. */
function normal(url: string): string {
  const u = new URL(url);
  const params = [...u.searchParams].sort(([a], [b]) => (a < b ? -1 : 1));
  return `${u.origin}${u.pathname}?${params.map(([k, v]) => `${k}=${v}`).join('&')}`;
}

describe('SigV4 presigned URLs', () => {
  it.each([
    ['http://127.0.0.1:7480', true, 'us-east-1', 'dir/photo.jpg'],
    ['http://127.0.0.1:7480', true, 'us-east-1', "a b/c+d/é日本/(1)!*~'.txt"],
    ['https://s3.eu-west-1.amazonaws.com', false, 'eu-west-1', 'x/y z.bin'],
    ['https://garage.example.test', true, 'garage', 'k'],
    ['http://localhost:9000', true, 'us-east-1', 'percent%2F/and?query#hash'],
  ])('PUT with size and type signed: %s path-style=%s %s %j', async (endpoint, pathStyle, region, key) => {
    const client = sdk(endpoint, pathStyle, region);
    const expected = await getSignedUrl(client, new PutObjectCommand({ Bucket: 'wharf-bucket', Key: key, ContentType: 'image/jpeg', ContentLength: 1234 }), {
      expiresIn: 3600,
      signingDate: date,
      signableHeaders: new Set(['content-type']),
    });
    const ours = await new SigV4Presigner({ credentials, region, forcePathStyle: pathStyle }).presign({
      method: 'PUT',
      endpoint: new URL(endpoint),
      bucket: 'wharf-bucket',
      key,
      expiresInSeconds: 3600,
      headers: { 'content-type': 'image/jpeg', 'content-length': '1234' },
      query: { 'x-id': 'PutObject' },
      date,
    });
    expect(normal(ours)).toBe(normal(expected));
    client.destroy();
  });

  it('GET with a response Content-Disposition', async () => {
    const client = sdk('http://127.0.0.1:7480', true);
    const disposition = `attachment; filename="r port.pdf"; filename*=UTF-8''r%C3%A9port.pdf`;
    const expected = await getSignedUrl(client, new GetObjectCommand({ Bucket: 'b', Key: 'dir/r port.pdf', ResponseContentDisposition: disposition }), {
      expiresIn: 60,
      signingDate: date,
    });
    const ours = await new SigV4Presigner({ credentials, region: 'us-east-1', forcePathStyle: true }).presign({
      method: 'GET',
      endpoint: new URL('http://127.0.0.1:7480'),
      bucket: 'b',
      key: 'dir/r port.pdf',
      expiresInSeconds: 60,
      query: { 'response-content-disposition': disposition, 'x-id': 'GetObject' },
      date,
    });
    expect(normal(ours)).toBe(normal(expected));
    client.destroy();
  });
});

describe('the signing key kept per day', () => {
  it('signs with the key of each URL’s own day, as the SDK does', async () => {
    const client = sdk('http://127.0.0.1:7480', true);
    const presigner = new SigV4Presigner({ credentials, region: 'us-east-1', forcePathStyle: true });
    for (const at of ['2026-11-22T23:59:59.000Z', '2026-11-23T00:00:01.000Z', '2026-11-22T12:00:00.000Z']) {
      const signingDate = new Date(at);
      const expected = await getSignedUrl(client, new PutObjectCommand({ Bucket: 'b', Key: 'k', ContentType: 'text/plain', ContentLength: 5 }), {
        expiresIn: 600,
        signingDate,
        signableHeaders: new Set(['content-type']),
      });
      const ours = presigner.presignSync({
        method: 'PUT',
        endpoint: new URL('http://127.0.0.1:7480'),
        bucket: 'b',
        key: 'k',
        expiresInSeconds: 600,
        headers: { 'content-type': 'text/plain', 'content-length': '5' },
        query: { 'x-id': 'PutObject' },
        date: signingDate,
      });
      expect(normal(ours)).toBe(normal(expected));
    }
    client.destroy();
  });
});
