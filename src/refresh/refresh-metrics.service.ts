import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { MetricsService } from '../telemetry/metrics.service.js';
import { RenewalLeaseRepository } from '../connections/store/renewal-lease.repository.js';

export type RenewalOutcome = 'success' | 'failure' | 'reauth_required' | 'lost_race';

/** The renewal metrics, on the app's own registry (several apps may share a test process). */
@Injectable()
export class RefreshMetrics {
  private readonly total: Counter<'outcome'>;
  private readonly duration: Histogram;
  private collecting = true;

  constructor(metrics: MetricsService, leases: RenewalLeaseRepository) {
    const registers = [metrics.registry];
    this.total = new Counter({
      name: 'cws_refresh_total',
      help: 'Renewal attempts that held the lease, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of ['success', 'failure', 'reauth_required', 'lost_race'] as const) this.total.inc({ outcome }, 0);
    this.duration = new Histogram({
      name: 'cws_refresh_duration_seconds',
      help: 'Time of one renewal, from holding the lease to the committed new pair (or the recorded failure).',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    const isCollecting = () => this.collecting;
    new Gauge({
      name: 'cws_refresh_overdue_seconds',
      help: 'How long the most overdue active connection has been due for renewal (0: none is overdue).',
      registers,
      // Computed at scrape by one index-backed query; skipped once the app is closing (the pool may be gone).
      async collect() {
        if (!isCollecting()) return;
        this.set(await leases.oldestOverdueSeconds().catch(() => 0));
      },
    });
  }

  record(outcome: RenewalOutcome, seconds: number): void {
    this.total.inc({ outcome });
    this.duration.observe(seconds);
  }

  stop(): void {
    this.collecting = false;
  }
}
