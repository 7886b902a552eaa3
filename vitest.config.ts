import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 300_000,
    // Tests start real servers (Ceph RGW, the built binary); two cores, so keep parallelism modest.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'all', include: ['test/**/*.test.ts'] } },
      // The file-storage contract tests run a second time, unchanged, against the embedded
      // store's S3 endpoint instead of Ceph RGW (test/helpers/s3.ts reads WHARF_TEST_STORE).
      { extends: true, test: { name: 'storage on the embedded store', include: ['test/plugins/storage/*.test.ts'], env: { WHARF_TEST_STORE: 'embedded' } } },
    ],
  },
});
