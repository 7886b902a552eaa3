/**
 * The HTTP metrics of every request: `wharf_http_requests_total` by method, route and status, and
 * `wharf_http_request_duration_seconds` by method and route. A request adds to plain numbers kept
 * per route and method; prom-client gets them when the registry is read. prom-client's own
 * `inc` and `observe` check and join the labels of every call into a key: 1.5 to 3 µs a request
 * in a loop, against 0.1 µs here (BENCHMARKS.md, issue 16 part 6), where the route and method
 * strings, the same few objects on every request, find their numbers through two maps.
 */
import { Counter, type Registry } from 'prom-client';

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DURATIONS = 'wharf_http_request_duration_seconds';
const DURATIONS_HELP = 'HTTP request durations by method and route.';

interface Series {
  method: string;
  route: string;
  /** Requests by status. */
  statuses: Map<number, number>;
  /** Observations per bucket (not cumulative): index i counts those up to BUCKETS[i] and above the one before; the last, those above every bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** Registers both metrics on `registry`; the function records one request. */
export function httpMetrics(registry: Registry): (method: string, route: string, status: number, seconds: number) => void {
  const byRoute = new Map<string, Map<string, Series>>();
  /** Every series, and every (series, status), in the order they first appeared (prom-client's order). */
  const all: Series[] = [];
  const rows: { s: Series; status: number }[] = [];

  new Counter({
    name: 'wharf_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { s, status } of rows) this.inc({ method: s.method, route: s.route, status }, s.statuses.get(status)!);
    },
  });

  // The histogram in prom-client's shape (what its Histogram's get() answers), so the registry
  // writes it exactly as it would write its own.
  registry.registerMetric({
    name: DURATIONS,
    help: DURATIONS_HELP,
    type: 'histogram',
    aggregator: 'sum',
    reset() {
      byRoute.clear();
      all.length = 0;
      rows.length = 0;
    },
    async get() {
      const values: { labels: Record<string, string | number>; value: number; metricName: string; exemplar?: null }[] = [];
      for (const s of all) {
        const labels = { method: s.method, route: s.route };
        let cumulative = 0;
        BUCKETS.forEach((le, i) => {
          cumulative += s.buckets[i]!;
          values.push({ labels: { le, ...labels }, value: cumulative, metricName: `${DURATIONS}_bucket`, exemplar: null });
        });
        values.push({ labels: { le: '+Inf', ...labels }, value: s.count, metricName: `${DURATIONS}_bucket`, exemplar: null });
        values.push({ labels, value: s.sum, metricName: `${DURATIONS}_sum` });
        values.push({ labels, value: s.count, metricName: `${DURATIONS}_count` });
      }
      return { name: DURATIONS, help: DURATIONS_HELP, type: 'histogram', values, aggregator: 'sum' };
    },
  } as unknown as Parameters<Registry['registerMetric']>[0]);

  return function recordRequest(method, route, status, seconds) {
    let methods = byRoute.get(route);
    if (!methods) byRoute.set(route, (methods = new Map()));
    let s = methods.get(method);
    if (!s) {
      s = { method, route, statuses: new Map(), buckets: new Array<number>(BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      methods.set(method, s);
      all.push(s);
    }
    const n = s.statuses.get(status);
    if (n === undefined) rows.push({ s, status });
    s.statuses.set(status, (n ?? 0) + 1);
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    s.buckets[i]!++;
    s.sum += seconds;
    s.count++;
  };
}
