/**
 * The files-search benchmark's bulk fill on SQLite (bench/files-search-fill.ts) records what the
 * triggers record one row at a time: the same gram counts, app counters, trigram and short-gram
 * index entries (the same search answers, FTS5's integrity check), over the benchmark's names and
 * names with accents, CJK and characters outside the BMP, across more than one batch.
 */
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fillFiles, benchFiles } from '../../bench/files-search.ts';
import { bulkFillSqlite } from '../../bench/files-search-fill.ts';
import { migrate } from '../../core/migrations.ts';
import { openSqlite } from '../../core/db-sqlite.ts';
import { FileSearch } from '../../plugins/storage/store-search.ts';
import { migrations } from '../../plugins/storage/migrations.ts';
import { tempDir } from '../helpers/app.ts';

const COUNT = 2_500;
const db = openSqlite(path.join(tempDir('fill'), 'fill.db'));
afterAll(() => db.close());

/** The benchmark's files, every seventh renamed to a name outside ASCII. */
const files = () => {
  const file = benchFiles();
  return (i: number) => {
    const f = file(i);
    return i % 7 ? f : { ...f, name: `é日本😀-${f.name}`, key: `odd/${i}` };
  };
};

describe('the bulk fill of the files-search benchmark', () => {
  it('records what the triggers record', async () => {
    await migrate(db, [{ plugin: 'storage', migrations }]);
    for (const [id, seq] of [
      ['triggers', 1],
      ['bulk', 2],
    ] as const) {
      await db.run("INSERT INTO storage_apps (id, seq, org_id, name, bucket_name, created_at, updated_at) VALUES (?, ?, 'o', ?, ?, 'x', 'x')", [
        id,
        seq,
        id,
        id,
      ]);
    }
    fillFiles(db.raw, 'triggers', COUNT, files());
    bulkFillSqlite(db.raw, 'bulk', COUNT, files(), 1_000);

    const grams = (app: string) => db.all('SELECT gram, n FROM storage_search_grams WHERE app_id = ? ORDER BY gram', [app]);
    expect((await grams('bulk')).length).toBeGreaterThan(500);
    expect(await grams('bulk')).toEqual(await grams('triggers'));
    const counters = (app: string) =>
      db.one('SELECT stored_bytes, file_count, next_file, (SELECT count(*) FROM storage_files WHERE app_id = ?) AS rows FROM storage_apps WHERE id = ?', [
        app,
        app,
      ]);
    expect(await counters('bulk')).toEqual(await counters('triggers'));
    await db.exec("INSERT INTO storage_files_names (storage_files_names) VALUES ('integrity-check')");
    // The triggers are back (001's, 003's, 005's: three each).
    expect(await db.value("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'storage_files'")).toBe(9);

    const search = new FileSearch(db, { fewCandidates: 0 });
    for (const term of ['Q', 'e', '😀', '日本', 're', 'é日', 'acme', 'report', 'port-', '本😀-r', '.pdf', 'IMG_2026', 'draft', 'zzz']) {
      // Every match (the ids, which break uploadedAt's ties, differ between the apps).
      const page = { dir: 'desc' as const, limit: COUNT, offset: 0 };
      const app = async (id: string) => {
        const a = (await db.one<{ id: string; seq: number; fileCount: number }>('SELECT id, seq, file_count AS fileCount FROM storage_apps WHERE id = ?', [
          id,
        ]))!;
        const r = await search.search(a, term, page);
        return { total: r.total, names: r.files.map((f) => f.name).sort() };
      };
      const want = await app('triggers');
      expect(want.total, term).toBe(want.names.length);
      expect(await app('bulk'), term).toEqual(want);
    }
  });
});
