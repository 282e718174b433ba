import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import PgBoss from 'pg-boss';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { DeliveryMetrics } from './delivery-metrics.js';
import { type DeliveryJob, EventAttempt, type TargetGone } from './event-attempt.js';
import { EventDeliveryRepository, type SqlExecutor, type UnqueuedEvent } from './event-delivery.repository.js';
import { EventTargetClient } from './event-target-client.js';
import { EventsRepository } from './events.repository.js';

export const DELIVERY_QUEUE = 'events-deliver';
const PGBOSS_SCHEMA = 'pgboss';
const WORKERS = 2;
const RELAY_BATCH = 500;
/** After a drain cut the attempts still running, how long it waits for them to record their failure (and free their events). */
const RECORD_AFTER_CUT_MS = 2000;

/**
 * Signed, at-least-once delivery of events to the tenant's eventsTargetUrl (docs/webhooks.md).
 *
 * The events table is the truth (state, attempts, next attempt); pg-boss is the durable scheduler and
 * work distributor. Every path that queues a job does it in the transaction that changes the event:
 * the relay marks an event enqueued in the transaction that inserts its first job, and a failed
 * attempt is counted in the transaction that inserts the job of the next one. A job lost with a killed
 * instance stays `active` in pg-boss until it expires, then pg-boss retries it; the attempt number in
 * the job makes a repeated or stale job harmless, and the fence on the event's row (EventAttempt) keeps a job
 * offered again while its attempt still runs from forwarding the event a second time.
 */
@Injectable()
export class EventDeliveryService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('EventDelivery');
  private readonly client: EventTargetClient;
  private readonly attempt: EventAttempt;
  private boss: PgBoss | null = null;
  private workerIds: string[] = [];
  private relayTimer: NodeJS.Timeout | null = null;
  private relaying: Promise<void> | null = null;
  private relayAgain = false;
  private stopping = false;
  private stopped: Promise<number> | null = null;
  /** Jobs whose handler is running (a drain waits for them). */
  private inFlight = 0;
  private readonly batches = new Set<Promise<void>>();
  /** Set by the event endpoints (docs/endpoints.md): told when a 410 disables eventsTargetUrl. */
  onTargetGone: TargetGone | null = null;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    events: EventsRepository,
    private readonly deliveries: EventDeliveryRepository,
    tenants: TenantsService,
    clock: Clock,
    metrics: DeliveryMetrics,
  ) {
    this.client = new EventTargetClient(config, clock);
    this.attempt = new EventAttempt(
      config,
      events,
      deliveries,
      tenants,
      clock,
      this.client,
      metrics,
      (jobs, sql) => this.insertJobs(jobs, sql),
      () => this.onTargetGone,
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    const { events } = this.config;
    if (!this.config.databaseUrl) throw new Error('DATABASE_URL must be resolved before the app starts');
    const boss = new PgBoss({
      connectionString: this.config.databaseUrl,
      schema: PGBOSS_SCHEMA,
      max: 4,
      application_name: `cws-connect ${this.config.instanceId} pg-boss`,
      schedule: false,
      supervise: true,
      maintenanceIntervalSeconds: events.maintenanceSeconds,
      // The queue's own tables are bounded (docs/data-retention.md, "What is kept"): a finished job moves to the
      // archive after an hour, and the archive keeps a day. The events table, not the queue, is the record.
      archiveCompletedAfterSeconds: 3600,
      deleteAfterDays: 1,
    });
    boss.on('error', (err: Error) => {
      if (isDatabaseUnavailable(err)) databaseOutage.report(err, 'background');
      else this.logger.warn({ err: { name: err.name, message: err.message } }, 'pg-boss reported an error');
    });
    // pg-boss's own retries only cover a job that threw (database trouble) or expired with a killed
    // instance; delivery failures are counted in the events table and scheduled by us.
    const queueOptions = {
      name: DELIVERY_QUEUE,
      retryLimit: 100_000,
      retryDelay: 1,
      retryBackoff: true,
      expireInSeconds: events.jobExpireSeconds,
    };
    await this.deliveries.withQueueSetupLock(async () => {
      await boss.start();
      if (!(await boss.getQueue(DELIVERY_QUEUE))) await boss.createQueue(DELIVERY_QUEUE, queueOptions);
    });
    this.boss = boss;
    for (let i = 0; i < WORKERS; i++) {
      this.workerIds.push(
        await boss.work<DeliveryJob>(
          DELIVERY_QUEUE,
          { batchSize: events.batchSize, pollingIntervalSeconds: events.pollIntervalMs / 1000 },
          (jobs) => this.deliverAll(jobs.map((job) => job.data)),
        ),
      );
    }
    this.relayTimer = setInterval(() => this.kick(), events.relayIntervalMs);
    this.relayTimer.unref();
    this.kick();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop(10_000);
  }

  /**
   * Stops relaying and taking jobs, waits up to `timeoutMs` for the attempts in flight, then fails the jobs still
   * running back to pg-boss (retried by any instance; the attempt number in the job keeps a late one harmless).
   * Returns how many it handed back that way.
   */
  stop(timeoutMs: number): Promise<number> {
    this.stopped ??= this.shutDown(timeoutMs);
    return this.stopped;
  }

  private async shutDown(timeoutMs: number): Promise<number> {
    this.stopping = true;
    if (this.relayTimer) clearInterval(this.relayTimer);
    await this.relaying;
    const boss = this.boss;
    if (!boss) {
      await this.client.close(false);
      return 0;
    }
    await boss.stop({ graceful: true, wait: true, timeout: timeoutMs, close: true });
    const returned = this.inFlight;
    // Attempts still running were failed back to the queue: cut them rather than wait for their targets, and give
    // them a moment to record their failure, which frees their events for the next attempt at once.
    await this.client.close(returned > 0);
    if (returned > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.batches]), new Promise((r) => (timer = setTimeout(r, RECORD_AFTER_CUT_MS)))]);
      clearTimeout(timer);
    }
    return returned;
  }

  /** Something was recorded: hand it to the queue now instead of at the next relay tick. */
  kick(): void {
    if (this.stopping || !this.boss) return;
    if (this.relaying) {
      this.relayAgain = true;
      return;
    }
    this.relaying = this.relay().finally(() => {
      this.relaying = null;
      if (this.relayAgain) {
        this.relayAgain = false;
        this.kick();
      }
    });
  }

  private async relay(): Promise<void> {
    try {
      let moved = 0;
      for (;;) {
        const n = await this.deliveries.relayUnqueued(RELAY_BATCH, (rows, sql) => this.enqueue(rows, sql));
        moved += n;
        if (n < RELAY_BATCH || this.stopping) break;
      }
      if (moved > 0) for (const id of this.workerIds) this.boss?.notifyWorker(id);
    } catch (e) {
      if (this.stopping) return;
      if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
      else this.logger.warn({ err: errorText(e) }, 'event relay failed; retrying at the next tick');
    }
  }

  private enqueue(rows: UnqueuedEvent[], sql: SqlExecutor): Promise<void> {
    return this.insertJobs(
      rows.map((r) => ({ data: { eventId: r.id, attempt: r.attempt }, ...(r.notBefore ? { startAfter: r.notBefore } : {}) })),
      sql,
    );
  }

  private async insertJobs(jobs: Array<{ data: DeliveryJob; startAfter?: Date }>, sql: SqlExecutor): Promise<void> {
    if (!this.boss) throw new Error('pg-boss is not started');
    await this.boss.insert(
      jobs.map((j) => ({ name: DELIVERY_QUEUE, ...j })),
      { db: sql },
    );
  }

  private async deliverAll(jobs: DeliveryJob[]): Promise<void> {
    this.inFlight += jobs.length;
    const batch = settleAll(jobs, (job) => this.attempt.run(job));
    this.batches.add(batch);
    try {
      await batch;
    } finally {
      this.batches.delete(batch);
      this.inFlight -= jobs.length;
    }
  }
}

/**
 * Runs `work` on every item at once and answers once every one has finished; then throws the first failure, if
 * any. pg-boss fails a whole batch when its handler throws and offers its jobs again at once: a handler that threw
 * at the first failure (Promise.all) let another instance pick up jobs whose attempts were still running here,
 * find their events still pending, and send them a second time.
 */
export async function settleAll<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  const results = await Promise.allSettled(items.map(work));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error';
}
