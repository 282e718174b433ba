import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { type LeasedConnection, RefreshRepository } from './refresh.repository.js';
import { RenewalService } from './renewal.service.js';

const INTERVAL_NAME = 'cws-refresh-scheduler';
/**
 * Renewals whose token call returned wait for their group commit without holding a call slot. This many,
 * per unit of REFRESH_CONCURRENCY, may wait at once: enough that commits never starve the calls (a flush
 * takes a few ms, calls return every fraction of one), few enough that a stalled database stops new token
 * calls quickly instead of piling up rotated pairs that exist only in this process's memory.
 */
const COMMIT_BACKLOG_PER_SLOT = 4;

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
      this.runOnce().catch((e: unknown) => {
        if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
        else this.logger.error({ error: e instanceof Error ? e.name : 'unknown', code: (e as { code?: unknown }).code }, 'refresh scheduler tick failed');
      });
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

  /**
   * Workers take claimed rows from a local queue; the next batch is claimed while the queue still holds
   * work, so no worker idles behind the slowest renewal of a batch. A worker is a slot for one token call:
   * once the call returns it starts the next one while the renewed pair waits for its group commit, so
   * `concurrency` calls stay in flight (what the upstream sees) and commits grow into large groups instead
   * of each worker paying a round trip and a WAL flush per renewal. Stops when a claim comes back short,
   * and returns once every renewal it started has stored its outcome.
   */
  private async pass(): Promise<number> {
    const { batchSize, concurrency, leaseMs } = this.config.refresh;
    const me = this.config.instanceId;
    // A row that waited its turn this long could see its lease lapse during the token call: extend it first.
    const extendAfter = (leaseMs - 2 * this.config.upstream.tokenTimeoutMs - this.config.upstream.connectTimeoutMs) / 2;
    const queue: Array<{ leased: LeasedConnection; takenAt: number }> = [];
    const unfinished = new Set<Promise<void>>();
    const maxUnfinished = concurrency * (1 + COMMIT_BACKLOG_PER_SLOT);
    let claimed = 0;
    let exhausted = false;
    let claiming: Promise<void> | null = null;
    let claimError: unknown = null;
    const refill = async () => {
      const takenAt = performance.now();
      const batch = await this.repo.claimDueForRefresh(me, leaseMs, batchSize);
      claimed += batch.length;
      for (const leased of batch) queue.push({ leased, takenAt });
      if (batch.length < batchSize) exhausted = true;
    };
    const worker = async () => {
      for (;;) {
        if (!exhausted && !claiming && !this.stopping && claimError === null && queue.length < concurrency) {
          claiming = refill()
            .catch((e: unknown) => {
              claimError = e;
            })
            .finally(() => {
              claiming = null;
            });
        }
        const next = queue.shift();
        if (!next) {
          if (claiming) {
            await claiming;
            continue;
          }
          return;
        }
        if (this.stopping) {
          queue.unshift(next);
          return;
        }
        let leaseFrom = next.takenAt;
        if (performance.now() - next.takenAt > extendAfter) {
          leaseFrom = performance.now();
          if (!(await this.repo.extendLease(next.leased.connection.id, me, next.leased.connection.version, leaseMs))) continue;
        }
        let callOver: () => void = () => undefined;
        const called = new Promise<void>((resolve) => (callOver = resolve));
        const done: Promise<void> = this.renewal.renewClaimed(next.leased, leaseFrom, callOver).then(() => {
          unfinished.delete(done);
        });
        unfinished.add(done);
        await called;
        while (unfinished.size >= maxUnfinished) await Promise.race(unfinished);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    await Promise.all(unfinished);
    await this.repo.releaseLeases(
      queue.map((q) => q.leased.connection.id),
      me,
    );
    if (claimError !== null) throw claimError;
    return claimed;
  }
}
