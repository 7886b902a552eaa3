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
 * - storage_search_marks (005, both engines): per cached term, (uploadedAt, id) of some of its
 *   matches with their positions: a deep page walks from the nearest one; a small total whose
 *   page is costly (`report-draft`: every trigram common) has every match marked.
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
  sqlite: { walk: 1, match: 6, phrase: 1, few: 20_000, far: 20_000 },
  postgres: { walk: 1, match: 20, phrase: Number.POSITIVE_INFINITY, few: 500, far: 5_000 },
};
/**
 * A term whose total is at most this and whose page costs more than `far` to find (its
 * candidates, or the walk) is marked whole: a mark for each match, so a page is read from its
 * marks (while they number its cached total).
 */
const MARK_ALL = 200;
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
  /**
   * Marks (deep pages, small totals): `false` never uses them; a number is the walk, in index
   * entries, beyond which a page seeks from a mark (default: the engine's `far`), and marks are
   * made every `far / 2` entries' worth of matches (at least one match apart).
   */
  marksAfter?: number | false;
  /** The largest total marked whole (default MARK_ALL). */
  markAll?: number;
  /**
   * PostgreSQL: an app of at most this many files has a 4+ character term's few candidates
   * found by reading its rows (default: the engine's `far`), not through pg_trgm's index.
   */
  scanApp?: number;
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
/** How the matches are found: `short`/`long` through an index (see above); `scan`, every row of the app, strpos() on each. */
type PgMatch = 'short' | 'long' | 'scan';
const PG_MATCH: Record<PgMatch, string> = {
  short: 'f.app_id = @appId AND f.short_grams @> ARRAY[@term::text]',
  long: "f.app_id = @appId AND f.name LIKE @pattern ESCAPE '\\'",
  scan: 'f.app_id = @appId AND strpos(f.name, @term) > 0',
};
/**
 * The matches are planned on their own (MATERIALIZED: the page's LIMIT would otherwise lead the
 * planner to walk the time index, filtering, for a page it thinks ends early; the total needs
 * every match anyway), then counted and sorted for the page.
 */
const pgSql = (match: PgMatch, dir: Direction) => ({
  fromMatches: `WITH m AS MATERIALIZED (SELECT f.seq, f.uploaded_at, f.id FROM storage_files f WHERE ${PG_MATCH[match]})
    SELECT ${FILE_COLUMNS}, t.total FROM storage_files f
      JOIN (SELECT seq, uploaded_at, id FROM m f ${orderBy(dir)} LIMIT @limit OFFSET @offset) p ON p.seq = f.seq
      CROSS JOIN (SELECT count(*) AS total FROM m) t
    ${orderBy(dir, 'p.')}`,
  countMatches: `SELECT count(*) FROM storage_files f WHERE ${PG_MATCH[match]}`,
  // strpos() has no index: the planner's only ordered way is the time index (no sort, stops at the page's end).
  walk: `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.app_id = @appId AND strpos(f.name, @term) > 0 ${orderBy(dir)} LIMIT @limit OFFSET @offset`,
});
const PG_SQL = {
  short: { asc: pgSql('short', 'asc'), desc: pgSql('short', 'desc') },
  long: { asc: pgSql('long', 'asc'), desc: pgSql('long', 'desc') },
  scan: { asc: pgSql('scan', 'asc'), desc: pgSql('scan', 'desc') },
};

/** The statements and parameters of a search on PostgreSQL (exported for the query-plan test). */
export function postgresSearchSql(appId: string, term: string, page: Page) {
  return {
    sql: PG_SQL[[...term].length < 3 ? 'short' : 'long'][page.dir],
    /** A small app's: its rows read in full. */
    scan: PG_SQL.scan[page.dir],
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

/** A match's place in the order: (uploaded_at, id). */
type Mark = { uploaded_at: string; id: string };
/** A page's matches, oldest first: positions [from, to). */
type Range = { from: number; to: number };
/** Where a page is walked from: a mark (`at`, `id`: its match, `rank` matches before it) or an end (rank -1 or the total); `distance`: matches skipped. */
type Anchor = { walk: Direction; rank: number; at: string | undefined; id: string | undefined; distance: number };

function pageRange(total: number, page: Page): Range {
  const count = Math.min(page.limit, total - page.offset);
  const from = page.dir === 'asc' ? page.offset : total - page.offset - count;
  return { from, to: from + count };
}

/**
 * Marks' statements per engine (migration 005). A page read from marks checks, in the same
 * statement, that its mark is still there and the term's cached total is the one its positions
 * came from (a write meanwhile: no rows, and the page is made again in a transaction).
 */
export function marksSql(engine: 'sqlite' | 'postgres') {
  const byTime = engine === 'sqlite' ? 'INDEXED BY storage_files_by_time' : '';
  const contains = engine === 'sqlite' ? 'instr(f.name, @term) > 0' : 'strpos(f.name, @term) > 0';
  const unchanged = `EXISTS (SELECT 1 FROM storage_search_counts WHERE app_id = @appId AND term = @term AND n = @total)`;
  const after = (walk: Direction) => `(f.uploaded_at, f.id) ${walk === 'asc' ? '>' : '<'} (@at, @id)`;
  const markThere = 'EXISTS (SELECT 1 FROM storage_search_marks WHERE app_id = @appId AND term = @term AND uploaded_at = @at AND id = @id AND rank = @rank)';
  const walkFrom = (walk: Direction, from: 'mark' | 'end', columns: string, guard: boolean) =>
    `SELECT ${columns} FROM storage_files f ${byTime} WHERE f.app_id = @appId
       ${from === 'mark' ? `AND ${after(walk)}${guard ? ` AND ${markThere} AND ${unchanged}` : ''}` : ''}
       AND ${contains} ${orderBy(walk)} LIMIT @limit OFFSET @offset`;
  // SQLite: the walk reads the covering time index; only the page's rows are read from the table.
  const seek = (walk: Direction, from: 'mark' | 'end') =>
    engine === 'sqlite'
      ? `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.seq IN (${walkFrom(walk, from, 'f.seq', true)}) ${orderBy(walk)}`
      : walkFrom(walk, from, FILE_COLUMNS, true);
  const step = (walk: Direction, from: 'mark' | 'end') => walkFrom(walk, from, 'f.uploaded_at, f.id', false).replace('LIMIT @limit', 'LIMIT 1');
  const marked = (dir: Direction) => `SELECT ${FILE_COLUMNS} FROM storage_search_marks m JOIN storage_files f ON f.id = m.id
    WHERE m.app_id = @appId AND m.term = @term AND m.rank >= @from AND m.rank < @to AND ${unchanged}
      AND (SELECT count(*) FROM storage_search_marks WHERE app_id = @appId AND term = @term) = @total
    ORDER BY m.rank ${dir.toUpperCase()}`;
  return {
    seek: { asc: { mark: seek('asc', 'mark'), end: seek('asc', 'end') }, desc: { mark: seek('desc', 'mark'), end: seek('desc', 'end') } },
    step: { asc: { mark: step('asc', 'mark'), end: step('asc', 'end') }, desc: { mark: step('desc', 'mark'), end: step('desc', 'end') } },
    marked: { asc: marked('asc'), desc: marked('desc') },
    // The nearest mark on each side of a page.
    nearest: `SELECT * FROM (SELECT rank, uploaded_at, id FROM storage_search_marks WHERE app_id = @appId AND term = @term AND rank < @from ORDER BY rank DESC LIMIT 1) b
      UNION ALL SELECT * FROM (SELECT rank, uploaded_at, id FROM storage_search_marks WHERE app_id = @appId AND term = @term AND rank >= @to ORDER BY rank LIMIT 1) a`,
    mark: 'INSERT INTO storage_search_marks (app_id, term, uploaded_at, id, rank) VALUES (?, ?, ?, ?, ?)',
    unmark: 'DELETE FROM storage_search_marks WHERE app_id = ? AND term = ?',
    // Every match of a small total, oldest first (rank: the position).
    markAll:
      engine === 'sqlite'
        ? 'INSERT INTO storage_search_marks (app_id, term, uploaded_at, id, rank) SELECT @appId, @term, j.value ->> 0, j.value ->> 1, j.key FROM json_each(@rows) j'
        : 'INSERT INTO storage_search_marks (app_id, term, uploaded_at, id, rank) SELECT @appId, @term, u.at, u.id, u.n - 1 FROM unnest(@ats::text[], @ids::text[]) WITH ORDINALITY AS u(at, id, n)',
    rows: (rows: Mark[]): Record<string, unknown> =>
      engine === 'sqlite'
        ? { rows: JSON.stringify(rows.map((r) => [r.uploaded_at, r.id])) }
        : { ats: rows.map((r) => r.uploaded_at), ids: rows.map((r) => r.id) },
  };
}
const MARKS_SQL = { sqlite: marksSql('sqlite'), postgres: marksSql('postgres') };

/**
 * A term's matches, in no order, from its index: SQLite, up to @limit exact matches of its
 * phrase of trigrams (or its 1-2 character token), which FTS5 yields one at a time, so a broad
 * term stops there (sorted by an outer query, SQLite read every match: 630 ms for `.pdf`);
 * PostgreSQL, LIKE's (or the short grams') matches, asked for only once they are known to be few
 * (with a LIMIT, the planner may scan the table for them instead of using the index: 200 ms for
 * `report-draft`'s 10 against the count's 79 ms).
 */
const listFewSqlite = (index: Index) => `SELECT f.uploaded_at, f.id FROM ${index} g CROSS JOIN storage_files f ON f.seq = g.rowid
  WHERE g.${index} MATCH @match AND ${APP_RANGE} LIMIT @limit`;
const listFewPostgres = (match: PgMatch) => `SELECT f.uploaded_at, f.id FROM storage_files f WHERE ${PG_MATCH[match]}`;
const LIST_FEW = {
  sqlite: { short: listFewSqlite('storage_files_ngrams'), long: listFewSqlite('storage_files_names') },
  postgres: { short: listFewPostgres('short'), long: listFewPostgres('long'), scan: listFewPostgres('scan') },
};
/** The list's order on marks: (uploadedAt, id), both ASCII (ISO times, UUIDs), so JS's comparison is the databases' byte order. */
const inOrder = (x: Mark, y: Mark) => (x.uploaded_at < y.uploaded_at ? -1 : x.uploaded_at > y.uploaded_at ? 1 : x.id < y.id ? -1 : x.id > y.id ? 1 : 0);

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

  #sql(short: boolean, dir: Direction, app: SearchApp): Statements {
    if (this.#db.engine !== 'postgres') return SEARCH_SQL[short ? 'storage_files_ngrams' : 'storage_files_names'][dir];
    return PG_SQL[this.#pgMatch(short, app)][dir];
  }

  /**
   * How PostgreSQL finds a term's matches in an app. pg_trgm's index holds every app's names: a
   * common trigram's list is long however few files this app has (`report-draft` in a 1,000-file
   * app beside a million: 177 ms; counting `report` there: 575 ms), while a small app's rows read
   * in full cost no more than a walk that is cheap enough (about 1 ms per 2,000 files).
   */
  #pgMatch(short: boolean, app: SearchApp): PgMatch {
    if (!short && app.fileCount <= (this.#options.scanApp ?? COSTS.postgres.far)) return 'scan';
    return short ? 'short' : 'long';
  }

  /** One page of the app's files whose name contains `term` (not empty), and how many there are. */
  async search(app: SearchApp, term: string, page: Page): Promise<{ files: FileRecord[]; total: number }> {
    const plan = await this.#plan(app, term);
    if (plan.candidates === 0) return { files: [], total: 0 };
    const s = this.#sql(plan.short, page.dir, app);
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
    const far = this.#options.plan ? false : (this.#options.marksAfter ?? cost.far);
    // A page that costs more than `far` is read from marks when the walk is the cheaper way (a
    // deep page: marks are made no further than the walk goes) or the total is small (every match
    // marked, listed in one pass of the index). Sorting a few thousand matches stays cheaper than
    // making marks a few matches apart (`acme`).
    const pageCost = walk ? walked * cost.walk : plan.candidates * cost.match;
    if (far !== false && pageCost > far && (walk || total <= (this.#options.markAll ?? MARK_ALL))) {
      return this.#fromMarks(app, term, total, page, far);
    }
    return { files: (await this.#db.all<FileRow>(walk ? s.walk : s.fromMatches, params)).map(toFile), total };
  }

  /**
   * A page from marks (migration 005): a small total's (at most MARK_ALL) every match is marked
   * (the page is its marks' rows); a larger total's page is walked from the nearest mark, or from
   * the nearer end, when that is at most `far` entries away. Otherwise, in a transaction that sees
   * no write meanwhile, the term's total is cached (the marks go with its row) and marks are made
   * from the nearest one (or end) toward the page, every `far / 2` entries' worth of matches.
   */
  async #fromMarks(app: SearchApp, term: string, total: number, page: Page, far: number): Promise<{ files: FileRecord[]; total: number }> {
    const sql = MARKS_SQL[this.#db.engine];
    const range = pageRange(total, page);
    const markAll = this.#options.markAll ?? MARK_ALL;
    if (total <= markAll) {
      const rows = await this.#db.all<FileRow>(sql.marked[page.dir], { appId: app.id, term, total, ...range });
      if (rows.length === range.to - range.from) return { files: rows.map(toFile), total };
    } else {
      const nearest = await this.#anchors(this.#db, app, term, total, range);
      if ((nearest.distance * app.fileCount) / total <= far) {
        const rows = await this.#seek(this.#db, app, term, total, page, range, nearest);
        if (rows) return { files: rows, total };
      }
    }
    return this.#db.transaction(async (tx) => {
      const exact = await this.#cachedTotal(tx, app, term);
      if (page.offset >= exact) return { files: [], total: exact };
      const range = pageRange(exact, page);
      if (exact <= markAll) {
        // Few matches (that is what the total says): every one marked, the page read from the marks.
        const all = await this.#listFew(tx, app, term, markAll);
        if (!all) throw new Error(`search marks: more matches of a term than its cached total (${exact})`);
        await this.#markAll(tx, app, term, all);
        const rows = await tx.all<FileRow>(sql.marked[page.dir], { appId: app.id, term, total: exact, ...range });
        return { files: rows.map(toFile), total: exact };
      }
      // Marks every `step` matches from the nearest anchor toward the page.
      const step = Math.max(1, Math.floor(((far / 2) * exact) / app.fileCount));
      let anchor = await this.#anchors(tx, app, term, exact, range);
      while (anchor.distance > step) {
        const below = anchor.walk === 'asc';
        const mark = await tx.one<Mark>(sql.step[anchor.walk][anchor.at ? 'mark' : 'end'], {
          appId: app.id,
          term,
          at: anchor.at,
          id: anchor.id,
          offset: step - 1,
        });
        if (!mark) throw new Error(`search marks: fewer matches of a term than its cached total (${exact})`);
        const rank = below ? anchor.rank + step : anchor.rank - step;
        await tx.run(sql.mark, [app.id, term, mark.uploaded_at, mark.id, rank]);
        anchor = { walk: anchor.walk, rank, at: mark.uploaded_at, id: mark.id, distance: anchor.distance - step };
      }
      return { files: (await this.#seek(tx, app, term, exact, page, range, anchor))!, total: exact };
    });
  }

  /** The nearest mark (or end) to a page's matches [from, to), oldest first: the walk from it, and how many matches it skips. */
  async #anchors(db: Db, app: SearchApp, term: string, total: number, range: Range): Promise<Anchor> {
    const marks = await db.all<{ rank: number; uploaded_at: string; id: string }>(MARKS_SQL[db.engine].nearest, { appId: app.id, term, ...range });
    const below = marks.find((m) => m.rank < range.from);
    const above = marks.find((m) => m.rank >= range.to);
    const fromBelow = range.from - (below?.rank ?? -1) - 1;
    const fromAbove = (above?.rank ?? total) - range.to;
    return fromBelow <= fromAbove
      ? { walk: 'asc', rank: below?.rank ?? -1, at: below?.uploaded_at, id: below?.id, distance: fromBelow }
      : { walk: 'desc', rank: above?.rank ?? total, at: above?.uploaded_at, id: above?.id, distance: fromAbove };
  }

  /** The page walked from an anchor in its order, in the page's; undefined when the mark or the total changed meanwhile. */
  async #seek(db: Db, app: SearchApp, term: string, total: number, page: Page, range: Range, anchor: Anchor): Promise<FileRecord[] | undefined> {
    const count = range.to - range.from;
    const rows = await db.all<FileRow>(MARKS_SQL[db.engine].seek[anchor.walk][anchor.at ? 'mark' : 'end'], {
      appId: app.id,
      term,
      at: anchor.at,
      id: anchor.id,
      rank: anchor.rank,
      total,
      limit: count,
      offset: anchor.distance,
    });
    if (rows.length !== count) return undefined;
    const files = rows.map(toFile);
    return anchor.walk === page.dir ? files : files.reverse();
  }

  /** In a transaction: the term's exact total, cached (its row holds the marks); counted when not cached yet. */
  async #cachedTotal(tx: Db, app: SearchApp, term: string): Promise<number> {
    if (tx.engine === 'postgres') await tx.value(LOCK_APP, [app.id]);
    const cached = await tx.value<number>(CACHED_COUNT, [app.id, term]);
    if (cached !== undefined) return cached;
    if ([...term].length > 3) return this.#countAndMark(tx, app, term);
    const n = (await tx.value<number>(GRAM_COUNT, [app.id, term])) ?? 0;
    await this.#cache(tx, app, term, n);
    return n;
  }

  /**
   * The matches of a term, oldest first, when there are at most `limit` (its index's exact
   * matches; on SQLite no more than `limit + 1` of them read); undefined when there are more.
   * On PostgreSQL, only for a term known to have at most `limit` (see LIST_FEW).
   */
  async #listFew(db: Db, app: SearchApp, term: string, limit: number): Promise<Mark[] | undefined> {
    const short = [...term].length < 3;
    const rows = await db.all<Mark>(db.engine === 'postgres' ? LIST_FEW.postgres[this.#pgMatch(short, app)] : LIST_FEW.sqlite[short ? 'short' : 'long'], {
      appId: app.id,
      seq: app.seq,
      term,
      match: short ? shortToken(term) : phrase(term),
      pattern: likePattern(term),
      limit: limit + 1,
    });
    return rows.length <= limit ? rows.sort(inOrder) : undefined;
  }

  /** Marks every match of a term (its total cached already: the marks hang on its row). */
  async #markAll(tx: Db, app: SearchApp, term: string, rows: Mark[]): Promise<void> {
    const sql = MARKS_SQL[tx.engine];
    await tx.run(sql.unmark, [app.id, term]);
    if (rows.length) await tx.run(sql.markAll, { appId: app.id, term, ...sql.rows(rows) });
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
      if (tx.engine === 'postgres') await tx.value(LOCK_APP, [app.id]);
      return this.#countAndMark(tx, app, term);
    });
  }

  /**
   * In a transaction: a 4+ character term's exact total, cached; a small total's (a term whose
   * trigrams are all common: `report-draft`) matches marked (its pages are then read from them).
   * SQLite lists up to `markAll + 1` matches first (one pass for a small total; a broad term's
   * listing stops at once) and counts only when there are more; PostgreSQL counts first (its
   * index's scan reads every candidate either way) and lists when they are few.
   */
  async #countAndMark(tx: Db, app: SearchApp, term: string): Promise<number> {
    const markAll = this.#options.markAll ?? MARK_ALL;
    let few = tx.engine === 'sqlite' ? await this.#listFew(tx, app, term, markAll) : undefined;
    const n = few ? few.length : await this.#count(tx, app, term);
    await this.#cache(tx, app, term, n);
    if (!few && tx.engine === 'postgres' && n <= markAll) few = await this.#listFew(tx, app, term, markAll);
    if (few) await this.#markAll(tx, app, term, few);
    return n;
  }

  /** A 4+ character term's exact total (PostgreSQL: with its app's row locked). */
  async #count(tx: Db, app: SearchApp, term: string): Promise<number> {
    if (tx.engine === 'postgres')
      return (await tx.value<number>(PG_SQL[this.#pgMatch(false, app)].asc.countMatches, { appId: app.id, term, pattern: likePattern(term) }))!;
    // The phrase: exact, read from the index alone.
    return (await tx.value<number>(SEARCH_SQL.storage_files_names.asc.countPhrase, { seq: app.seq, match: phrase(term) }))!;
  }

  /** Caches a term's total (the triggers keep it exact from now on), the app's oldest beyond CACHED_TERMS evicted with their marks. */
  async #cache(tx: Db, app: SearchApp, term: string, n: number): Promise<void> {
    await tx.run(CACHE_COUNT, [app.id, term, n]);
    await tx.run(EVICT_COUNTS[tx.engine], tx.engine === 'postgres' ? [app.id, app.id, CACHED_TERMS] : [app.id, CACHED_TERMS]);
  }
}

/** One page of the app's files whose name contains `term` (not empty), and how many there are, on either engine. */
export function searchFiles(db: Db, app: SearchApp, term: string, page: Page): Promise<{ files: FileRecord[]; total: number }> {
  return new FileSearch(db).search(app, term, page);
}
