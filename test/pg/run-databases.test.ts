// The databases of a run of the tests are dropped when it ends, and only those (test/pg/run-databases.ts).
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { dropDatabase, ensurePostgres, freshDatabase } from '../helpers/postgres.ts';
import { dropRunDatabases, runDatabaseName } from './run-databases.ts';

describe("a run's databases on the test PostgreSQL server", () => {
  it("belong to the run vitest's global setup named: freshDatabase's names carry its id", async () => {
    // Set in the main process before the workers started (vitest.config.ts globalSetup), not by this worker.
    const run = process.env.WHARF_TEST_RUN;
    expect(run).toMatch(/^[0-9a-f]{8}$/);
    const name = new URL(await freshDatabase()).pathname.slice(1);
    expect(name).toMatch(new RegExp(`^wharf_test_${run}_[0-9a-f]{32}$`));
    await dropDatabase(`postgres://x/${name}`);
  });

  it("are named after the run and dropped at its end, connections and all; another run's stay", async () => {
    const url = await ensurePostgres();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const saved = process.env.WHARF_TEST_RUN;
    const made: Record<string, string[]> = {};
    try {
      for (const run of ['aaaa0001', 'aaaa0002']) {
        process.env.WHARF_TEST_RUN = run;
        made[run] = [runDatabaseName(url, 'one'), runDatabaseName(url, 'two')];
        for (const name of made[run]!) await client.query(`CREATE DATABASE ${name}`);
      }
      expect(made.aaaa0001).toEqual(['wharf_test_aaaa0001_one', 'wharf_test_aaaa0001_two']);
      // A connection left open on one of them does not keep it.
      const open = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/wharf_test_aaaa0001_one' }).toString() });
      await open.connect();
      open.on('error', () => {});
      expect(await dropRunDatabases('aaaa0001')).toBe(2);
      const left = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'wharf_test_aaaa000%' ORDER BY 1");
      expect(left.rows.map((r) => r.datname)).toEqual(made.aaaa0002);
      // Its note is gone with them: a second call finds nothing to drop.
      expect(await dropRunDatabases('aaaa0001')).toBe(0);
      expect(await dropRunDatabases('aaaa0002')).toBe(2);
      await open.end().catch(() => {});
    } finally {
      if (saved === undefined) delete process.env.WHARF_TEST_RUN;
      else process.env.WHARF_TEST_RUN = saved;
      for (const name of Object.values(made).flat()) await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    }
  });
});
