import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
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

  constructor(metrics: MetricsService) {
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
}
