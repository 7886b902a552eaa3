import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 300_000,
    // Tests start real servers (Ceph RGW, the built binary); two cores, so keep parallelism modest.
    maxWorkers: 2,
  },
});
