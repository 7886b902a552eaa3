/**
 * `GET /api/files?search=`: a case-sensitive substring of the name, sorted by uploadedAt, with an
 * exact total, at any number of files (issue 17). Migration 003 keeps three structures in step
 * with storage_files through triggers:
 * - storage_files_ngrams: every 1-, 2- and 3-character substring of each name as a token (the hex
 *   of its UTF-8 bytes), rowids in the app's range, so a search reads only its app's entries;
 * - storage_search_grams: per app, how many names contain each of those grams: the exact total of
 *   a 1-3 character term, and for longer terms the counts of their trigrams (an upper bound);
 * - storage_search_counts: exact totals of broad 4+ character terms, cached on first use.
 * The total comes first; then the page is read the cheaper way, by the cost model below: from the
 * index's matches, sorted (few matches), or walking the (app, uploadedAt, id, name) index in order
 * with instr() on each entry until the page is full (many matches: no sort of all matches).
 */
import type { Database } from '../../core/db.ts';
import { type Direction, FILE_COLUMNS, type FileRow, orderBy, toFile } from './file-rows.ts';
import type { FileRecord } from './types.ts';

/** Rowids of an app's files: [seq * 2^32, (seq + 1) * 2^32). Computed in SQL, in 64 bits. */
const APP_RANGE = 'g.rowid >= @seq * 4294967296 AND g.rowid < (@seq + 1) * 4294967296';

/**
 * Relative costs (measured at 1M files, bench/files-search.ts): one entry of the time index read
 * with instr(), and one index match read from the table by rowid (then sorted).
 */
const WALK_COST = 1;
const MATCH_COST = 4;
/** Counts that cost more than this many table reads are cached (storage_search_counts). */
const CACHE_FROM = 2000;
/** Cached terms per app; the oldest goes first. Every write to a file checks its app's terms. */
const CACHED_TERMS = 32;
/** Tokens ANDed for a term of 4+ characters: its rarest trigrams. */
const MATCH_TOKENS = 2;

/** Overrides for tests: force one way of reading pages, or cache every 4+ character count. */
export interface SearchOptions {
  plan?: 'walk' | 'matches';
  cacheFrom?: number;
}

export interface SearchApp {
  id: string;
  seq: number;
  fileCount: number;
}

/** A gram's token in storage_files_ngrams, quoted for MATCH (hex digits only: nothing to escape). */
const token = (gram: string) => `"${Buffer.from(gram).toString('hex')}"`;

/** Distinct substrings of `chars.length - 2` windows of three characters. */
function trigrams(term: string): string[] {
  const chars = [...term];
  const grams = new Set<string>();
  for (let i = 0; i + 3 <= chars.length; i++) grams.add(chars.slice(i, i + 3).join(''));
  return [...grams];
}

/** The SQL of one sort direction (exported for the query-plan test). */
export function searchSql(dir: Direction) {
  const fromMatches = `FROM storage_files_ngrams g CROSS JOIN storage_files f ON f.seq = g.rowid
    WHERE g.storage_files_ngrams MATCH @match AND ${APP_RANGE} AND instr(f.name, @term) > 0`;
  return {
    // Few matches: the index gives them (the CROSS JOIN keeps it the outer loop), instr() confirms
    // (4+ characters: the tokens are only some of the term's trigrams), and they are sorted.
    fromMatches: `SELECT ${FILE_COLUMNS} ${fromMatches} ${orderBy(dir)} LIMIT @limit OFFSET @offset`,
    // Many matches: the time index in the page's order, its name column tested on each entry; the
    // walk stops at the page's end. Only the page's rows are read from the table.
    walk: `SELECT ${FILE_COLUMNS} FROM storage_files f WHERE f.seq IN (
         SELECT seq FROM storage_files INDEXED BY storage_files_by_time
         WHERE app_id = @appId AND instr(name, @term) > 0 ${orderBy(dir, '')} LIMIT @limit OFFSET @offset
       ) ${orderBy(dir)}`,
    countMatches: `SELECT count(*) ${fromMatches}`,
  };
}

function statements(db: Database, dir: Direction) {
  const sql = searchSql(dir);
  return { fromMatches: db.prepare(sql.fromMatches), walk: db.prepare(sql.walk), countMatches: db.prepare(sql.countMatches).pluck() };
}

export class FileSearch {
  readonly #db: Database;
  readonly #dirs: Record<Direction, ReturnType<typeof statements>>;
  readonly #s;
  readonly #options: SearchOptions;

  constructor(db: Database, options: SearchOptions = {}) {
    this.#db = db;
    this.#options = options;
    this.#dirs = { asc: statements(db, 'asc'), desc: statements(db, 'desc') };
    this.#s = {
      gram: db.prepare('SELECT n FROM storage_search_grams WHERE app_id = ? AND gram = ?').pluck(),
      grams: db.prepare('SELECT gram, n FROM storage_search_grams WHERE app_id = ? AND gram IN (SELECT value FROM json_each(?))').raw(),
      cached: db.prepare('SELECT n FROM storage_search_counts WHERE app_id = ? AND term = ?').pluck(),
      // Index-only: every entry of the app in the time index.
      countWalk: db.prepare('SELECT count(*) FROM storage_files INDEXED BY storage_files_by_time WHERE app_id = ? AND instr(name, ?) > 0').pluck(),
      cache: db.prepare('INSERT INTO storage_search_counts (app_id, term, n) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET n = excluded.n'),
      evict: db.prepare(
        'DELETE FROM storage_search_counts WHERE rowid IN (SELECT rowid FROM storage_search_counts WHERE app_id = ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)',
      ),
    };
  }

  /** One page of the app's files whose name contains `term` (not empty), and how many there are. */
  search(app: SearchApp, term: string, page: { dir: Direction; limit: number; offset: number }): { files: FileRecord[]; total: number } {
    const plan = this.#plan(app, term);
    const { total } = plan;
    if (page.offset >= total) return { files: [], total };
    const s = this.#dirs[page.dir];
    const params = { appId: app.id, seq: app.seq, term, match: plan.match, limit: page.limit, offset: page.offset };
    // Entries the walk reads to fill the page, at the matches' density, against reading every candidate.
    const walked = Math.min(app.fileCount, ((page.offset + page.limit) * app.fileCount) / total);
    const walk = this.#options.plan ? this.#options.plan === 'walk' : walked * WALK_COST < plan.candidates * MATCH_COST;
    const statement = walk ? s.walk : s.fromMatches;
    return { files: (statement.all(params) as FileRow[]).map(toFile), total };
  }

  /** The exact total, the tokens to match and how many index entries they match (an upper bound of the total). */
  #plan(app: SearchApp, term: string): { total: number; match: string; candidates: number } {
    if ([...term].length <= 3) {
      const total = (this.#s.gram.get(app.id, term) as number | undefined) ?? 0;
      return { total, match: token(term), candidates: total };
    }
    const grams = trigrams(term);
    const counts = new Map(this.#s.grams.all(app.id, JSON.stringify(grams)) as [string, number][]);
    // A trigram no name has: nothing matches.
    if (grams.some((g) => !counts.get(g))) return { total: 0, match: '', candidates: 0 };
    const rarest = grams.sort((a, b) => counts.get(a)! - counts.get(b)!).slice(0, MATCH_TOKENS);
    const match = rarest.map(token).join(' AND ');
    const candidates = counts.get(rarest[0]!)!;
    const cached = this.#s.cached.get(app.id, term) as number | undefined;
    if (cached !== undefined) return { total: cached, match, candidates };
    return { total: this.#count(app, term, match, candidates), match, candidates };
  }

  /** Counts a 4+ character term's matches the cheaper way; a costly count is cached, and the triggers keep it exact. */
  #count(app: SearchApp, term: string, match: string, candidates: number): number {
    const count = () =>
      (candidates * MATCH_COST < app.fileCount * WALK_COST
        ? this.#dirs.asc.countMatches.get({ seq: app.seq, term, match })
        : this.#s.countWalk.get(app.id, term)) as number;
    if (Math.min(candidates * MATCH_COST, app.fileCount * WALK_COST) < (this.#options.cacheFrom ?? CACHE_FROM)) return count();
    // Counted and cached in one write transaction: no write can fall between the two.
    return this.#db
      .transaction(() => {
        const n = count();
        this.#s.cache.run(app.id, term, n);
        this.#s.evict.run(app.id, CACHED_TERMS);
        return n;
      })
      .immediate();
  }
}
