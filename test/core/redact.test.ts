import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../core/redact.ts';

describe('redactUrl', () => {
  it.each([
    // A SigV4 presigned URL: signature and credential hidden, the rest as written.
    [
      'http://127.0.0.1:3900/b/k%20x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=WAPPKEY%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=0123abcd',
      'http://127.0.0.1:3900/b/k%20x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=[redacted]',
    ],
    // A request target (no scheme or host), SigV2 query and a session token.
    [
      '/b/k?AWSAccessKeyId=AKIA&Expires=1&Signature=abc%3D&x-amz-security-token=tok',
      '/b/k?AWSAccessKeyId=[redacted]&Expires=1&Signature=[redacted]&x-amz-security-token=[redacted]',
    ],
    // Names compared case-insensitively, also when percent-encoded; a fragment is kept.
    ['/k?x-amz-signature=1&X%2DAmz%2DSignature=2&partNumber=3#frag', '/k?x-amz-signature=[redacted]&X%2DAmz%2DSignature=[redacted]&partNumber=3#frag'],
    // A parameter without a value, and URLs with no query at all.
    ['/k?Signature', '/k?Signature=[redacted]'],
    ['/bucket/key', '/bucket/key'],
    ['', ''],
  ])('%s', (url, redacted) => {
    expect(redactUrl(url)).toBe(redacted);
  });

  it('hides extra parameters on request', () => {
    expect(redactUrl('/cb?token=abc&state=1', ['TOKEN'])).toBe('/cb?token=[redacted]&state=1');
  });
});
