import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { type LeasedConnection, RefreshRepository } from './refresh.repository.js';
import { RenewalService } from './renewal.service.js';

const INTERVAL_NAME = 'cws-refresh-scheduler';

/**
 * Runs in every instance: each tick claims due connections in batches (the lease is taken in the claiming
 * statement, with SKIP LOCKED, so instances split the work without waiting on each other), renews them with
 * bounded concurrency, and keeps claiming while batches come back full.
 */
@Injectable()
export class RefreshScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(RefreshScheduler.name);
  private running: Promise<number> | null = null;
  private stopping = false;
  private registered = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: RefreshRepository,
    private readonly renewal: RenewalService,
    private readonly metrics: RefreshMetrics,
    private readonly schedulers: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.refresh.schedulerEnabled) return;
    const timer = setInterval(() => {
      if (this.running || this.stopping) return;
      this.runOnce().catch((e: unknown) => this.logger.error({ error: e instanceof Error ? e.name : 'unknown', code: (e as { code?: unknown }).code }, 'refresh scheduler tick failed'));
    }, this.config.refresh.intervalMs);
    this.schedulers.addInterval(INTERVAL_NAME, timer);
    this.registered = true;
  }

  /** Stops claiming, lets renewals in flight reach their commit, and gives claimed-but-unstarted leases back. */
  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    this.metrics.stop();
    if (this.registered) {
      this.schedulers.deleteInterval(INTERVAL_NAME);
      this.registered = false;
    }
    await this.running?.catch(() => undefined);
  }

  /** One pass over everything due; returns how many connections it claimed. Tests with REFRESH_SCHEDULER=off call it by hand. */
  async runOnce(): Promise<number> {
    while (this.running) await this.running.catch(() => undefined);
    const run = this.pass();
    this.running = run;
    try {
      return await run;
    } finally {
      this.running = null;
    }
  }

  private async pass(): Promise<number> {
    const { batchSize, leaseMs } = this.config.refresh;
    let claimed = 0;
    while (!this.stopping) {
      const takenAt = performance.now();
      const batch = await this.repo.claimDueForRefresh(this.config.instanceId, leaseMs, batchSize);
      claimed += batch.length;
      await this.renewAll(batch, takenAt);
      if (batch.length < batchSize) break;
    }
    return claimed;
  }

  private async renewAll(batch: LeasedConnection[], takenAt: number): Promise<void> {
    const { concurrency, leaseMs } = this.config.refresh;
    // A row that waited its turn this long could see its lease lapse during the token call: extend it first.
    const extendAfter = (leaseMs - 2 * this.config.upstream.tokenTimeoutMs - this.config.upstream.connectTimeoutMs) / 2;
    let next = 0;
    const skipped: string[] = [];
    const worker = async () => {
      while (next < batch.length) {
        const item = batch[next++];
        if (this.stopping) {
          skipped.push(item.connection.id);
          continue;
        }
        let leaseFrom = takenAt;
        if (performance.now() - takenAt > extendAfter) {
          leaseFrom = performance.now();
          if (!(await this.repo.extendLease(item.connection.id, this.config.instanceId, item.connection.version, leaseMs))) continue;
        }
        await this.renewal.renewClaimed(item, leaseFrom);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, batch.length) }, worker));
    await this.repo.releaseLeases(skipped, this.config.instanceId);
  }
}
