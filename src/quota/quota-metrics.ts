import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { QUOTA_CLASSES, type QuotaClass } from '../config/quota-budgets.js';
import { MetricsService } from '../telemetry/metrics.service.js';
import type { QuotaOutcome } from './window-host.js';
import { LANES, type QuotaLane } from './lane-policy.js';

type Outcome = QuotaOutcome | 'upstream_429';
const OUTCOMES: readonly Outcome[] = ['spent', 'waited', 'refused', 'upstream_429'];

/**
 * `cws_quota_calls_total{class, lane, outcome}`: resource calls counted against a company's budget (`spent`: sent,
 * `waited`: sent after waiting for budget, `refused`: answered `429 quota_exhausted`) and the upstream's own 429s
 * (`upstream_429`). Every child is bound once: a call costs an increment, no label lookup.
 */
@Injectable()
export class QuotaMetrics {
  private readonly children = {} as Record<QuotaClass, Record<QuotaLane, Record<Outcome, { inc(): void }>>>;

  constructor(metrics: MetricsService) {
    const counter = new Counter({
      name: 'cws_quota_calls_total',
      help: "Resource calls counted against a company's upstream budget, by class, lane and outcome (docs/quotas.md).",
      labelNames: ['class', 'lane', 'outcome'],
      registers: [metrics.registry],
    });
    for (const cls of QUOTA_CLASSES) {
      this.children[cls] = {} as Record<QuotaLane, Record<Outcome, { inc(): void }>>;
      for (const lane of LANES) {
        this.children[cls][lane] = {} as Record<Outcome, { inc(): void }>;
        for (const outcome of OUTCOMES) this.children[cls][lane][outcome] = counter.labels({ class: cls, lane, outcome });
      }
    }
  }

  observe(cls: QuotaClass, lane: QuotaLane, outcome: Outcome): void {
    this.children[cls][lane][outcome].inc();
  }
}
