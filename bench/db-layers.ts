/**
 * The data layer's cost (issue 15): a primary-key lookup on SQLite, through better-sqlite3
 * directly (synchronous, a prepared statement: the floor), through Wharf's thin async layer
 * (core/db-sqlite.ts), and through Kysely with its SQLite dialect (the query builder the issue
 * names as an option, a devDependency here only for this comparison). Same file, same rows,
 * same keys, rounds interleaved; the ratio is time per lookup against the direct call.
 * Usage: node bench/run.ts db-layers
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kysely, SqliteDialect } from 'kysely';
import { openSqlite } from '../core/db-sqlite.ts';
import { fmt, median } from './lib.ts';

const ROWS = 10_000;

export async function run(options: { rounds?: number; lookups?: number } = {}): Promise<string> {
  const rounds = options.rounds ?? 7;
  const lookups = options.lookups ?? 200_000;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-db-'));
  const db = openSqlite(path.join(dir, 'bench.db'));
  try {
    await db.exec('CREATE TABLE items (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, name TEXT NOT NULL, created_at TEXT NOT NULL)');
    await db.transaction(async (tx) => {
      for (let i = 0; i < ROWS; i++) await tx.run('INSERT INTO items VALUES (?, ?, ?, ?)', [`id-${i}`, 'app', `name ${i}`, new Date().toISOString()]);
    });
    const keys = Array.from({ length: 1024 }, (_, i) => `id-${(i * 7919) % ROWS}`);
    const raw = db.raw.prepare('SELECT id, app_id, name, created_at FROM items WHERE id = ?');
    interface Items {
      items: { id: string; app_id: string; name: string; created_at: string };
    }
    const kysely = new Kysely<Items>({ dialect: new SqliteDialect({ database: db.raw }) });

    const cases: { name: string; loop(): Promise<number> }[] = [
      {
        name: 'better-sqlite3, prepared statement (sync)',
        async loop() {
          let found = 0;
          for (let i = 0; i < lookups; i++) if (raw.get(keys[i & 1023])) found++;
          return found;
        },
      },
      {
        name: "Wharf's data layer, `await db.one(sql, [id])`",
        async loop() {
          let found = 0;
          for (let i = 0; i < lookups; i++) if (await db.one('SELECT id, app_id, name, created_at FROM items WHERE id = ?', [keys[i & 1023]])) found++;
          return found;
        },
      },
      {
        name: 'Kysely 0.29 (SqliteDialect on the same connection)',
        async loop() {
          let found = 0;
          const n = lookups / 10; // ten times fewer: it is that much slower
          for (let i = 0; i < n; i++) {
            if (
              await kysely
                .selectFrom('items')
                .select(['id', 'app_id', 'name', 'created_at'])
                .where('id', '=', keys[i & 1023]!)
                .executeTakeFirst()
            )
              found++;
          }
          return found * 10;
        },
      },
    ];
    const perLookupNs = new Map(cases.map((c) => [c.name, [] as number[]]));
    for (let round = 0; round < rounds; round++) {
      for (const c of cases) {
        const t0 = process.hrtime.bigint();
        const found = await c.loop();
        const ns = Number(process.hrtime.bigint() - t0);
        if (found !== lookups) throw new Error(`${c.name}: found ${found} of ${lookups}`);
        if (round > 0) perLookupNs.get(c.name)!.push(ns / lookups); // round 0 warms up
      }
    }
    await kysely.destroy().catch(() => {});
    const base = median(perLookupNs.get(cases[0]!.name)!);
    const lines = ['| SQLite primary-key lookup through | µs per lookup (median) | ratio to better-sqlite3 |', '|---|---|---|'];
    for (const c of cases) {
      const t = median(perLookupNs.get(c.name)!);
      lines.push(`| ${c.name} | ${fmt(t / 1000, 2)} | ${fmt(t / base)} |`);
    }
    lines.push('', `${ROWS} rows, ${lookups} lookups per round (Kysely: a tenth, scaled), ${rounds - 1} measured rounds after a warm-up, one process.`);
    return lines.join('\n');
  } finally {
    await db.close().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
