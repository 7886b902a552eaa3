// The HTTP metrics kept in plain numbers (core/http-metrics.ts) against prom-client's own Counter
// and Histogram fed the same requests: the exposition must be the same text, byte for byte.
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { httpMetrics } from '../../core/http-metrics.ts';

function reference(registry: Registry) {
  const requests = new Counter({
    name: 'wharf_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'wharf_http_request_duration_seconds',
    help: 'HTTP request durations by method and route.',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return (method: string, route: string, status: number, seconds: number) => {
    requests.inc({ method, route, status });
    durations.observe({ method, route }, seconds);
  };
}

// Bounds exactly, between them, below the first, above the last; statuses appearing late.
const REQUESTS: [string, string, number, number][] = [
  ['GET', '/healthz', 200, 0.0004],
  ['GET', '/healthz', 200, 0.001],
  ['POST', '/api/tokens/validate', 401, 0.02],
  ['GET', 'unmatched', 404, 12],
  ['GET', '/healthz', 503, 0.005],
  ['POST', '/api/tokens/validate', 200, 0.0051],
  ['HEAD', '/healthz', 200, 10],
  ['POST', '/api/tokens/validate', 401, 2.5000001],
];

describe('HTTP metrics', () => {
  it('write the same exposition as prom-client, after requests and after a reset', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const record = httpMetrics(ours);
    const recordTheirs = reference(theirs);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    for (const r of REQUESTS) {
      record(...r);
      recordTheirs(...r);
    }
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain('wharf_http_requests_total{method="POST",route="/api/tokens/validate",status="401"} 2');
    expect(text).toContain('wharf_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/healthz"} 3');
    expect(text).toContain('wharf_http_request_duration_seconds_count{method="GET",route="unmatched"} 1');
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());

    ours.resetMetrics();
    theirs.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    record('GET', '/healthz', 200, 0.002);
    recordTheirs('GET', '/healthz', 200, 0.002);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
