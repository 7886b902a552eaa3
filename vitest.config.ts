import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    // Many tests start real processes (the CLI, Ceph, the binary): on a loaded two-core machine a
    // single start can take seconds, so a test may run long before it is stuck.
    testTimeout: 90_000,
    hookTimeout: 300_000,
    // expect.poll gives up after 1 s by default: a page whose script is built on its first request,
    // or a process on a loaded machine, can take longer. A poll that succeeds returns at once.
    expect: { poll: { timeout: 15_000 } },
    // Tests start real servers (Ceph RGW, the built binary); two cores, so keep parallelism modest.
    maxWorkers: 2,
    // The databases a run makes on the test PostgreSQL server are dropped when it ends.
    globalSetup: ['./test/pg/run-databases.ts'],
    projects: [
      { extends: true, test: { name: 'all', include: ['test/**/*.test.ts'] } },
      // The file-storage contract tests run a second time, unchanged, against the embedded
      // store's S3 endpoint instead of Ceph RGW (test/helpers/s3.ts reads WHARF_TEST_STORE).
      { extends: true, test: { name: 'storage on the embedded store', include: ['test/plugins/storage/*.test.ts'], env: { WHARF_TEST_STORE: 'embedded' } } },
      // The rate-limit tests run a second time, unchanged, with the counters in Redis instead of
      // memory (test/helpers/redis.ts reads WHARF_TEST_RATE_LIMIT_STORE): same headers, same 429s.
      {
        extends: true,
        test: { name: 'rate limit on redis', include: ['test/plugins/rate_limit/limits.test.ts'], env: { WHARF_TEST_RATE_LIMIT_STORE: 'redis' } },
      },
      // The suites of what runs on PostgreSQL run a second time, unchanged, each app on a fresh
      // PostgreSQL database with the plugins not ported yet disabled (test/helpers/postgres.ts reads
      // WHARF_TEST_DATABASE; test/pg/postgres.sh starts the server). test/core/db.test.ts and the
      // tokens store test cover both engines in "all" already. The storage suites use the S3 store
      // they use in "all" (Ceph RGW, test/helpers/s3.ts): the s3 driver is what instances sharing
      // a database share; apps of other suites on the embedded store declare single_instance.
      {
        extends: true,
        test: {
          name: 'on postgres',
          include: [
            'test/core/database.test.ts',
            'test/plugins/identity/*.test.ts',
            'test/plugins/storage/*.test.ts',
            'test/plugins/storage/search/*.test.ts',
            'test/plugins/storage/s3-driver/*.test.ts',
            // The embedded store's limits and records following its objects, on one instance (single_instance).
            'test/plugins/storage/embedded/quota.test.ts',
            'test/plugins/tokens/*.test.ts',
            'test/plugins/sessions/**/*.test.ts',
            'test/plugins/webhooks/*.test.ts',
          ],
          // reads.test.ts counts the statements better-sqlite3 runs (by patching its Statement): it
          // measures the SQLite path and has nothing to count on PostgreSQL.
          exclude: ['test/plugins/webhooks/reads.test.ts'],
          env: { WHARF_TEST_DATABASE: 'postgres' },
        },
      },
    ],
  },
});
