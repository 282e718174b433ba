import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { MetricsService } from '../telemetry/metrics.service.js';

/** The synced records' metrics, on the app's own registry: the listings', the targeted reads' and the engine's. */
@Injectable()
export class SyncMetrics {
  readonly calls: Counter<'kind' | 'outcome'>;
  private readonly changes: Counter<'action'>;
  readonly lag: Gauge;

  constructor(metrics: MetricsService) {
    this.calls = new Counter({
      name: 'cws_sync_upstream_calls_total',
      help: 'Upstream calls made by synced records, by kind (list, read) and outcome (ok, failed, refused).',
      labelNames: ['kind', 'outcome'],
      registers: [metrics.registry],
    });
    this.changes = new Counter({
      name: 'cws_sync_changes_total',
      help: 'Changes written to the synced records, by action.',
      labelNames: ['action'],
      registers: [metrics.registry],
    });
    this.lag = new Gauge({
      name: 'cws_sync_lag_seconds',
      help: "How late the oldest due listing of a synced user is (every instance's users), as this instance last read it.",
      registers: [metrics.registry],
    });
  }

  /** Counts the changes written (cws_sync_changes_total); answers how many. */
  count(applied: { changes: Array<{ action: string }> }): number {
    for (const c of applied.changes) this.changes.inc({ action: c.action });
    return applied.changes.length;
  }
}
