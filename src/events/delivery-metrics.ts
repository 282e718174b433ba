import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { MetricsService } from '../telemetry/metrics.service.js';

/**
 * What the fence on each event's delivery saw (docs/webhooks.md, "One attempt at a time"): `claimed`, an attempt
 * took its event; `held`, a job found another attempt of its event still running and waited for it instead of
 * forwarding the event a second time; `lost`, an attempt was recorded after its lease had passed to another one:
 * the event may have been forwarded twice without a crash (an instance frozen longer than the lease).
 */
export type FenceOutcome = 'claimed' | 'held' | 'lost';

/** The delivery metrics, on the app's own registry. */
@Injectable()
export class DeliveryMetrics {
  private readonly fence: Counter<'outcome'>;

  constructor(private readonly metrics: MetricsService) {
    this.fence = new Counter({
      name: 'cws_event_delivery_fence_total',
      help: 'Event delivery attempts by what the fence on the event did: claimed, held (a second forward avoided), lost (a possible duplicate).',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
    for (const outcome of ['claimed', 'held', 'lost'] as const) this.fence.inc({ outcome }, 0);
  }

  fenced(outcome: FenceOutcome): void {
    this.fence.inc({ outcome });
  }

  /** `cws_endpoint_attempts_in_flight`: this instance's attempts to added event endpoints running now, read at each scrape. */
  endpointAttemptsInFlight(read: () => number): void {
    new Gauge({
      name: 'cws_endpoint_attempts_in_flight',
      help: "This instance's attempts to added event endpoints running now (at most 256 an instance; each endpoint holds at most its maxInFlight over all instances).",
      registers: [this.metrics.registry],
      collect() {
        this.set(read());
      },
    });
  }
}
