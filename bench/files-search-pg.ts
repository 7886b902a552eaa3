/** files-search (issue 17) on PostgreSQL: the same files, terms and cases as bench/files-search.ts. Usage: node bench/run.ts files-search-pg */
import { run as runSearch } from './files-search.ts';

export function run(options: { rounds?: number; seconds?: number; big?: number } = {}): Promise<string> {
  return runSearch({ ...options, engine: 'postgres' });
}
