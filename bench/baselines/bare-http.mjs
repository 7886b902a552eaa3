/** Baseline: the least a Node server can do for GET /healthz. Usage: node bare-http.mjs PORT */
import http from 'node:http';

const body = JSON.stringify({ status: 'ok' });
http
  .createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } else {
      res.writeHead(404).end();
    }
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
