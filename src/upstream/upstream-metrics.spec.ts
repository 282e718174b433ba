import { describe, expect, it } from '@jest/globals';
import { Counter, Histogram, Registry } from 'prom-client';
import type { MetricsService } from '../telemetry/metrics.service.js';
import { UpstreamMetrics } from './upstream-metrics.js';

const calls: Array<[number | null, number]> = [
  [200, 0.003],
  [200, 0.005], // on a bound: in its bucket (le is inclusive)
  [204, 0.04],
  [302, 0.2],
  [404, 1.5],
  [503, 12],
  [null, 45], // past the last bound: +Inf only
  [199, 0.01],
];

/** What prom-client's own counter and histogram show for the same calls. */
async function reference(): Promise<string> {
  const registry = new Registry();
  const total = new Counter({ name: 'cws_upstream_requests_total', help: 'h', labelNames: ['outcome'], registers: [registry] });
  const duration = new Histogram({
    name: 'cws_upstream_request_duration_seconds',
    help: 'h',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  for (const outcome of ['2xx', '3xx', '4xx', '5xx', 'error']) total.inc({ outcome }, 0);
  for (const [status, seconds] of calls) {
    const cls = status === null || status < 200 || status >= 600 ? 'error' : `${Math.floor(status / 100)}xx`;
    total.inc({ outcome: cls });
    duration.observe(seconds);
  }
  return registry.metrics();
}

const values = (text: string) => text.split('\n').filter((line) => line.startsWith('cws_'));

describe('UpstreamMetrics', () => {
  it("shows what prom-client's counter and histogram show for the same calls, read after read", async () => {
    const registry = new Registry();
    const metrics = new UpstreamMetrics({ registry } as MetricsService);
    const [first, second] = [calls.slice(0, 3), calls.slice(3)];
    for (const [status, seconds] of first) metrics.record(status, seconds);
    await registry.metrics(); // a read between the calls: counts carry over
    for (const [status, seconds] of second) metrics.record(status, seconds);
    const shown = values(await registry.metrics());
    expect(shown).toEqual(values(await reference()));
    expect(shown).toContain('cws_upstream_requests_total{outcome="2xx"} 3');
    expect(shown).toContain('cws_upstream_request_duration_seconds_bucket{le="0.005"} 2');
    expect(shown).toContain('cws_upstream_request_duration_seconds_count 8');
    // And as JSON (the console's figures read it so).
    const json = await registry.getSingleMetric('cws_upstream_request_duration_seconds')?.get();
    expect(json?.values.find((v) => (v as { metricName?: string }).metricName?.endsWith('_count'))?.value).toBe(8);
  });
});
