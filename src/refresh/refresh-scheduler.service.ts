import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { type LeasedConnection, RenewalLeaseRepository } from '../connections/store/renewal-lease.repository.js';
import { type CommitLane, RenewalSaveRepository } from '../connections/store/renewal-save.repository.js';
import { RenewalPacer } from './renewal-pacer.js';
import { RenewalService } from './renewal.service.js';

const INTERVAL_NAME = 'cws-refresh-scheduler';
/**
 * How many renewals to keep in flight for `backlog` due connections: one per due connection, at most the cap
 * (REFRESH_CONCURRENCY). Every renewal in flight is a rotation a SIGKILL can cut between the upstream's answer
 * and our COMMIT, so a small backlog never gets the whole cap; rows that fall due continuously still each
 * get a renewal at once (docs/renewal.md).
 */
export function renewalsInFlight(backlog: number, cap: number): number {
  if (backlog <= 0) return 0;
  return Math.max(1, Math.min(cap, backlog));
}

/**
 * Runs in every instance: each tick counts the due backlog, claims due connections in batches (the lease is
 * taken in the claiming statement, with SKIP LOCKED, so instances split the work without waiting on each
 * other), and renews them with as many in flight as the backlog needs (renewalsInFlight), claiming while
 * batches come back full.
 */
@Injectable()
export class RefreshScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(RefreshScheduler.name);
  private running: Promise<number> | null = null;
  private stopping = false;
  /** Leases given back by passes cut short by a stop (claimed, not started). */
  private releasedOnStop = 0;
  private registered = false;
  /** REFRESH_MAX_PER_SECOND over every pass of this instance; a burst of one claim's worth of workers. */
  private readonly pacer: RenewalPacer;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly leases: RenewalLeaseRepository,
    private readonly saves: RenewalSaveRepository,
    private readonly renewal: RenewalService,
    private readonly metrics: RefreshMetrics,
    private readonly schedulers: SchedulerRegistry,
  ) {
    this.pacer = new RenewalPacer(config.refresh.maxPerSecond, config.refresh.concurrency);
  }

  onApplicationBootstrap(): void {
    if (!this.config.refresh.schedulerEnabled) return;
    const timer = setInterval(() => {
      if (this.running || this.stopping) return;
      this.runOnce().catch((e: unknown) => {
        if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
        else
          this.logger.error(
            { error: e instanceof Error ? e.name : 'unknown', code: (e as { code?: unknown }).code },
            'refresh scheduler tick failed',
          );
      });
    }, this.config.refresh.intervalMs);
    this.schedulers.addInterval(INTERVAL_NAME, timer);
    this.registered = true;
  }

  /** A drain's first step: no new pass and no new claim (a pass in flight gives back what it claimed and has not started). */
  stopClaiming(): void {
    this.stopping = true;
    if (this.registered) {
      this.schedulers.deleteInterval(INTERVAL_NAME);
      this.registered = false;
    }
  }

  /**
   * Stops claiming, lets renewals in flight (scheduled and on demand) reach their commit, then releases every
   * lease this instance still holds, so that another instance renews those connections now rather than when the
   * lease lapses. Returns how many leases it released.
   */
  async stop(): Promise<number> {
    this.stopClaiming();
    this.metrics.stop();
    await this.running?.catch(() => undefined);
    await this.renewal.settle();
    const rest = await this.leases.releaseLeasesOf(this.config.instanceId);
    const released = this.releasedOnStop + rest;
    this.releasedOnStop = 0;
    return released;
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop().catch(() => undefined);
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
   * work. A worker is one renewal in flight from its token call to its COMMIT: it takes a hold on the
   * commit lane before the call, so the new pair is saved the moment it arrives (with whatever pairs arrived
   * during the lane's commit in flight, if one is), and takes the next row only after its own commit. So at any instant at most `workers` rotated pairs exist only in this
   * process's memory, which is what a SIGKILL can cost. The worker count follows the backlog: counted at the
   * start of the pass, raised when claims show more; workers end with the pass (stopping them as the queue
   * shrinks left its tail to one worker while more rows fell due). Returns once every renewal it started has
   * stored its outcome.
   */
  private async pass(): Promise<number> {
    const { batchSize, concurrency, leaseMs } = this.config.refresh;
    const me = this.config.instanceId;
    let backlog = await this.leases.countDue(concurrency);
    if (backlog === 0) return 0;
    // A row that waited its turn this long could see its lease lapse during the token call: extend it first.
    const extendAfter = (leaseMs - 2 * this.config.upstream.tokenTimeoutMs - this.config.upstream.connectTimeoutMs) / 2;
    const queue: Array<{ leased: LeasedConnection; takenAt: number }> = [];
    let claimed = 0;
    let exhausted = false;
    let claiming: Promise<void> | null = null;
    let claimError: unknown = null;
    let workers = 0;
    const started = new Set<Promise<void>>();
    // More workers when the backlog turns out larger than counted (rows fell due during the pass).
    const grow = () => {
      const wanted = renewalsInFlight(backlog, concurrency);
      while (workers < wanted) {
        workers++;
        const run: Promise<void> = worker().finally(() => {
          workers--;
          started.delete(run);
        });
        started.add(run);
      }
    };
    const refill = async () => {
      const takenAt = performance.now();
      const batch = await this.leases.claimDueForRefresh(me, leaseMs, batchSize);
      claimed += batch.length;
      for (const leased of batch) queue.push({ leased, takenAt });
      if (batch.length < batchSize) exhausted = true;
      backlog = Math.max(backlog, queue.length + (exhausted ? 0 : batchSize));
      grow();
    };
    const worker = async (): Promise<void> => {
      for (;;) {
        if (!exhausted && !claiming && !this.stopping && claimError === null && queue.length < workers) {
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
        // The row stays leased while it waits its slot; a long wait extends the lease below.
        const wait = this.pacer.reserve();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (this.stopping) {
          queue.unshift(next);
          return;
        }
        let lane: CommitLane;
        try {
          lane = await this.saves.reserveCommitLane();
        } catch (e) {
          queue.unshift(next);
          claimError ??= e;
          exhausted = true;
          return;
        }
        try {
          let leaseFrom = next.takenAt;
          if (performance.now() - next.takenAt > extendAfter) {
            leaseFrom = performance.now();
            if (!(await this.leases.extendLease(next.leased.connection.id, me, next.leased.connection.version, leaseMs))) continue;
          }
          await this.renewal.renewClaimed(next.leased, leaseFrom, lane);
        } finally {
          lane.release();
        }
      }
    };
    grow();
    while (started.size > 0) await Promise.all([...started]);
    const released = await this.leases.releaseLeases(
      queue.map((q) => q.leased.connection.id),
      me,
    );
    if (this.stopping) this.releasedOnStop += released;
    if (claimError !== null) throw claimError;
    return claimed;
  }
}
