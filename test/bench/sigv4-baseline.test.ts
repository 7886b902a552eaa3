/** The upload-presign benchmark's hand-written SigV4 baseline signs exactly what @smithy/signature-v4 signs. */
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { NodeSha256 } from '../../plugins/storage/drivers/fs/auth.ts';

type PresignPut = (bucket: string, key: string, size: number, type: string, expiresIn: number, date?: Date) => string;
const { presigner } = (await import('../../bench/baselines/sigv4-presign.mjs' as string)) as {
  presigner(target: { accessKeyId: string; secretAccessKey: string; region: string; endpoint: string }): PresignPut;
};

const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

describe('the upload-presign baseline signer', () => {
  it.each([
    ['http://127.0.0.1:7480', 'us-east-1', 'bench/batch/AbC_d-12/photo-001.jpg', new Date('2026-11-22T07:04:05.678Z')],
    ['https://store.example.test', 'garage', "a b/c+d/é日本/(1)!*~'.txt", new Date('2026-12-31T23:59:59.999Z')],
  ])('matches @smithy/signature-v4 for %s %s %j', async (endpoint, region, key, date) => {
    const url = new URL(endpoint);
    const smithy = new SignatureV4({ service: 's3', region, credentials, sha256: NodeSha256, uriEscapePath: false, applyChecksum: false });
    const path = `/wharf-bucket/${key
      .split('/')
      .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
      .join('/')}`;
    const signed = await smithy.presign(
      {
        method: 'PUT',
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path,
        query: {},
        headers: { host: url.host, 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD', 'content-length': '1234', 'content-type': 'image/jpeg' },
      },
      { expiresIn: 3600, signingDate: date },
    );
    const ours = new URL(presigner({ ...credentials, region, endpoint })('wharf-bucket', key, 1234, 'image/jpeg', 3600, date));
    expect(ours.origin + ours.pathname).toBe(`${url.origin}${path}`);
    expect(Object.fromEntries(ours.searchParams)).toEqual(signed.query);
    // A wrong secret gives another signature: the comparison above can fail.
    const wrong = new URL(presigner({ ...credentials, secretAccessKey: 'other', region, endpoint })('wharf-bucket', key, 1234, 'image/jpeg', 3600, date));
    expect(wrong.searchParams.get('X-Amz-Signature')).not.toBe(signed.query?.['X-Amz-Signature']);
  });
});
