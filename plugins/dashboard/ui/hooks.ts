/** Small hooks: loading data from the API, and the route in the location's hash. */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** Loads again (after a change the page made). */
  reload(): Promise<void>;
  /** Replaces the data in place (a live update). */
  set(update: (data: T | undefined) => T | undefined): void;
}

/**
 * Runs `load` when `deps` change, and on `reload()`; the error of the last run. A reload keeps
 * the data on screen until the new data comes; a change of `deps` (another record) clears it,
 * unless `keep` says the new data is the same list narrowed or paged (search as you type); a
 * kept list goes when its replacement fails.
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[], options: { keep?: boolean } = {}): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const current = useRef<AbortController | undefined>(undefined);
  const run = useCallback(async () => {
    current.current?.abort();
    const controller = new AbortController();
    current.current = controller;
    setLoading(true);
    try {
      const value = await load(controller.signal);
      if (controller.signal.aborted) return;
      setData(value);
      setError(undefined);
    } catch (err) {
      if (controller.signal.aborted) return;
      // A kept list is another term's or page's: after a failure it would pass for this one's answer.
      if (options.keep) setData(undefined);
      setError(err instanceof ApiError ? err : new ApiError(0, (err as Error).message));
    } finally {
      if (!controller.signal.aborted) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    if (!options.keep) setData(undefined);
    setError(undefined);
    void run();
    return () => current.current?.abort();
  }, [run]);
  return { data, error, loading, reload: run, set: (update) => setData(update) };
}

/**
 * An action a button starts: `busy` while it runs, its error kept for the page to show in place
 * (never thrown away), cleared when it runs again.
 */
export function useAction<A extends unknown[], R>(fn: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const run = async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await fn(...args);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, (err as Error).message));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clear: () => setError(undefined) };
}

export interface Route {
  /** Path segments after `#/`: `#/apps/42` is ['apps', '42']. */
  parts: string[];
  params: URLSearchParams;
}

function parseHash(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = hash.split('?', 2);
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(search) };
}

/** The route in the hash, updated on navigation. */
export function useRoute(): Route {
  const [route, setRoute] = useState(parseHash);
  useEffect(() => {
    const update = () => setRoute(parseHash());
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return route;
}

/** The href of a dashboard page: `link('apps', id)` is `#/apps/<id>`. */
export function link(...parts: (string | number)[]): string {
  return `#/${parts.map((p) => encodeURIComponent(String(p))).join('/')}`;
}

/** Replaces the query of the current page (filters, page numbers) without a new history entry. */
export function setParams(params: Record<string, string | number | null | undefined>): void {
  const { parts, params: current } = parseHash();
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === '') current.delete(key);
    else current.set(key, String(value));
  }
  const search = current.toString();
  history.replaceState(null, '', `${link(...parts)}${search ? `?${search}` : ''}`);
  dispatchEvent(new HashChangeEvent('hashchange'));
}
