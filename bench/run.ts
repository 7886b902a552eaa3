/**
 * The benchmark runner: `npm run bench [-- name ...]` runs the named benchmarks (all when none
 * is named) and prints Markdown for BENCHMARKS.md. Benchmarks are scripts, not tests: each
 * compares Wharf with a bare baseline in the same run and reports ratios.
 */
import { execFileSync } from 'node:child_process';
import { runId, teardown } from '../test/pg/run-databases.ts';

const benchmarks: Record<string, () => Promise<{ run(): Promise<string> }>> = {
  healthz: () => import('./healthz.ts'),
  'start-compare': () => import('./start-compare.ts'),
  'core-compare': () => import('./core-compare.ts'),
  auth: () => import('./auth.ts'),
  'rate-limit': () => import('./rate-limit.ts'),
  'rate-limit-redis': () => import('./rate-limit-redis.ts'),
  'tokens-validate': () => import('./tokens-validate.ts'),
  'tokens-validate-pg': () => import('./tokens-validate-pg.ts'),
  'files-search': () => import('./files-search.ts'),
  'files-search-pg': () => import('./files-search-pg.ts'),
  'files-search-migration': () => import('./files-search-migration.ts'),
  'upload-presign': () => import('./upload-presign.ts'),
  webhooks: () => import('./webhooks.ts'),
  'webhooks-rate': () => import('./webhooks-rate.ts'),
  messaging: () => import('./messaging.ts'),
  'messaging-pg': () => import('./messaging-pg.ts'),
  instances: () => import('./instances.ts'),
  objects: () => import('./objects.ts'),
  whatsapp: () => import('./whatsapp.ts'),
  'db-layers': () => import('./db-layers.ts'),
  'db-checkpoints': () => import('./db-checkpoints.ts'),
  'migrate-data': () => import('./migrate-data.ts'),
};

// The load generators (this process, wrk) on core 0, servers on core 1 (see `pinned` in lib.ts).
if ((process.env.BENCH_CPU ?? '1') !== 'none')
  execFileSync('taskset', ['-a', '-p', '-c', process.env.BENCH_LOAD_CPU ?? '0', String(process.pid)], { stdio: 'ignore' });

const wanted = process.argv.slice(2);
for (const name of wanted) {
  if (!(name in benchmarks)) {
    process.stderr.write(`unknown benchmark ${name}; known: ${Object.keys(benchmarks).join(', ')}\n`);
    process.exit(2);
  }
}
// The databases the benchmarks make on the test PostgreSQL server are dropped at the end (test/pg/run-databases.ts).
runId();
try {
  for (const name of wanted.length ? wanted : Object.keys(benchmarks)) {
    const started = Date.now();
    const { run } = await benchmarks[name]!();
    const report = await run();
    process.stdout.write(
      `### ${name}\n\n${report}\n\n(${Math.round((Date.now() - started) / 1000)} s, node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)})\n\n`,
    );
  }
} finally {
  // Says a failure (the server gone) on stderr; never fails the run.
  await teardown();
}
