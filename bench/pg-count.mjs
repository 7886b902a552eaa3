// Counts every query a process sends to PostgreSQL through pg, by statement text, into
// $PGCOUNT_OUT.<pid> (JSON: total and counts, refreshed every 500 ms and at exit), and how many
// of them were sent while a query of the same connection was still unanswered (`behind`,
// pipelined: no wait for an answer before them); `fresh` = total - behind, the round trips
// someone waited for before sending (BENCHMARKS.md, issue 16 part 10). Given to the
// servers of a benchmark with NODE_OPTIONS="--import $PWD/bench/pg-count.mjs" PGCOUNT_OUT=/tmp/count
// (BENCHMARKS.md, issue 16 part 9); does nothing without PGCOUNT_OUT.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const out = process.env.PGCOUNT_OUT;
if (out) {
  const pg = createRequire(`${process.cwd()}/package.json`)('pg');
  const counts = new Map();
  const behindCounts = new Map();
  let total = 0;
  let behind = 0;
  /** Queries sent and not answered yet, by client. */
  const unanswered = new WeakMap();
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function counted(config, ...rest) {
    const text = typeof config === 'string' ? config : (config?.text ?? '?');
    const key = text
      .replace(/\s+/g, ' ')
      .replace(/SELECT id, org_id, type, name.*? FROM/, 'SELECT <session> FROM')
      .slice(0, 140);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    total++;
    const pending = unanswered.get(this) ?? 0;
    if (pending > 0) {
      behind++;
      behindCounts.set(key, (behindCounts.get(key) ?? 0) + 1);
    }
    unanswered.set(this, pending + 1);
    const answered = () => unanswered.set(this, unanswered.get(this) - 1);
    const result = query.call(this, config, ...rest);
    if (typeof result?.then === 'function') result.then(answered, answered);
    else answered();
    return result;
  };
  const dump = () =>
    writeFileSync(
      `${out}.${process.pid}`,
      JSON.stringify({
        total,
        behind,
        fresh: total - behind,
        counts: [...counts].sort((a, b) => b[1] - a[1]).map(([key, n]) => [key, n, behindCounts.get(key) ?? 0]),
      }),
    );
  setInterval(dump, 500).unref();
  process.on('exit', dump);
}
