import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../telemetry/metrics.service.js';

export const UPSTREAM_OUTCOMES = ['2xx', '3xx', '4xx', '5xx', 'error'] as const;
export type UpstreamOutcome = (typeof UPSTREAM_OUTCOMES)[number];

/**
 * Resource calls to the upstream (the facade's and the service's own), on the app's registry. The labelled
 * children are bound once: a call costs two increments, no label lookup.
 */
@Injectable()
export class UpstreamMetrics {
  private readonly byOutcome: Record<UpstreamOutcome, { inc(): void }>;
  private readonly duration: Histogram;

  constructor(metrics: MetricsService) {
    const registers = [metrics.registry];
    const total = new Counter({
      name: 'cws_upstream_requests_total',
      help: 'Resource calls to the upstream, by status class (error: no answer).',
      labelNames: ['outcome'],
      registers,
    });
    this.byOutcome = Object.fromEntries(UPSTREAM_OUTCOMES.map((o) => [o, total.labels({ outcome: o })])) as Record<
      UpstreamOutcome,
      { inc(): void }
    >;
    this.duration = new Histogram({
      name: 'cws_upstream_request_duration_seconds',
      help: "Time of one resource call, from sending it to the upstream answer's headers (retries included).",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
  }

  record(status: number | null, seconds: number): void {
    this.byOutcome[outcomeOf(status)].inc();
    this.duration.observe(seconds);
  }
}

/** By the status's hundreds (no string made per call). */
const BY_CLASS: readonly UpstreamOutcome[] = ['error', 'error', '2xx', '3xx', '4xx', '5xx'];

function outcomeOf(status: number | null): UpstreamOutcome {
  if (status === null || status < 200 || status >= 600) return 'error';
  return BY_CLASS[Math.floor(status / 100)];
}
