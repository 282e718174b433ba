import { Inject, Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { budgetsInForce, type Budget } from '../config/quota-budgets.js';
import { QuotaService } from '../quota/quota.service.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { SyncMetrics } from './sync-metrics.js';
import { SyncStateRepository } from './sync-state.repository.js';

/**
 * Sync's share of each company's read budget (SYNC_BUDGET_SHARE), which listings and targeted reads both draw on,
 * and what it implies: how often a tenant's users are listed, and which tenants are not claimed for now.
 */
@Injectable()
export class SyncShare {
  /** Tenants whose sync share this instance was refused, and until when (ms since the epoch): not claimed meanwhile. */
  private readonly spentUntil = new Map<string, number>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly environments: Environments,
    private readonly tenants: TenantsService,
    private readonly syncs: SyncStateRepository,
    private readonly quota: QuotaService,
    private readonly metrics: SyncMetrics,
  ) {}

  /** The tenants whose share this instance was refused and has not freed a call yet. */
  spentTenants(): string[] {
    const now = this.clock.now().getTime();
    for (const [tenantId, until] of this.spentUntil) if (until <= now) this.spentUntil.delete(tenantId);
    return [...this.spentUntil.keys()];
  }

  /** The interval before the user's next listing: SYNC_POLL_INTERVAL, stretched so the tenant's users fit the share. */
  async intervalOf(tenantId: string): Promise<number> {
    const budget = await this.readBudget(tenantId);
    const interval = this.config.sync.pollIntervalMs;
    if (budget === null) return interval;
    const perWindow = Math.max(1, Math.floor(budget.calls * this.config.sync.budgetShare));
    const users = await this.syncs.countOfTenant(tenantId);
    return Math.max(interval, Math.ceil(users / perWindow) * budget.windowMs);
  }

  /**
   * One call of sync's share of the tenant's read budget, held in any interval of its window over every instance
   * (QuotaService.takePart: the budgets' sliding log): 0 when it may go (always, without a read budget), else the ms
   * until the share frees a call.
   */
  async waitMs(tenantId: string): Promise<number> {
    const budget = await this.readBudget(tenantId);
    if (budget === null) return 0;
    const waitMs = await this.quota.takePart(tenantId, 'read', 'sync', budget, this.config.sync.budgetShare);
    if (waitMs > 0) {
      this.metrics.calls.inc({ kind: 'list', outcome: 'refused' });
      this.spentUntil.set(tenantId, this.clock.now().getTime() + waitMs);
    }
    return waitMs;
  }

  private async readBudget(tenantId: string): Promise<Budget | null> {
    const tenant = await this.tenants.get(tenantId);
    const budgets = budgetsInForce(this.environments.find(tenant.environment)?.quotas ?? {}, tenant.quotas);
    return budgets.read ?? null;
  }
}
