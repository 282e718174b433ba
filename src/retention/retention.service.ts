import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { LOCKS, withTryAdvisoryLock } from '../database/advisory-lock.js';
import { DAY_MS, EventPartitions, startOfDay } from '../events/event-partitions.js';
import { EventsRemoval } from '../events/events-removal.repository.js';
import { TenantsRepository } from '../tenants/tenants.repository.js';
import type { PacerFigures, PacerSettings } from './purge-pacer.js';
import { TenantPurge } from './tenant-purge.js';

/** Days of partitions kept ready ahead of the clock (few: every partition costs each statement's planning). */
export const PARTITIONS_AHEAD_DAYS = 3;
/** How often an instance tries to run retention (one instance at a time runs it). */
const INTERVAL_MS = 60_000;
/** Rows per batch of a sweep or a tenant removal: one short transaction each. */
export const BATCH_ROWS = 1000;
/** Batches of sweeps per run; the next run goes on from what is left. */
const BATCHES_PER_RUN = 200;
/**
 * Batches of tenant removals per run, and the time after which a run takes no more of them: the removal is paced
 * (PurgePacer), so its batches are smaller and rest between them; the next run goes on from what is left.
 */
const PURGE_BATCHES_PER_RUN = 2000;
const RUN_BUDGET_MS = 50_000;

export interface RetentionRun {
  /** Partition tables created, and dropped (by name). */
  created: number;
  dropped: string[];
  /** Events (with their attempts) swept from tenants with a shorter window. */
  swept: number;
  /** Rows of deleted tenants removed, and the tenants whose removal finished. */
  purged: number;
  tenantsRemoved: string[];
  /** Batches were left for the next run. */
  more: boolean;
  /** How the removal of deleted tenants was paced (docs/data-retention.md, "Tenant deletion"). */
  pacing: PacerFigures;
}

export interface RetentionRunOptions {
  /** Batches of this run, sweeps and tenant removals together (default: 200 of sweeps, 2,000 of removals). */
  maxBatches?: number;
  batchRows?: number;
  /** Overrides of the removal's pacing. */
  pacing?: Partial<PacerSettings>;
}

/**
 * Retention (docs/data-retention.md, "What is kept"): every minute one instance (an advisory lock) creates the
 * day partitions ahead of the clock, drops those past the longest window in use, sweeps the events of tenants
 * whose window is shorter in small batches, and removes deleted tenants' rows. Every step is idempotent and
 * keeps no state outside the database, so a run cut short (a restart) is finished by the next.
 */
@Injectable()
export class RetentionService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Retention');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly clock: Clock,
    private readonly partitions: EventPartitions,
    private readonly removal: EventsRemoval,
    private readonly tenants: TenantsRepository,
    private readonly purge: TenantPurge,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Before serving: the days this instance may write into exist (the clock may be ahead of the last run). A
    // failure here (a lock another instance's run holds past lock_timeout) is left to the next run: the days
    // ahead made by earlier runs cover the meantime.
    await this.partitions.ensure(this.clock.now(), PARTITIONS_AHEAD_DAYS).catch((e: unknown) => this.report(e));
    this.timer = setInterval(() => void this.tick(), INTERVAL_MS);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private async tick(): Promise<void> {
    if (this.running) return;
    this.running = this.runOnce().catch((e: unknown) => this.report(e));
    await this.running;
    this.running = null;
  }

  private report(e: unknown): void {
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else
      this.logger.warn(
        { err: e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error' },
        'retention run failed; next run in a minute',
      );
  }

  /** One run, if no other instance is running one (then null). */
  runOnce(options: RetentionRunOptions = {}): Promise<RetentionRun | null> {
    return withTryAdvisoryLock(this.db, LOCKS.retention, () => this.run(options));
  }

  private async run({ maxBatches, batchRows = BATCH_ROWS, pacing }: RetentionRunOptions): Promise<RetentionRun> {
    const deadline = performance.now() + RUN_BUDGET_MS;
    const now = this.clock.now();
    const created = await this.partitions.ensure(now, PARTITIONS_AHEAD_DAYS);
    const defaultDays = this.config.events.retentionDays;
    const keptDays = Math.max(defaultDays, (await this.tenants.longestRetention()) ?? 0);
    // A day partition goes once every row in it is older than the longest window: its upper bound is at or before this.
    const dropped = await this.partitions.dropBefore(new Date(startOfDay(now).getTime() - keptDays * DAY_MS));
    let batches = 0;
    let swept = 0;
    let more = false;
    for (const tenant of await this.tenants.withRetentionBelow(defaultDays, keptDays)) {
      const before = new Date(now.getTime() - tenant.days * DAY_MS);
      for (;;) {
        if (batches >= (maxBatches ?? BATCHES_PER_RUN)) {
          more = true;
          break;
        }
        batches++;
        const n = await this.removal.removeSomeOfTenant(tenant.id, before, batchRows);
        swept += n;
        if (n < batchRows) break;
      }
    }
    const purgeBatches = maxBatches === undefined ? PURGE_BATCHES_PER_RUN : Math.max(0, maxBatches - batches);
    const purged = await this.purge.run({ maxBatches: purgeBatches, batchSize: batchRows, deadline, pacing });
    const run = {
      created,
      dropped,
      swept,
      purged: purged.rows,
      tenantsRemoved: purged.tenants,
      more: more || purged.more,
      pacing: purged.pacing,
    };
    if (created || dropped.length || swept || purged.rows || purged.tenants.length) this.logger.log(run, 'retention run');
    return run;
  }
}
