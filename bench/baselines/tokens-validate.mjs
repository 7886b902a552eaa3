/**
 * Baseline: POST /api/tokens/validate with nothing but node:http and better-sqlite3, doing the
 * same lookup as Wharf (SHA-256 of the token, the token row by hash, its app's bucket) and
 * answering the same JSON. Plain JavaScript, so it pays no TypeScript loading.
 * Usage: node tokens-validate.mjs PORT DB_PATH STORAGE_JSON
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import Database from 'better-sqlite3';

const [port, dbPath, storageJson] = process.argv.slice(2);
const storage = JSON.parse(storageJson);
const db = new Database(dbPath, { fileMustExist: true });
db.pragma('journal_mode = WAL');
const lookup = db.prepare(
  `SELECT t.id, t.app_id, a.bucket_name FROM tokens_app_tokens t
   JOIN storage_apps a ON a.id = t.app_id AND a.deleting = 0 WHERE t.token_hash = ?`,
);

function answer(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

http
  .createServer((req, res) => {
    if (req.url === '/healthz') return answer(res, 200, { status: 'ok' });
    if (req.method !== 'POST' || req.url !== '/api/tokens/validate') return answer(res, 404, { error: 'Not found' });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let token;
      try {
        token = JSON.parse(Buffer.concat(chunks).toString('utf8')).token;
      } catch {
        return answer(res, 400, { error: 'Malformed JSON body' });
      }
      if (typeof token !== 'string' || !token) return answer(res, 400, { error: 'token is required' });
      const row = token.startsWith('svc_live_') ? lookup.get(createHash('sha256').update(token).digest('hex')) : undefined;
      if (!row) return answer(res, 401, { error: 'Invalid API token' });
      answer(res, 200, { valid: true, appId: row.app_id, bucketName: row.bucket_name, storage });
    });
  })
  .listen(Number(port), '127.0.0.1');
