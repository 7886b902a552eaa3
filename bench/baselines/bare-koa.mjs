/** Baseline: a bare Koa server with a router answering GET /healthz. Usage: node bare-koa.mjs PORT
 * Plain JavaScript, so the baseline pays no TypeScript loading. */
import Router from '@koa/router';
import Koa from 'koa';

const app = new Koa();
const router = new Router();
router.get('/healthz', (ctx) => {
  ctx.body = { status: 'ok' };
});
app.use(router.routes());
app.listen(Number(process.argv[2]), '127.0.0.1');
