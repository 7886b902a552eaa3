/**
 * Where a start on PostgreSQL waits: runs the server's start (core/lifecycle.ts `start`, from
 * source, in this process) against a database of the test server (test/pg/postgres.sh) and prints
 * every round trip to PostgreSQL (connects and queries, with the time it was sent and how long it
 * took), then the first GET /healthz. Not a ratio benchmark: a profile of the waits.
 *   node bench/start-phases.ts [fresh|migrated] [N]
 * fresh (default): an empty database (made before the clock starts); migrated: the same database
 * started a second time (the usual restart). N starts, the last one printed in full, every one's
 * total and round trips summed up.
 */
import pg from 'pg';
import { resolveConfig } from '../core/config.ts';
import { start } from '../core/lifecycle.ts';
import { createLogger } from '../core/logger.ts';
import { builtinPlugins } from '../plugins/index.ts';
import { tempDir } from '../test/helpers/app.ts';
import { dropDatabase, freshDatabase, postgresPlugins } from '../test/helpers/postgres.ts';
import { cpuMicros, freePort, median } from './lib.ts';

interface Trip {
  at: number;
  ms: number;
  what: string;
}

let trips: Trip[] = [];
let t0 = 0;
/** Calls `fn` (the original method) and records how long its promise or callback took. */
function record(what: string, fn: (...args: unknown[]) => unknown, self: unknown, args: unknown[]): unknown {
  const at = performance.now() - t0;
  const done = () => trips.push({ at, ms: performance.now() - t0 - at, what });
  const callback = args.at(-1);
  if (typeof callback === 'function') {
    return fn.apply(self, [
      ...args.slice(0, -1),
      (...results: unknown[]) => {
        done();
        return callback(...results);
      },
    ]);
  }
  const result = fn.apply(self, args) as Promise<unknown>;
  result.then(done, done);
  return result;
}
const proto = pg.Client.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
const query = proto.query!;
const connect = proto.connect!;
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as string | { text: string; name?: string };
  const text = typeof q === 'string' ? q : q.text;
  return record(`query ${text.replace(/\s+/g, ' ').trim().slice(0, 90)}`, query, this, args);
};
/** The server processes (backends) of this start's connections: their CPU is PostgreSQL's share of the start. */
let backends = new Set<pg.Client>();
proto.connect = function (this: unknown, ...args: unknown[]) {
  backends.add(this as pg.Client);
  return record('connect', connect, this, args);
};
/** A backend's CPU time (user + system), ms (the server runs on this machine). */
function backendCpuMs(client: pg.Client): number {
  const pid = (client as unknown as { processID: number | null }).processID;
  try {
    return pid ? cpuMicros(pid) / 1000 : 0;
  } catch {
    return 0; // gone
  }
}

const mode = process.argv[2] ?? 'fresh';
const n = Number(process.argv[3] ?? 5);
const plugins = postgresPlugins().runs;
const quiet = createLogger('warn');
const totals: number[] = [];
const waits: number[] = [];
const serverCpus: number[] = [];
let migrated: string | undefined;
const migratedDir = tempDir('wharf-bench-phases-');
for (let i = 0; i < n; i++) {
  const url = mode === 'migrated' ? (migrated ??= await freshDatabase()) : await freshDatabase();
  const config = resolveConfig(
    builtinPlugins.filter((p) => plugins.includes(p.name)),
    {
      env: {
        WHARF_DATABASE__URL: url,
        WHARF_PLUGINS__RATE_LIMIT__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__SINGLE_INSTANCE: 'true',
        WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0',
      },
      flags: { listen: `127.0.0.1:${await freePort()}`, dataDir: mode === 'migrated' ? migratedDir : tempDir('wharf-bench-phases-') },
    },
  );
  if (mode === 'migrated' && i === 0) await (await start(config, { listen: true, log: quiet })).close();
  trips = [];
  backends = new Set();
  t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const running = await start(config, { listen: true, log: quiet });
  const started = performance.now() - t0;
  const res = await fetch(`${running.url}/healthz`);
  await res.arrayBuffer();
  const total = performance.now() - t0;
  totals.push(total);
  const serverCpu = [...backends].reduce((sum, client) => sum + backendCpuMs(client), 0);
  const ownCpu = process.cpuUsage(cpu0);
  serverCpus.push(serverCpu);
  const waited = trips.reduce((s, t) => s + t.ms, 0);
  waits.push(waited);
  console.log(
    `start ${i + 1}: ${total.toFixed(0)} ms to the first ${res.status} (start() ${started.toFixed(0)} ms); ${trips.length} round trips, ${waited.toFixed(0)} ms in them; CPU: this process ${((ownCpu.user + ownCpu.system) / 1000).toFixed(0)} ms, PostgreSQL's backends ${serverCpu.toFixed(0)} ms`,
  );
  if (i === n - 1) for (const t of trips) console.log(`  ${t.at.toFixed(1).padStart(7)} +${t.ms.toFixed(1).padStart(6)} ms  ${t.what}`);
  await running.close();
  if (mode !== 'migrated') await dropDatabase(url);
}
if (migrated) await dropDatabase(migrated);
console.log(
  `median of ${n}: ${median(totals).toFixed(0)} ms to the first 200, ${trips.length} round trips, ${median(waits).toFixed(0)} ms in them, PostgreSQL's CPU ${median(serverCpus).toFixed(0)} ms`,
);
process.exit(0);
