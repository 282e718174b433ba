import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AuditService } from '../../audit/audit.service.js';
import { AppError } from '../../common/app-error.js';
import { Clock } from '../../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../../common/database-outage.js';
import type { AppConfig } from '../../config/app-config.js';
import { APP_CONFIG } from '../../config/config.module.js';
import { TenantsService } from '../../tenants/tenants.service.js';
import { DeliveryMetrics } from '../delivery-metrics.js';
import { retryDelayMs } from '../event-attempt.js';
import { EventDeliveryService } from '../event-delivery.service.js';
import { EventTargetClient } from '../event-target-client.js';
import { EventsRepository } from '../events.repository.js';
import { EndpointAnnouncements } from './endpoint-announcements.js';
import { FanoutPlanner } from './fanout-planner.js';
import { type ClaimedDelivery, EndpointDeliveriesRepository } from './endpoint-deliveries.repository.js';
import { EndpointSecrets } from './endpoint-secrets.js';
import { type ClockChange, type ClockRow, EndpointsRepository } from './endpoints.repository.js';

const FANOUT_BATCH = 500;
/** Attempts one instance runs at once over all endpoints; each endpoint holds at most its maxInFlight of them. */
const INSTANCE_SLOTS = 256;
/** How often an idle worker looks for due deliveries (a fan-out or a finished attempt looks at once). */
const POLL_MS = 100;
const LEASE_MARGIN_MS = 10_000;
const SWEEP_MS = 10 * 60_000;
const SWEEP_BATCH = 2000;
/** How long a delivery waits when its endpoint's secret cannot be opened for the service's own trouble. */
const SECRET_RETRY_MS = 5000;

/** The webhook-id of an event's delivery to an added endpoint: one per event and endpoint, for every attempt. */
export function endpointWebhookId(endpointId: string, eventId: string): string {
  const h = createHash('sha256').update(`${endpointId}:${eventId}`).digest('hex');
  return `msg_${h.slice(0, 32)}`;
}

/**
 * Delivery to the tenant's added endpoints (docs/endpoints.md): the fan-out of each event into one delivery row per
 * matching endpoint (one transaction, one INSERT), and workers that claim due deliveries per endpoint within its
 * maxInFlight, rate limit and Retry-After floor (all held in the database, so across instances), attempt them
 * without waiting on one another, and keep each endpoint's failure clock. eventsTargetUrl is not here: the events
 * table and EventDeliveryService deliver to it as before.
 */
@Injectable()
export class EndpointDeliveryService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('EndpointDelivery');
  private readonly client: EventTargetClient;
  private readonly announcements: EndpointAnnouncements;
  private readonly planner: FanoutPlanner;
  private readonly leaseMs: number;
  private running = 0;
  private readonly attempts = new Set<Promise<void>>();
  private stopping = false;
  private fanTimer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private fanning: Promise<void> | null = null;
  private fanAgain = false;
  private claiming: Promise<void> | null = null;
  private claimAgain = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly endpoints: EndpointsRepository,
    private readonly deliveries: EndpointDeliveriesRepository,
    events: EventsRepository,
    private readonly primary: EventDeliveryService,
    private readonly secrets: EndpointSecrets,
    audit: AuditService,
    private readonly tenants: TenantsService,
    private readonly clock: Clock,
    metrics: DeliveryMetrics,
  ) {
    this.client = new EventTargetClient(config, clock);
    metrics.endpointAttemptsInFlight(() => this.running);
    this.leaseMs = config.events.attemptTimeoutMs + LEASE_MARGIN_MS;
    this.planner = new FanoutPlanner(endpoints);
    this.announcements = new EndpointAnnouncements(endpoints, deliveries, events, audit);
    primary.onTargetGone = { within: (m, tenantId) => this.announcements.firstGone(m, tenantId), committed: () => this.kickFanout() };
  }

  onApplicationBootstrap(): void {
    this.fanTimer = setInterval(() => this.kickFanout(), this.config.events.relayIntervalMs);
    this.fanTimer.unref();
    this.pollTimer = setInterval(() => this.kickClaim(), POLL_MS);
    this.pollTimer.unref();
    this.sweepTimer = setInterval(() => void this.sweep(), SWEEP_MS);
    this.sweepTimer.unref();
    this.kickFanout();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    for (const t of [this.fanTimer, this.pollTimer, this.sweepTimer]) if (t) clearInterval(t);
    await this.fanning;
    await this.claiming;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.attempts]), new Promise((r) => (timer = setTimeout(r, 5000)))]);
    clearTimeout(timer);
    await this.client.close(true);
  }

  /** New events may wait in the outbox: fan them out now. */
  kickFanout(): void {
    if (this.stopping) return;
    if (this.fanning) {
      this.fanAgain = true;
      return;
    }
    this.fanning = this.fanOut().finally(() => {
      this.fanning = null;
      if (this.fanAgain) {
        this.fanAgain = false;
        this.kickFanout();
      }
    });
  }

  /** Deliveries may be due: claim what this instance has room for now. */
  kickClaim(): void {
    if (this.stopping) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = this.claimSome().finally(() => {
      this.claiming = null;
      if (this.claimAgain) {
        this.claimAgain = false;
        this.kickClaim();
      }
    });
  }

  private async fanOut(): Promise<void> {
    try {
      let moved = 0;
      for (;;) {
        const n = await this.deliveries.fanOut(FANOUT_BATCH, (m, events) => this.planner.plan(m, events));
        moved += n.deliveries;
        if (n.events < FANOUT_BATCH || this.stopping) break;
      }
      if (moved > 0) this.kickClaim();
    } catch (e) {
      this.background(e, 'endpoint fan-out failed; retrying at the next tick');
    }
  }

  private async claimSome(): Promise<void> {
    try {
      for (;;) {
        const room = INSTANCE_SLOTS - this.running;
        if (room <= 0 || this.stopping) return;
        const claimed = await this.deliveries.claim(room, this.leaseMs);
        for (const c of claimed) this.start(c);
        if (claimed.length === 0) return;
      }
    } catch (e) {
      this.background(e, 'claiming endpoint deliveries failed; retrying at the next tick');
    }
  }

  private start(c: ClaimedDelivery): void {
    this.running++;
    const p = this.attempt(c)
      .catch((e) => this.background(e, 'an endpoint delivery attempt could not be recorded; its lease ends and it is retried'))
      .finally(() => {
        this.running--;
        this.attempts.delete(p);
        this.kickClaim();
      });
    this.attempts.add(p);
  }

  /** One attempt of a claimed delivery. */
  private async attempt(c: ClaimedDelivery): Promise<void> {
    const { event, endpoint: ep } = c;
    if (!event) return this.deliveries.release(c, 'failed');
    const startAt = performance.now() + c.startDelayMs;
    let secrets: string[];
    try {
      secrets = await this.secrets.signingSecretsOf(ep);
    } catch (e) {
      // The service's own trouble (the key store unreachable, this instance behind a key rotation) is not the
      // endpoint's failure: no attempt is counted, and the delivery waits a moment. An unreadable secret is.
      if (e instanceof AppError && (e.code === 'key_store_unavailable' || e.code === 'service_unavailable'))
        return this.deliveries.postpone(c, new Date(this.clock.now().getTime() + SECRET_RETRY_MS));
      secrets = [];
    }
    // A rate-limited endpoint's attempt starts at its planned time (docs/endpoints.md, rateLimitPerSecond).
    const wait = startAt - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const outcome =
      secrets.length > 0
        ? await this.client.post(ep.url, secrets, event, endpointWebhookId(ep.id, event.id))
        : { ok: false, status: null, error: 'secret_unreadable', durationMs: 0, retryAfterMs: null };
    const now = this.clock.now();
    const log = { at: now, status: outcome.status, durationMs: outcome.durationMs, error: outcome.error };
    const gone = outcome.status === 410;
    let result: { kind: 'delivered' } | { kind: 'retry'; next: Date } | { kind: 'failed' };
    if (outcome.ok) result = { kind: 'delivered' };
    else if (gone || now.getTime() - c.retryFrom.getTime() >= this.config.events.retrySpanMs) result = { kind: 'failed' };
    else {
      const delay = Math.max(
        retryDelayMs(c.attempts + 1, this.config.events.retryBaseMs, this.config.events.retryMaxMs),
        outcome.retryAfterMs ?? 0,
      );
      result = { kind: 'retry', next: new Date(now.getTime() + delay) };
    }
    const notBefore = outcome.retryAfterMs !== null ? new Date(now.getTime() + outcome.retryAfterMs) : null;
    let change: ClockChange = { kind: 'none' };
    let clock: ClockRow | null = null;
    const done = await this.deliveries.finish(
      c,
      log,
      result,
      async (m) => {
        clock = await this.endpoints.lockClock(m, ep.id);
      },
      async (m) => {
        change = await this.endpoints.applyOutcome(m, ep.id, clock, {
          ok: outcome.ok,
          gone,
          firstFailedAt: c.firstFailedAt,
          notBefore,
          disableAfterMs: this.config.endpoints.disableAfterMs,
        });
        await this.announcements.clockChanged(m, ep, change);
      },
    );
    if (done === 'lost')
      this.logger.warn(
        { endpointId: ep.id, eventId: event.id, tenantId: ep.tenantId },
        'an endpoint delivery attempt outlived its lease and another attempt took it over: the partner may receive it twice',
      );
    if ((change as ClockChange).kind !== 'none') {
      this.primary.kick();
      this.kickFanout();
    }
  }

  /** Deliveries and attempts of events past the longest window any tenant keeps (docs/data-retention.md). */
  private async sweep(): Promise<void> {
    try {
      const days = await this.tenants.longestRetentionDays();
      const before = new Date(this.clock.now().getTime() - days * 86_400_000);
      while (!this.stopping && (await this.deliveries.deleteOlderThan(before, SWEEP_BATCH)) > 0);
    } catch (e) {
      this.background(e, 'the endpoint deliveries sweep failed; retrying later');
    }
  }

  private background(e: unknown, message: string): void {
    if (this.stopping) return;
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else this.logger.warn({ err: e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error' }, message);
  }
}
