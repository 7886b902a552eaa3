/**
 * Media (session API key): `POST /api/upload` (a raw body with its Content-Type, a multipart
 * form, or JSON `{base64, mimetype}`) answers a public URL, `GET /api/media/{id}`, valid for
 * `upload_ttl_hours`, that `send-message` accepts as `imageUrl`, `documentUrl`, ...;
 * `POST /api/decrypt-media` takes a received media message node and answers a public URL,
 * `GET /api/decrypted-media/{id}`, valid for `decrypted_media_ttl_minutes`. Both public URLs
 * carry no credential: their ids are unguessable (as WasenderAPI's are meant to be), they
 * expire, and they are served so that a browser can never run them on Wharf's origin.
 */
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { z } from 'zod';
import { PUBLIC, type RouteGroup } from '../../../core/api.ts';
import { toWharfError, WharfError } from '../../../core/errors.ts';
import { contentDisposition } from '../../../core/http.ts';
import type { MediaUrl, ServedMedia } from '../media.ts';
import { mediaOf } from '../networks/nodes.ts';
import type { MessageKey, MessageNode } from '../networks/types.ts';
import { invalid, NOT_CONNECTED, type RouteDeps } from './common.ts';

const MIME = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}(\s*;\s*[a-z0-9_.-]+=("[^"\\\r\n]*"|[a-z0-9_.+-]+))*$/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;
const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*);base64,/i;
/** Types a browser may show inline; everything else is served as an attachment. */
const INLINE = /^(image\/(jpeg|png|gif|webp)|video\/(mp4|3gpp|webm)|audio\/[a-z0-9.+-]+)$/;

const uploadBody = z.lazy(() =>
  z
    .strictObject({
      base64: z
        .string()
        .min(1)
        .describe('JSON uploads: the file, base64-encoded, optionally as a data URL (data:image/png;base64,...). Raw and multipart uploads send no JSON.'),
      mimetype: z.string().max(255).regex(MIME, 'must be a MIME type such as image/png').optional().describe('The MIME type; overrides the one of a data URL.'),
      fileName: z.string().min(1).max(255).optional().describe('A file name (documents show it).'),
    })
    .partial(),
);

const uploadQuery = z.lazy(() =>
  z.strictObject({
    fileName: z.string().min(1).max(255).optional().describe('Raw uploads: a file name for the file (documents show it).'),
  }),
);

const messageEnvelope = z.lazy(() =>
  z.looseObject({
    key: z.looseObject({ id: z.string().max(128).optional() }).optional(),
    message: z.record(z.string(), z.unknown()).describe('The message node: imageMessage, videoMessage, audioMessage, documentMessage or stickerMessage.'),
  }),
);

const decryptBody = z.lazy(() =>
  z.strictObject({
    data: z
      .looseObject({
        messages: z.union([messageEnvelope, z.array(messageEnvelope).min(1).max(1)]).optional(),
        key: z.looseObject({ id: z.string().max(128).optional() }).optional(),
        message: z.record(z.string(), z.unknown()).optional(),
      })
      .superRefine((d, ctx) => {
        if (d.messages === undefined && d.message === undefined) {
          ctx.addIssue({
            code: 'custom',
            path: ['messages'],
            message: 'is required: {messages: {key, message}} as WasenderAPI documents it, or the {key, message} of a webhook',
          });
        }
      })
      .describe("The received message: `{messages: {key, message}}` (WasenderAPI), or a webhook's `data` (`{key, message, ...}`)."),
  }),
);

const urlResult = z.lazy(() =>
  z.object({
    success: z.literal(true),
    publicUrl: z.string(),
    data: z.object({
      id: z.string().optional(),
      publicUrl: z.string(),
      mimetype: z.string(),
      size: z.int(),
      fileName: z.string().nullable(),
      expiresAt: z.string(),
    }),
  }),
);

function tooLarge(limit: number): WharfError {
  return new WharfError('payload_too_large', `The file is larger than the upload limit of ${limit} bytes`, { headers: { Connection: 'close' } });
}

/** Writes stored bytes as a download that cannot act on Wharf's origin (no sniffing, sandboxed, inline only for media types). */
function serveFile(ctx: Context, { file, expiresAt }: ServedMedia): void {
  const mimetype = MIME.test(file.mimetype) ? file.mimetype : 'application/octet-stream';
  const essence = mimetype.split(';')[0]!.trim().toLowerCase();
  const seconds = Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000));
  ctx.set('Content-Type', mimetype);
  ctx.set('Content-Disposition', contentDisposition(INLINE.test(essence) ? 'inline' : 'attachment', file.fileName));
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Content-Security-Policy', "default-src 'none'; sandbox");
  ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
  ctx.set('Cache-Control', `private, max-age=${seconds}`);
  ctx.set('Expires', new Date(expiresAt).toUTCString());
  ctx.body = file.bytes;
}

/** Reads the raw body up to `limit` bytes: 413 beyond it (without reading on when Content-Length says so). */
async function readBody(ctx: Context, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.request.length });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw tooLarge(limit);
    throw toWharfError(err);
  }
}

interface IncomingFile {
  bytes: Buffer;
  mimetype: string;
  fileName?: string;
}

/** The uploaded file, whichever of the three forms the request uses. */
async function incomingFile(ctx: Context, body: z.output<typeof uploadBody>, query: z.output<typeof uploadQuery>, limit: number): Promise<IncomingFile> {
  if (ctx.request.is('application/json', 'application/*+json', 'application/x-www-form-urlencoded')) {
    if (body.base64 === undefined) throw invalid('base64', 'base64 is required for a JSON upload (or send the file itself as the body, with its Content-Type)');
    const dataUrl = DATA_URL.exec(body.base64);
    const encoded = (dataUrl ? body.base64.slice(dataUrl[0].length) : body.base64).replace(/\s+/g, '');
    if (!BASE64.test(encoded) || encoded.length === 0) throw invalid('base64', 'base64 must be base64-encoded bytes, optionally as a data URL');
    const mimetype = body.mimetype ?? (dataUrl?.[1] ? `${dataUrl[1]}${dataUrl[2]!}` : undefined);
    if (!mimetype) throw invalid('mimetype', 'mimetype is required unless base64 is a data URL (data:image/png;base64,...)');
    if (!MIME.test(mimetype)) throw invalid('mimetype', 'mimetype must be a MIME type such as image/png');
    if (Math.floor((encoded.length * 3) / 4) > limit + 2) throw tooLarge(limit);
    const bytes = Buffer.from(encoded, encoded.includes('-') || encoded.includes('_') ? 'base64url' : 'base64');
    if (bytes.length === 0) throw invalid('base64', 'base64 decodes to no bytes');
    if (bytes.length > limit) throw tooLarge(limit);
    return { bytes, mimetype, fileName: body.fileName };
  }
  const type = ctx.get('content-type').trim();
  if (!type) {
    throw invalid('file', 'send the file as the request body with its Content-Type, as multipart/form-data (field "file"), or as JSON {base64, mimetype}');
  }
  if (ctx.request.is('multipart/form-data')) {
    const raw = await readBody(ctx, limit + 64 * 1024);
    let form: FormData;
    try {
      form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    } catch {
      throw invalid('file', 'the multipart/form-data body is malformed');
    }
    const entry = form.get('file') ?? [...form.values()].find((v) => typeof v !== 'string');
    if (!entry || typeof entry === 'string') throw invalid('file', 'the multipart body has no file part (name it "file")');
    const override = form.get('mimetype');
    const mimetype = typeof override === 'string' && override ? override : entry.type || 'application/octet-stream';
    if (!MIME.test(mimetype)) throw invalid('mimetype', 'mimetype must be a MIME type such as image/png');
    const bytes = Buffer.from(await entry.arrayBuffer());
    if (bytes.length === 0) throw invalid('file', 'the file part is empty');
    if (bytes.length > limit) throw tooLarge(limit);
    return { bytes, mimetype, fileName: query.fileName ?? (entry.name && entry.name !== 'blob' ? entry.name : undefined) };
  }
  if (!MIME.test(type)) throw invalid('Content-Type', 'Content-Type must be the MIME type of the file, such as image/png');
  const bytes = await readBody(ctx, limit);
  if (bytes.length === 0) throw invalid('file', 'the request body is empty: send the file as the body');
  return { bytes, mimetype: type, fileName: query.fileName };
}

/** The answer of an upload or a decryption: WasenderAPI puts the URL at the top level too. */
function urlAnswer(url: MediaUrl, withId: boolean) {
  const { id, ...rest } = url;
  return { success: true, publicUrl: url.publicUrl, data: withId ? { id, ...rest } : rest };
}

export function mediaRoutes(deps: RouteDeps): RouteGroup {
  const { sessions, media, config } = deps;
  const group = deps.api.group({ prefixes: ['/api/upload', '/api/media', '/api/decrypt-media', '/api/decrypted-media'], envelope: 'messaging' });
  const auth = sessions.credentials.sessionKey;
  const tag = 'Media';
  /** A public URL's file: no credential (the id is unguessable; it expires). */
  const publicFile = (path: string, what: string, bytes: string, load: (params: Record<string, string>) => ServedMedia | Promise<ServedMedia>) =>
    group.route({
      method: 'GET',
      path,
      summary: `${what} (no credential: the id is unguessable; it expires)`,
      tag,
      auth: PUBLIC,
      success: { description: `${bytes}, with their Content-Type` },
      errors: { 404: 'Unknown or expired: `{success: false, error, message}`' },
      async handler(ctx, { params }) {
        serveFile(ctx, await load(params));
      },
    });

  group.route({
    method: 'POST',
    path: '/api/upload',
    summary:
      'Upload a file to send later: the raw bytes as the body with their Content-Type, a multipart/form-data body (field "file"), or JSON {base64, mimetype}. Answers a public URL valid for upload_ttl_hours, to use as imageUrl, videoUrl, documentUrl, audioUrl or stickerUrl',
    tag,
    auth,
    body: uploadBody,
    // The file itself may be the body, of its own type.
    bodyTypes: ['multipart/form-data', '*/*'],
    query: uploadQuery,
    success: { schema: urlResult },
    errors: {
      ...NOT_CONNECTED,
      413: 'Larger than upload_max_bytes (or, for JSON, server.body_limit_bytes): `{success: false, message}`',
    },
    async handler(ctx, { auth, body, query }) {
      const connected = sessions.connected(auth);
      const file = await incomingFile(ctx, body, query, config.upload_max_bytes);
      ctx.body = urlAnswer(await media.upload(connected, file), true);
    },
  });

  publicFile('/api/media/:file', 'An uploaded file, by the public URL POST /api/upload gave', 'The bytes', (params) => media.uploaded(params.file));

  group.route({
    method: 'POST',
    path: '/api/decrypt-media',
    summary:
      'Decrypt the media of a received message (imageMessage, videoMessage, audioMessage, documentMessage or stickerMessage); answers a public URL to the plaintext, valid for decrypted_media_ttl_minutes',
    tag,
    auth,
    body: decryptBody,
    success: { schema: urlResult },
    errors: {
      404: 'The media is not on the network (any more): `{success: false, error, message}`',
      ...NOT_CONNECTED,
    },
    async handler(ctx, { auth, body }) {
      const connected = sessions.connected(auth);
      const { messages } = body.data;
      const envelope = Array.isArray(messages) ? messages[0] : messages;
      const node = (envelope?.message ?? body.data.message) as MessageNode;
      if (!mediaOf(node)) {
        throw invalid(
          envelope ? 'data.messages.message' : 'data.message',
          'the message has no imageMessage, videoMessage, audioMessage, documentMessage or stickerMessage',
        );
      }
      const key = (envelope?.key ?? body.data.key) as Partial<MessageKey> | undefined;
      ctx.body = urlAnswer(await media.decrypt(connected, node, key), false);
    },
  });

  publicFile('/api/decrypted-media/:id', 'Decrypted media, by the public URL POST /api/decrypt-media gave', 'The plaintext bytes', (params) =>
    media.decrypted(params.id),
  );

  return group;
}
