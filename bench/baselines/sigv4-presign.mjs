/**
 * A hand-written SigV4 presigned PUT on node:crypto, for the upload-presign baseline: the
 * canonical request, string to sign and signature of
 * https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html, path-style,
 * with host, content-length and content-type signed and an unsigned payload, as Wharf presigns
 * phase 1's PUTs. The signing key is derived once per day (as any signer may) and kept as a
 * KeyObject (an HMAC under a Buffer key costs about six times more in Node 24). Plain JavaScript,
 * kept apart from Wharf's code on purpose; test/bench/sigv4-baseline.test.ts checks it against
 * @smithy/signature-v4.
 */
import { createHash, createHmac, createSecretKey } from 'node:crypto';

const encode = (text) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key, data) => createHmac('sha256', key).update(data).digest();

export function presigner({ accessKeyId, secretAccessKey, region, endpoint }) {
  const url = new URL(endpoint);
  const host = url.host;
  let keyDay = '';
  let signingKey;
  return function presignPut(bucket, key, size, contentType, expiresIn, date = new Date()) {
    const amzDate = date.toISOString().replace(/[-:]|\.\d{3}/g, '');
    const day = amzDate.slice(0, 8);
    if (day !== keyDay) {
      signingKey = createSecretKey(hmac(hmac(hmac(hmac(`AWS4${secretAccessKey}`, day), region), 's3'), 'aws4_request'));
      keyDay = day;
    }
    const scope = `${day}/${region}/s3/aws4_request`;
    const path = `/${encode(bucket)}/${key.split('/').map(encode).join('/')}`;
    const query =
      `X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Content-Sha256=UNSIGNED-PAYLOAD&X-Amz-Credential=${encode(`${accessKeyId}/${scope}`)}` +
      `&X-Amz-Date=${amzDate}&X-Amz-Expires=${expiresIn}&X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost`;
    const canonical = `PUT\n${path}\n${query}\ncontent-length:${size}\ncontent-type:${contentType}\nhost:${host}\n\ncontent-length;content-type;host\nUNSIGNED-PAYLOAD`;
    const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${createHash('sha256').update(canonical).digest('hex')}`;
    const signature = createHmac('sha256', signingKey).update(toSign).digest('hex');
    return `${url.protocol}//${host}${path}?${query}&X-Amz-Signature=${signature}`;
  };
}
