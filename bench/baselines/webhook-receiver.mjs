/**
 * A webhook receiver for the webhooks benchmark, in its own process so that Wharf's dispatcher
 * and the bare undici loop deliver to the same server. It answers 200 `ok` at once, or, paused,
 * holds every request until resumed. Control (not counted): GET /_control/stats ->
 * {count, first, last, held} (times as Unix ms with fractions; held: requests held before the call), POST /_control/reset, /_control/pause,
 * /_control/resume. Usage: node webhook-receiver.mjs PORT
 */
import http from 'node:http';

const now = () => performance.timeOrigin + performance.now();
let count = 0;
let first = null;
let last = null;
let paused = false;
let held = [];

const answer = (res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
  res.end('ok');
};

http
  .createServer((req, res) => {
    if (req.url.startsWith('/_control/')) {
      req.resume();
      req.on('end', () => {
        const action = req.url.slice('/_control/'.length);
        const wasHeld = held.length;
        if (action === 'reset') {
          count = 0;
          first = last = null;
        } else if (action === 'pause') paused = true;
        else if (action === 'resume') {
          paused = false;
          for (const r of held) answer(r);
          held = [];
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ count, first, last, held: wasHeld }));
      });
      return;
    }
    req.resume();
    req.on('end', () => {
      const t = now();
      count++;
      first ??= t;
      last = t;
      if (paused) held.push(res);
      else answer(res);
    });
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
