import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../telemetry/metrics.service.js';

export const UPSTREAM_OUTCOMES = ['2xx', '3xx', '4xx', '5xx', 'error'] as const;
export type UpstreamOutcome = (typeof UPSTREAM_OUTCOMES)[number];

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** prom-client's values of a histogram without labels (its `hashMap` under the empty labels' key). */
interface HistogramValues {
  labels: Record<string, never>;
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

/**
 * Resource calls to the upstream (the facade's and the service's own), on the app's registry. A call costs a
 * few additions into preallocated arrays (its outcome's count, its duration's bucket, sum and count): the
 * metrics take them when they are read (`collect`), not per call. prom-client's `inc` and `observe` checked the
 * labels and made a string of the bucket's bound on every call.
 */
@Injectable()
export class UpstreamMetrics {
  /** Calls per outcome (UPSTREAM_OUTCOMES's order) since the last read. */
  private readonly pending = new Float64Array(UPSTREAM_OUTCOMES.length);
  /** Observations per bucket (BUCKETS's order, past the last: +Inf), their sum and count, since the start. */
  private readonly buckets = new Float64Array(BUCKETS.length + 1);
  private sum = 0;
  private count = 0;

  constructor(metrics: MetricsService) {
    const registers = [metrics.registry];
    const pending = this.pending;
    new Counter({
      name: 'cws_upstream_requests_total',
      help: 'Resource calls to the upstream, by status class (error: no answer).',
      labelNames: ['outcome'],
      registers,
      collect() {
        for (let i = 0; i < UPSTREAM_OUTCOMES.length; i++) {
          this.inc({ outcome: UPSTREAM_OUTCOMES[i] }, pending[i]); // every outcome shown, 0 included
          pending[i] = 0;
        }
      },
    });
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    new Histogram({
      name: 'cws_upstream_request_duration_seconds',
      help: "Time of one resource call, from sending it to the upstream answer's headers (retries included).",
      buckets: BUCKETS,
      registers,
      collect() {
        const bucketValues: Record<number, number> = {};
        for (let i = 0; i < BUCKETS.length; i++) bucketValues[BUCKETS[i]] = self.buckets[i];
        const values: HistogramValues = { labels: {}, bucketValues, sum: self.sum, count: self.count };
        (this as unknown as { hashMap: Record<string, HistogramValues> }).hashMap = { '': values };
      },
    });
  }

  record(status: number | null, seconds: number): void {
    this.pending[outcomeOf(status)]++;
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]) i++;
    this.buckets[i]++;
    this.sum += seconds;
    this.count++;
  }
}

/** UPSTREAM_OUTCOMES's index of a status, by its hundreds (no string made per call). */
const BY_CLASS = [4, 4, 0, 1, 2, 3];

function outcomeOf(status: number | null): number {
  if (status === null || status < 200 || status >= 600) return 4;
  return BY_CLASS[Math.floor(status / 100)];
}
