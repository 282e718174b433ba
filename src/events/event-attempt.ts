import { Logger } from '@nestjs/common';
import { backoffMs } from '../common/backoff.js';
import { AppError } from '../common/app-error.js';
import type { Clock } from '../common/clock.js';
import type { EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config.js';
import type { TenantEntity } from '../tenants/tenant.entity.js';
import type { TenantsService } from '../tenants/tenants.service.js';
import type { DeliveryMetrics } from './delivery-metrics.js';
import type { DeliveryAttempt, EventDeliveryRepository, Outcome, SqlExecutor } from './event-delivery.repository.js';
import type { AttemptOutcome, EventTargetClient } from './event-target-client.js';
import type { EventsRepository, StoredEvent } from './events.repository.js';

/** What the event endpoints do when a 410 disables eventsTargetUrl (docs/endpoints.md). */
export interface TargetGone {
  /** In the transaction that disables the target: the announcement commits with it, or neither does. */
  within(m: EntityManager, tenantId: string): Promise<void>;
  /** After that commit (wakes the fan-out). Never throws. */
  committed(tenantId: string): void;
}

export interface DeliveryJob {
  eventId: string;
  /** Attempts already made when this job was queued: a job whose event moved on is stale and skipped. */
  attempt: number;
}

/** Queues delivery jobs through the given transaction (the job queue's `db` option). */
export type Enqueue = (jobs: Array<{ data: DeliveryJob; startAfter?: Date }>, sql: SqlExecutor) => Promise<void>;

/**
 * Beyond the attempt's own timeout, how long its lease lasts: the claim before, the tenant's lookup and the
 * recording after, and an event loop that runs late. An attempt is cut at its timeout, so it ends within its lease.
 */
const LEASE_MARGIN_MS = 10_000;
/** A job that waits for another attempt's lease runs this long after it ends (the database clock decides). */
const AFTER_LEASE_MS = 500;

/**
 * One delivery attempt of an event (docs/webhooks.md, "One attempt at a time"): the event's row is claimed (its
 * fence) before anything is forwarded, and the outcome recorded only under that fence, so a job offered again
 * while its attempt still runs (a batch past its expiry, a drain that handed jobs back) waits for that attempt
 * instead of forwarding the event a second time.
 */
export class EventAttempt {
  private readonly logger = new Logger('EventDelivery');
  /** How long a claim keeps other attempts of the event away. */
  readonly leaseMs: number;

  constructor(
    private readonly config: AppConfig,
    private readonly events: EventsRepository,
    private readonly deliveries: EventDeliveryRepository,
    private readonly tenants: TenantsService,
    private readonly clock: Clock,
    private readonly client: EventTargetClient,
    private readonly metrics: DeliveryMetrics,
    private readonly enqueue: Enqueue,
    /** Who is told when a 410 disables the target (the event endpoints announce it: docs/endpoints.md). */
    private readonly targetGone: () => TargetGone | null = () => null,
  ) {
    this.leaseMs = config.events.attemptTimeoutMs + LEASE_MARGIN_MS;
  }

  /** One attempt. Throws only on database trouble (the job queue then retries the job). */
  async run(job: DeliveryJob): Promise<void> {
    const event = await this.events.findInAnyTenant(job.eventId);
    if (!event || event.deliveryState !== 'pending' || event.deliveryAttempts !== job.attempt) return;
    const claim = await this.deliveries.claim(event, job.attempt, this.leaseMs, (until, sql) =>
      this.enqueue([{ data: job, startAfter: new Date(until.getTime() + AFTER_LEASE_MS) }], sql),
    );
    if (claim === null) return;
    if (claim === 'held') {
      this.metrics.fenced('held');
      return;
    }
    this.metrics.fenced('claimed');
    const fence = claim.fence;
    let tenant: TenantEntity;
    try {
      tenant = await this.tenants.get(event.tenantId);
    } catch (e) {
      if (e instanceof AppError && e.code === 'tenant_not_found') return; // deleted with its events
      throw e;
    }
    const target = tenant.eventsTargetUrl;
    if (!target || tenant.eventsTargetDisabled) {
      await this.deliveries.finish(event, job.attempt, fence, null, { kind: 'no_target' });
      return;
    }
    const outcome = await this.post(target, tenant, event);
    const log: DeliveryAttempt = { at: this.clock.now(), status: outcome.status, durationMs: outcome.durationMs, error: outcome.error };
    if (outcome.ok) {
      await this.record(event, job, fence, log, { kind: 'delivered' });
      return;
    }
    const error = outcome.error ?? 'network';
    if (outcome.status === 410) {
      // The partner says this target is gone for good: stop sending anything there until it sets one again. The
      // announcement commits with the change, or neither does (then the job's retry meets the 410 again).
      const gone = this.targetGone();
      const disabled = await this.tenants.disableEventsTarget(event.tenantId, target, gone ? (m) => gone.within(m, event.tenantId) : null);
      await this.record(event, job, fence, log, { kind: 'dead', error });
      if (disabled) gone?.committed(event.tenantId);
      this.logger.warn(
        { eventId: event.id, tenantId: event.tenantId },
        'the events target answered 410 Gone: delivery to it is disabled until eventsTargetUrl is set again',
      );
      return;
    }
    const now = this.clock.now().getTime();
    if (now - (event.retryFrom ?? event.receivedAt).getTime() >= this.config.events.retrySpanMs) {
      if ((await this.record(event, job, fence, log, { kind: 'dead', error })) === 'recorded')
        this.logger.warn(
          { eventId: event.id, tenantId: event.tenantId, attempts: job.attempt + 1, lastError: error },
          'event dead-lettered',
        );
      return;
    }
    // Retry-After is a floor the target asked for; the backoff still applies when it asks for less.
    const delay = Math.max(
      retryDelayMs(job.attempt + 1, this.config.events.retryBaseMs, this.config.events.retryMaxMs),
      outcome.retryAfterMs ?? 0,
    );
    const next = new Date(now + delay);
    await this.record(event, job, fence, log, {
      kind: 'retry',
      error,
      next,
      schedule: (sql) => this.enqueue([{ data: { eventId: event.id, attempt: job.attempt + 1 }, startAfter: next }], sql),
    });
  }

  /**
   * One signed POST to the target. An events secret that does not open (secret_unreadable) sends nothing
   * unsigned: a failed attempt, retried with backoff, so a rotation of the secret lets the event through.
   */
  private async post(target: string, tenant: TenantEntity, event: StoredEvent): Promise<AttemptOutcome> {
    let secrets: string[];
    try {
      secrets = await this.tenants.signingSecretsOf(tenant);
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      return { ok: false, status: null, error: e.code, durationMs: 0, retryAfterMs: null };
    }
    return this.client.post(target, secrets, event);
  }

  private async record(event: StoredEvent, job: DeliveryJob, fence: string, log: DeliveryAttempt, outcome: Outcome) {
    const done = await this.deliveries.finish(event, job.attempt, fence, log, outcome);
    if (done === 'lost') {
      this.metrics.fenced('lost');
      this.logger.warn(
        { eventId: event.id, tenantId: event.tenantId, leaseMs: this.leaseMs },
        'a delivery attempt outlived its lease and another attempt took the event over: the partner may receive it twice',
      );
    }
    return done;
  }
}

/** Exponential with ±20% jitter, capped: base, 2·base, 4·base, … up to max. `failures` ≥ 1. */
export function retryDelayMs(failures: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  return backoffMs(failures - 1, { baseMs, capMs: maxMs, floorMs: 1, spread: [0.8, 1.2], random });
}
