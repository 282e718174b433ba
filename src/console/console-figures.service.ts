import { Inject, Injectable } from '@nestjs/common';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { MetricsService } from '../telemetry/metrics.service.js';
import type { ConsoleFiguresDto } from './dto/console.dto.js';

interface HistogramFigures {
  meanMs: number | null;
  p95UnderMs: number | null;
}

/** The renewal and upstream figures at a glance: read from the app's own Prometheus registry, never counted twice. */
@Injectable()
export class ConsoleFiguresService {
  private readonly startedAt = new Date();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: MetricsService,
  ) {}

  async summary(): Promise<ConsoleFiguresDto> {
    const [renewals, renewalTime, overdue, upstream, upstreamTime, quota] = await Promise.all(
      [
        'cws_refresh_total',
        'cws_refresh_duration_seconds',
        'cws_refresh_overdue_seconds',
        'cws_upstream_requests_total',
        'cws_upstream_request_duration_seconds',
        'cws_quota_calls_total',
      ].map((name) => this.read(name)),
    );
    return {
      instanceId: this.config.instanceId,
      startedAt: this.startedAt.toISOString(),
      renewals: { byOutcome: byLabel(renewals, 'outcome'), ...histogram(renewalTime), overdueSeconds: Math.round(overdue[0]?.value ?? 0) },
      upstream: { byOutcome: byLabel(upstream, 'outcome'), ...histogram(upstreamTime) },
      quotas: { read: quotaFigures(quota, 'read'), write: quotaFigures(quota, 'write') },
    };
  }

  private async read(name: string): Promise<MetricValue<string>[]> {
    const metric = this.metrics.registry.getSingleMetric(name);
    if (!metric) return [];
    return ((await metric.get()) as MetricObjectWithValues<MetricValue<string>>).values;
  }
}

function byLabel(values: MetricValue<string>[], label: string): Record<string, number> {
  return Object.fromEntries(values.map((v) => [String(v.labels[label]), v.value]));
}

/** One class of cws_quota_calls_total, every lane together. */
function quotaFigures(values: MetricValue<string>[], cls: string): ConsoleFiguresDto['quotas']['read'] {
  const sum = (outcome: string) =>
    values.filter((v) => v.labels.class === cls && v.labels.outcome === outcome).reduce((n, v) => n + v.value, 0);
  return { spent: sum('spent'), waited: sum('waited'), refused: sum('refused'), upstream429: sum('upstream_429') };
}

function histogram(values: Array<MetricValue<string> & { metricName?: string }>): HistogramFigures {
  const count = values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  const sum = values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0;
  if (count === 0) return { meanMs: null, p95UnderMs: null };
  const p95 = values.find((v) => v.metricName?.endsWith('_bucket') && v.labels.le !== '+Inf' && v.value >= 0.95 * count);
  return { meanMs: round((sum / count) * 1000), p95UnderMs: p95 ? round(Number(p95.labels.le) * 1000) : null };
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
