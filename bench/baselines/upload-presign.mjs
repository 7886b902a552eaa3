/**
 * Baseline for phase 1 of an upload (issue 16): `POST /api/files/upload` with nothing but
 * node:http, better-sqlite3 and a hand-written SigV4 signer on node:crypto (./sigv4-presign.mjs).
 * Each request reads the JSON body ({ appId, prefix, files }), looks up the Bearer token (SHA-256,
 * the token row by hash joined to its app, as POST /api/tokens/validate does) and checks it names
 * the app, then answers one presigned PUT per file in Wharf's JSON shape. No store round trip, no
 * request log: the minimum phase 1 does. With `reserve` it also records the reservations as Wharf
 * does (one row per file in storage_uploads, one IMMEDIATE transaction, synchronous=FULL as
 * better-sqlite3 opens it), to tell that durable write from the rest. Plain JavaScript.
 * Usage: node upload-presign.mjs PORT DB_PATH TARGET_JSON ({endpoint, region, accessKeyId, secretAccessKey}) [reserve]
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import Database from 'better-sqlite3';
import { presigner } from './sigv4-presign.mjs';

const [port, dbPath, targetJson, mode] = process.argv.slice(2);
const presignPut = presigner(JSON.parse(targetJson));
const db = new Database(dbPath, { fileMustExist: true });
db.pragma('journal_mode = WAL');
const lookup = db.prepare(
  `SELECT t.app_id, a.bucket_name FROM tokens_app_tokens t
   JOIN storage_apps a ON a.id = t.app_id AND a.deleting = 0 WHERE t.token_hash = ?`,
);

const insertUpload = db.prepare(`INSERT INTO storage_uploads (app_id, key, size, type, state, created_at, expires_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)`);
const reserve = db.transaction((appId, files, now, expiresAt) => {
  for (const f of files) insertUpload.run(appId, f.key, f.size, f.type, now, expiresAt);
});

function answer(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const safe = (text) => text.replace(/[^A-Za-z0-9._-]+/g, '-');

http
  .createServer((req, res) => {
    if (req.url === '/healthz') return answer(res, 200, { status: 'ok' });
    if (req.method !== 'POST' || req.url !== '/api/files/upload') return answer(res, 404, { error: 'Not found' });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return answer(res, 400, { error: 'Malformed JSON body' });
      }
      if (typeof body?.appId !== 'string' || !Array.isArray(body.files) || !body.files.length)
        return answer(res, 400, { error: 'appId and files are required' });
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const row = token ? lookup.get(createHash('sha256').update(token).digest('hex')) : undefined;
      if (!row || row.app_id !== body.appId) return answer(res, 401, { error: 'Invalid API token' });
      const prefix = typeof body.prefix === 'string' && body.prefix ? `${safe(body.prefix)}/` : '';
      const uploads = [];
      for (const f of body.files) {
        if (typeof f?.name !== 'string' || !Number.isSafeInteger(f.size) || typeof f.type !== 'string') return answer(res, 400, { error: 'bad file' });
        const key = `${prefix}${randomBytes(12).toString('base64url')}/${safe(f.name)}`;
        uploads.push({ key, name: f.name, size: f.size, type: f.type, presignedUrl: presignPut(row.bucket_name, key, f.size, f.type, 3600) });
      }
      if (mode === 'reserve') {
        const now = Date.now();
        reserve.immediate(row.app_id, uploads, new Date(now).toISOString(), new Date(now + 3600_000).toISOString());
      }
      answer(res, 200, { uploads });
    });
  })
  .listen(Number(port), '127.0.0.1');
