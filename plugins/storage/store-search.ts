/**
 * `GET /api/files?search=`: a case-sensitive substring of the name, sorted by uploadedAt, with an
 * exact total, at any number of files in an app (issue 17). One planner (FileSearch) on either
 * engine; PostgreSQL's indexes: see below (PG_SQL). On SQLite, the indexes, kept in step with
 * storage_files by triggers, all with rowids in the app's range so a search reads only its app:
 * - storage_files_names (001): each name's trigrams with their positions. A term of 3+
 *   characters as a phrase of its trigrams matches exactly the names containing it; its rarest
 *   trigrams, ANDed, find candidates cheaply (instr() then confirms).
 * - storage_files_ngrams (003): each name's 1- and 2-character substrings, one token each.
 * - storage_search_grams (003): per app, how many names contain each 1-3 character gram: the
 *   exact total of a 1-3 character term, and for longer ones their trigrams' counts (a bound).
 * - storage_search_counts (003): exact totals of broad 4+ character terms, cached on first use.
 * A 4+ character term is counted before its page when that is cheaper than reading its
 * candidates (SQLite: its phrase, hundreds of matches of rare trigrams) or when it is broad (then
 * cached). With the total known, the page is read the cheaper way by the cost model below: from the
 * index's matches, sorted (few matches), or walking the (app, uploadedAt, id, name) index in
 * order with instr() on each entry until the page is full (many matches: nothing else is sorted).
 */
import type { Db } from '../../core/db.ts';
import { type Direction, FILE_COLUMNS, type FileRow, orderBy, toFile } from './file-rows.ts';
import type { FileRecord } from './types.ts';

/**
 * Per engine, relative costs: `walk`, reading one entry of the time index and testing its name
 * (SQLite: ~0.15 µs, from the index; PostgreSQL: ~0.7-1.8 µs, each row read from the table);
 * `match`, one index match read from the table and sorted (SQLite: ~0.9 µs at 300,000 files,
 * 4-16 µs at 1,000,000 when the table no longer stays in SQLite's page cache; PostgreSQL: ~18 µs
 * at 1,000,000, a bitmap heap scan with LIKE's recheck); `phrase`, on SQLite, one trigram entry a
 * phrase reads (~0.1 µs at 1,000,000). `few`: a 4+ character term whose rarest trigram is in at
 * most this many names is counted from its candidates with the page; above, it is counted alone
 * (SQLite: by the phrase, exact, no table reads; PostgreSQL: LIKE), and the count is cached.
 */
const COSTS = {
  sqlite: { walk: 1, match: 6, phrase: 1, few: 20_000 },
  postgres: { walk: 1, match: 20, phrase: Number.POSITIVE_INFINITY, few: 500 },
};
/** Cached terms per app; the oldest goes first. Every write to a file checks its app's terms. */
const CACHED_TERMS = 32;
/** Trigrams ANDed to find a 4+ character term's candidates: its rarest. */
const MATCH_TOKENS = 2;

type Index = 'storage_files_ngrams' | 'storage_files_names';

/**
 * Rowids of an app's files in an index: [seq * 2^32, (seq + 1) * 2^32), as 64-bit integers. The
 * CAST matters: better-sqlite3 binds a JS number as a REAL, and FTS5 ignores a rowid bound that is
 * not an INTEGER (SQLite still applies it, row by row, after reading every app's entries).
 */
const APP_RANGE = 'g.rowid >= CAST(@seq AS INTEGER) * 4294967296 AND g.rowid < (CAST(@seq AS INTEGER) + 1) * 4294967296';

/** Overrides for tests: force one way of reading pages, or of counting 4+ character terms. */
export interface SearchOptions {
  plan?: 'walk' | 'matches';
  fewCandidates?: number;
  /** false: never count a 4+ character term by its phrase before the page unless it is broad. */
  phraseCount?: boolean;
}

export interface SearchApp {
  id: string;
  seq: number;
  fileCount: number;
}

/** A 1-2 character gram's token in storage_files_ngrams, quoted for MATCH (hex digits: nothing to escape). */
const shortToken = (gram: string) => `"${Buffer.from(gram).toString('hex')}"`;
/** An FTS5 string for storage_files_names: the phrase of `text`'s trigrams, literally. */
const phrase = (text: string) => `"${text.replace(/"/g, '""')}"`;

/** The distinct 3-character windows of a term. */
function trigrams(term: string): string[] {
  const chars = [...term];
  const grams = new Set<string>();
  for (let i = 0; i + 3 <= chars.length; i++) grams.add(chars.slice(i, i + 3).join(''));
  return [...grams];
}

/** The SQL for one index and sort direction (exported for the query-plan test). */
export function searchSql(index: Index, dir: Direction) {
  // The index's matches in the app's rowid range (the CROSS JOIN keeps the index the outer loop);
  // instr() confirms (4+ characters: the tokens are only some of the term's trigrams).
  const fromMatches = `FROM ${index} g CROSS JOIN storage_files f ON f.seq = g.rowid
    WHERE g.${index} MATCH @match AND ${APP_RANGE} AND instr(f.name, @term) > 0`;
  return {
    fromMatches: `SELECT ${FILE_COLUMNS}, count(*) OVER () AS total ${fromMatches} ${orderBy(dir)} LIMIT @limit OFFSET @offset`,
    countMatches: `SELECT count(*) ${fromMatches}`,
    // Many matches: the time index in the page's order, its name column tested on each entry; the
    // walk stops at the page's end. Only the page's rows are read from the table.
    walk: `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.seq IN (
         SELECT seq FROM storage_files INDEXED BY storage_files_by_time
         WHERE app_id = @appId AND instr(name, @term) > 0 ${orderBy(dir, '')} LIMIT @limit OFFSET @offset
       ) ${orderBy(dir)}`,
    // A phrase of trigrams: exact, read from the index alone.
    countPhrase: `SELECT count(*) FROM storage_files_names g
       WHERE g.storage_files_names MATCH @match AND ${APP_RANGE}`,
  };
}

const both = (index: Index) => ({ asc: searchSql(index, 'asc'), desc: searchSql(index, 'desc') });
const SEARCH_SQL: Record<Index, Record<Direction, ReturnType<typeof searchSql>>> = {
  storage_files_ngrams: both('storage_files_ngrams'),
  storage_files_names: both('storage_files_names'),
};

/**
 * On PostgreSQL the same tables of counts (storage_search_grams, storage_search_counts: migration
 * 004, kept by a statement-level trigger) and the same plans, over two indexes on storage_files
 * (migration 003):
 * - terms of 3+ characters: `name LIKE '%term%'` (%, _ and \ escaped) on pg_trgm's GIN index of
 *   the names. Trigrams only find candidates (pg_trgm folds case); LIKE's recheck is exact.
 * - terms of 1-2 characters, which have no trigram: the names' 1- and 2-character substrings as
 *   a stored array (short_grams), GIN-indexed, and `@>` the term.
 * - the walk: the (app_id, uploaded_at, id) index in the page's order, strpos() on each row.
 */
const likePattern = (term: string) => `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
const pgMatch = (short: boolean) =>
  short ? 'f.app_id = @appId AND f.short_grams @> ARRAY[@term::text]' : "f.app_id = @appId AND f.name LIKE @pattern ESCAPE '\\'";
/**
 * The matches are planned on their own (MATERIALIZED: the page's LIMIT would otherwise lead the
 * planner to walk the time index, filtering, for a page it thinks ends early; the total needs
 * every match anyway), then counted and sorted for the page.
 */
const pgSql = (short: boolean, dir: Direction) => ({
  fromMatches: `WITH m AS MATERIALIZED (SELECT f.seq, f.uploaded_at, f.id FROM storage_files f WHERE ${pgMatch(short)})
    SELECT ${FILE_COLUMNS}, t.total FROM storage_files f
      JOIN (SELECT seq, uploaded_at, id FROM m f ${orderBy(dir)} LIMIT @limit OFFSET @offset) p ON p.seq = f.seq
      CROSS JOIN (SELECT count(*) AS total FROM m) t
    ${orderBy(dir, 'p.')}`,
  countMatches: `SELECT count(*) FROM storage_files f WHERE ${pgMatch(short)}`,
  // strpos() has no index: the planner's only ordered way is the time index (no sort, stops at the page's end).
  walk: `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.app_id = @appId AND strpos(f.name, @term) > 0 ${orderBy(dir)} LIMIT @limit OFFSET @offset`,
});
const PG_SQL = {
  short: { asc: pgSql(true, 'asc'), desc: pgSql(true, 'desc') },
  long: { asc: pgSql(false, 'asc'), desc: pgSql(false, 'desc') },
};

/** The statements and parameters of a search on PostgreSQL (exported for the query-plan test). */
export function postgresSearchSql(appId: string, term: string, page: Page) {
  return {
    sql: PG_SQL[[...term].length < 3 ? 'short' : 'long'][page.dir],
    params: { appId, term, pattern: likePattern(term), limit: page.limit, offset: page.offset },
  };
}

const GRAM_COUNT = 'SELECT n FROM storage_search_grams WHERE app_id = ? AND gram = ?';
const GRAM_COUNTS = {
  sqlite: 'SELECT gram, n FROM storage_search_grams WHERE app_id = ? AND gram IN (SELECT value FROM json_each(?))',
  postgres: 'SELECT gram, n FROM storage_search_grams WHERE app_id = ? AND gram = ANY(?::text[])',
};
const CACHED_COUNT = 'SELECT n FROM storage_search_counts WHERE app_id = ? AND term = ?';
const CACHE_COUNT = 'INSERT INTO storage_search_counts (app_id, term, n) VALUES (?, ?, ?) ON CONFLICT (app_id, term) DO UPDATE SET n = excluded.n';
const EVICT_COUNTS = {
  sqlite: 'DELETE FROM storage_search_counts WHERE rowid IN (SELECT rowid FROM storage_search_counts WHERE app_id = ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)',
  postgres: 'DELETE FROM storage_search_counts WHERE app_id = ? AND seq IN (SELECT seq FROM storage_search_counts WHERE app_id = ? ORDER BY seq DESC OFFSET ?)',
};
/**
 * On PostgreSQL a count is cached with its app's row locked: every write to a file updates that
 * row too (the counters' trigger; renames: the search trigger), so no write falls between the
 * count and the cached row its trigger must adjust: a write that comes after waits for this
 * transaction, one already holding the row makes this serializable transaction fail (the row is
 * newer than its snapshot) and run again.
 */
const LOCK_APP = 'SELECT 1 FROM storage_apps WHERE id = ? FOR NO KEY UPDATE';

/** How a term is served: its kind (1-2 characters, or 3+), SQLite's MATCH, how many entries that matches, and its total when known before the page. */
interface Plan {
  short: boolean;
  match: string;
  candidates: number;
  total: number | undefined;
}

type Params = { appId: string; seq: number; term: string; match: string; pattern: string; limit: number; offset: number };
type Page = { dir: Direction; limit: number; offset: number };
type Statements = { fromMatches: string; countMatches: string; walk: string };

/** Search on either engine (see the module comment and PostgreSQL's above). */
export class FileSearch {
  readonly #db: Db;
  readonly #options: SearchOptions;

  constructor(db: Db, options: SearchOptions = {}) {
    this.#db = db;
    this.#options = options;
  }

  #sql(short: boolean, dir: Direction): Statements {
    if (this.#db.engine === 'postgres') return PG_SQL[short ? 'short' : 'long'][dir];
    return SEARCH_SQL[short ? 'storage_files_ngrams' : 'storage_files_names'][dir];
  }

  /** One page of the app's files whose name contains `term` (not empty), and how many there are. */
  async search(app: SearchApp, term: string, page: Page): Promise<{ files: FileRecord[]; total: number }> {
    const plan = await this.#plan(app, term);
    if (plan.candidates === 0) return { files: [], total: 0 };
    const s = this.#sql(plan.short, page.dir);
    const params: Params = { appId: app.id, seq: app.seq, term, match: plan.match, pattern: likePattern(term), limit: page.limit, offset: page.offset };
    if (plan.total === undefined) {
      // Few candidates: the page and its total in one pass; a page past the end counts on its own.
      const rows = await this.#db.all<FileRow & { total: number }>(s.fromMatches, params);
      return { files: rows.map(toFile), total: rows[0]?.total ?? (await this.#db.value<number>(s.countMatches, params))! };
    }
    const { total } = plan;
    if (page.offset >= total) return { files: [], total };
    // Entries the walk reads to fill the page, at the matches' density, against reading every candidate.
    const walked = Math.min(app.fileCount, ((page.offset + page.limit) * app.fileCount) / total);
    const cost = COSTS[this.#db.engine];
    const walk = this.#options.plan ? this.#options.plan === 'walk' : walked * cost.walk < plan.candidates * cost.match;
    return { files: (await this.#db.all<FileRow>(walk ? s.walk : s.fromMatches, params)).map(toFile), total };
  }

  async #plan(app: SearchApp, term: string): Promise<Plan> {
    const length = [...term].length;
    if (length <= 3) {
      const total = (await this.#db.value<number>(GRAM_COUNT, [app.id, term])) ?? 0;
      return { short: length < 3, match: length < 3 ? shortToken(term) : phrase(term), candidates: total, total };
    }
    const grams = trigrams(term);
    const rows = await this.#db.all<{ gram: string; n: number }>(GRAM_COUNTS[this.#db.engine], [
      app.id,
      this.#db.engine === 'postgres' ? grams : JSON.stringify(grams),
    ]);
    const counts = new Map(rows.map((r) => [r.gram, r.n]));
    // A trigram no name has: nothing matches.
    if (grams.some((g) => !counts.get(g))) return { short: false, match: '', candidates: 0, total: 0 };
    const rarest = grams.sort((a, b) => counts.get(a)! - counts.get(b)!).slice(0, MATCH_TOKENS);
    const plan: Plan = { short: false, match: rarest.map(phrase).join(' AND '), candidates: counts.get(rarest[0]!)!, total: undefined };
    const cached = await this.#db.value<number>(CACHED_COUNT, [app.id, term]);
    if (cached !== undefined) return { ...plan, total: cached };
    // On SQLite, when the phrase reads fewer entries than there are candidates to read from the
    // table (hundreds of matches of a term whose trigrams are all rare: `acme`), the phrase
    // counts it exactly first, not cached (cheap), and the page is read the cheaper way for that total.
    // (PostgreSQL has no phrase: its `phrase` cost is infinite.)
    const cost = COSTS[this.#db.engine];
    const phraseEntries = grams.reduce((n, g) => n + counts.get(g)!, 0);
    if (this.#options.phraseCount !== false && phraseEntries * cost.phrase < plan.candidates * cost.match && phraseEntries <= cost.few) {
      return { ...plan, total: (await this.#db.value<number>(SEARCH_SQL.storage_files_names.asc.countPhrase, { seq: app.seq, match: phrase(term) }))! };
    }
    if (plan.candidates <= (this.#options.fewCandidates ?? cost.few)) return plan;
    return { ...plan, total: await this.#countBroad(app, term) };
  }

  /** Counts a broad 4+ character term and caches the count; the triggers keep it exact. */
  #countBroad(app: SearchApp, term: string): Promise<number> {
    // Counted and cached in one write transaction: no write can fall between the two.
    return this.#db.transaction(async (tx) => {
      let n: number;
      if (tx.engine === 'postgres') {
        await tx.value(LOCK_APP, [app.id]);
        n = (await tx.value<number>(PG_SQL.long.asc.countMatches, { appId: app.id, pattern: likePattern(term) }))!;
      } else {
        // The phrase: exact, read from the index alone.
        n = (await tx.value<number>(SEARCH_SQL.storage_files_names.asc.countPhrase, { seq: app.seq, match: phrase(term) }))!;
      }
      await tx.run(CACHE_COUNT, [app.id, term, n]);
      await tx.run(EVICT_COUNTS[tx.engine], tx.engine === 'postgres' ? [app.id, app.id, CACHED_TERMS] : [app.id, CACHED_TERMS]);
      return n;
    });
  }
}

/** One page of the app's files whose name contains `term` (not empty), and how many there are, on either engine. */
export function searchFiles(db: Db, app: SearchApp, term: string, page: Page): Promise<{ files: FileRecord[]; total: number }> {
  return new FileSearch(db).search(app, term, page);
}
