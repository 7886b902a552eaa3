// Counts every query a process sends to PostgreSQL through pg, by statement text, into
// $PGCOUNT_OUT.<pid> (JSON: total and counts, refreshed every 500 ms and at exit). Given to the
// servers of a benchmark with NODE_OPTIONS="--import $PWD/bench/pg-count.mjs" PGCOUNT_OUT=/tmp/count
// (BENCHMARKS.md, issue 16 part 9); does nothing without PGCOUNT_OUT.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const out = process.env.PGCOUNT_OUT;
if (out) {
  const pg = createRequire(`${process.cwd()}/package.json`)('pg');
  const counts = new Map();
  let total = 0;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function counted(config, ...rest) {
    const text = typeof config === 'string' ? config : (config?.text ?? '?');
    const key = text
      .replace(/\s+/g, ' ')
      .replace(/SELECT id, org_id, type, name.*? FROM/, 'SELECT <session> FROM')
      .slice(0, 140);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    total++;
    return query.call(this, config, ...rest);
  };
  const dump = () => writeFileSync(`${out}.${process.pid}`, JSON.stringify({ total, counts: [...counts].sort((a, b) => b[1] - a[1]) }));
  setInterval(dump, 500).unref();
  process.on('exit', dump);
}
