import { backoffMs } from '../common/backoff.js';
import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import PgBoss from 'pg-boss';
import { Agent, request } from 'undici';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { TenantEntity } from '../tenants/tenant.entity.js';
import { ATTR, contextOf, endClientSpan, injectTraceContext, startClientSpan } from '../ops/tracing.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { EventsRepository, type SqlExecutor, type StoredEvent, type UnqueuedEvent } from './events.repository.js';
import { signDelivery } from './standard-webhooks.js';
import { guardedConnector, TargetRefusedError, targetPolicy } from './target-policy.js';

export const DELIVERY_QUEUE = 'events-deliver';
const PGBOSS_SCHEMA = 'pgboss';
const WORKERS = 2;
const RELAY_BATCH = 500;

interface DeliveryJob {
  eventId: string;
  /** Attempts already made when this job was queued: a job whose event moved on is stale and skipped. */
  attempt: number;
}

/** One attempt's result: what the attempts log keeps, and the Retry-After the target asked for (429, 503). */
interface Outcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  retryAfterMs: number | null;
}

/**
 * Signed, at-least-once delivery of events to the tenant's eventsTargetUrl (docs/webhooks.md).
 *
 * The events table is the truth (state, attempts, next attempt); pg-boss is the durable scheduler and
 * work distributor. Every path that queues a job does it in the transaction that changes the event:
 * the relay marks an event enqueued in the transaction that inserts its first job, and a failed
 * attempt is counted in the transaction that inserts the job of the next one. A job lost with a killed
 * instance stays `active` in pg-boss until it expires, then pg-boss retries it; the attempt number in
 * the job makes a repeated or stale job harmless.
 */
@Injectable()
export class EventDeliveryService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('EventDelivery');
  private readonly agent: Agent;
  private boss: PgBoss | null = null;
  private workerIds: string[] = [];
  private relayTimer: NodeJS.Timeout | null = null;
  private relaying: Promise<void> | null = null;
  private relayAgain = false;
  private stopping = false;
  private stopped: Promise<number> | null = null;
  /** Jobs whose handler is running (a drain waits for them). */
  private inFlight = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly events: EventsRepository,
    private readonly tenants: TenantsService,
    private readonly clock: Clock,
  ) {
    this.agent = new Agent({
      // Every connection is checked against the target policy as it is made: the address it resolves to then.
      connect: guardedConnector(
        targetPolicy(config.production, config.security.eventsTargetAllowPrivate),
        Math.min(10_000, config.events.attemptTimeoutMs),
      ),
      headersTimeout: config.events.attemptTimeoutMs,
      bodyTimeout: config.events.attemptTimeoutMs,
      keepAliveTimeout: 10_000,
      connections: 64,
    });
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
      // The queue's own tables are bounded (docs/operations.md, "What is kept"): a finished job moves to the
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
    await this.events.withQueueSetupLock(async () => {
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
      await this.agent.close();
      return 0;
    }
    await boss.stop({ graceful: true, wait: true, timeout: timeoutMs, close: true });
    const returned = this.inFlight;
    // Attempts still running were failed back to the queue: cut them rather than wait for their targets.
    await (returned > 0 ? this.agent.destroy() : this.agent.close());
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
        const n = await this.events.relayUnqueued(RELAY_BATCH, (rows, sql) => this.enqueue(rows, sql));
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

  private async enqueue(rows: UnqueuedEvent[], sql: SqlExecutor): Promise<void> {
    if (!this.boss) throw new Error('pg-boss is not started');
    await this.boss.insert(
      rows.map((r) => ({
        name: DELIVERY_QUEUE,
        data: { eventId: r.id, attempt: r.attempt } satisfies DeliveryJob,
        ...(r.notBefore ? { startAfter: r.notBefore } : {}),
      })),
      { db: sql },
    );
  }

  private async deliverAll(jobs: DeliveryJob[]): Promise<void> {
    this.inFlight += jobs.length;
    try {
      await Promise.all(jobs.map((job) => this.deliver(job)));
    } finally {
      this.inFlight -= jobs.length;
    }
  }

  /** One attempt. Throws only on database trouble (pg-boss then retries the job). */
  async deliver(job: DeliveryJob): Promise<void> {
    const event = await this.events.getById(job.eventId);
    if (!event || event.deliveryState !== 'pending' || event.deliveryAttempts !== job.attempt) return;
    let tenant: TenantEntity;
    try {
      tenant = await this.tenants.get(event.tenantId);
    } catch (e) {
      if (e instanceof AppError && e.code === 'tenant_not_found') return; // deleted with its events
      throw e;
    }
    const target = tenant.eventsTargetUrl;
    if (!target || tenant.eventsTargetDisabled) {
      await this.events.markNoTarget(event.id);
      return;
    }
    const outcome = await this.post(target, this.tenants.signingSecretsOf(tenant), event);
    await this.events.recordAttempt(event.id, {
      at: this.clock.now(),
      status: outcome.status,
      durationMs: outcome.durationMs,
      error: outcome.error,
    });
    if (outcome.ok) {
      await this.events.markDelivered(event.id, job.attempt);
      return;
    }
    const error = outcome.error ?? 'network';
    if (outcome.status === 410) {
      // The partner says this target is gone for good: stop sending anything there until it sets one again.
      await this.tenants.disableEventsTarget(event.tenantId, target);
      await this.events.markDead(event.id, job.attempt, error);
      this.logger.warn(
        { eventId: event.id, tenantId: event.tenantId },
        'the events target answered 410 Gone: delivery to it is disabled until eventsTargetUrl is set again',
      );
      return;
    }
    const now = this.clock.now().getTime();
    if (now - (event.retryFrom ?? event.receivedAt).getTime() >= this.config.events.retrySpanMs) {
      await this.events.markDead(event.id, job.attempt, error);
      this.logger.warn({ eventId: event.id, tenantId: event.tenantId, attempts: job.attempt + 1, lastError: error }, 'event dead-lettered');
      return;
    }
    // Retry-After is a floor the target asked for; the backoff still applies when it asks for less.
    const delay = Math.max(
      retryDelayMs(job.attempt + 1, this.config.events.retryBaseMs, this.config.events.retryMaxMs),
      outcome.retryAfterMs ?? 0,
    );
    const next = new Date(now + delay);
    await this.events.recordFailure(event.id, job.attempt, error, next, async (sql) => {
      await this.boss?.insert(
        [{ name: DELIVERY_QUEUE, data: { eventId: event.id, attempt: job.attempt + 1 } satisfies DeliveryJob, startAfter: next }],
        { db: sql },
      );
    });
  }

  private async post(target: string, secrets: string[], event: StoredEvent): Promise<Outcome> {
    const body = deliveryBody(event);
    const timestamp = Math.floor(this.clock.now().getTime() / 1000);
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'cws-connect-webhooks/1',
      ...signDelivery(secrets, event.id, timestamp, body),
      ...(event.payloadDigest !== null ? { 'cws-payload-digest': event.payloadDigest } : {}),
    };
    // In the trace that received or created the event, so the partner can join its own to it.
    const span = startClientSpan(
      'POST event delivery',
      'POST',
      originOf(target),
      { [ATTR.tenant]: event.tenantId, [ATTR.eventId]: event.id, [ATTR.eventType]: event.type },
      contextOf(event.traceparent),
    );
    if (span !== null) injectTraceContext(span, headers);
    else if (event.traceparent !== null) headers.traceparent = event.traceparent;
    try {
      const res = await request(target, {
        method: 'POST',
        dispatcher: this.agent,
        headers,
        body,
        signal: AbortSignal.timeout(this.config.events.attemptTimeoutMs),
      });
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const status = res.statusCode;
      endClientSpan(span, status);
      if (status >= 200 && status < 300) return { ok: true, status, error: null, durationMs: took(), retryAfterMs: null };
      const retryAfterMs =
        status === 429 || status === 503
          ? retryAfterMsOf(res.headers['retry-after'], this.clock.now().getTime(), this.config.events.retrySpanMs)
          : null;
      return { ok: false, status, error: `http_${status}`, durationMs: took(), retryAfterMs };
    } catch (e) {
      endClientSpan(span, null, e);
      // Recorded as any failed connect (`network`): the attempts log must not tell internal addresses apart.
      if (refusedByPolicy(e))
        this.logger.warn({ eventId: event.id, tenantId: event.tenantId }, 'the events target resolves to an address that is not allowed');
      return { ok: false, status: null, error: networkError(e), durationMs: took(), retryAfterMs: null };
    }
  }
}

/** The delivered body: `{type, timestamp, data}`, `timestamp` being when cws-connect recorded the event. */
export function deliveryBody(event: Pick<StoredEvent, 'type' | 'receivedAt' | 'payload'>): string {
  return JSON.stringify({ type: event.type, timestamp: event.receivedAt.toISOString(), data: event.payload });
}

/** Exponential with ±20% jitter, capped: base, 2·base, 4·base, … up to max. `failures` ≥ 1. */
export function retryDelayMs(failures: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  return backoffMs(failures - 1, { baseMs, capMs: maxMs, floorMs: 1, spread: [0.8, 1.2], random });
}

/**
 * A Retry-After header (delay-seconds or an HTTP date) in milliseconds from `now`, at most `capMs`; null when
 * absent or unreadable.
 */
export function retryAfterMsOf(header: string | string[] | undefined, now: number, capMs: number): number | null {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return null;
  let ms: number;
  if (/^\d{1,10}$/.test(value)) ms = Number(value) * 1000;
  else {
    // An HTTP date starts with a day name (IMF-fixdate, RFC 850 or asctime); Date.parse alone takes "-5" for a year.
    const at = /^[A-Za-z]{3,9},? /.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.min(capMs, Math.max(0, ms));
}

/** A target URL's origin: its path and query may hold the partner's own secret (a token in a webhook URL is common). */
function originOf(target: string): string {
  try {
    return new URL(target).origin;
  } catch {
    return '';
  }
}

// Only the error's kind: a message may quote the target URL, which can carry credentials.
function networkError(e: unknown): string {
  const err = e as { code?: unknown; name?: unknown; cause?: { code?: unknown; name?: unknown } };
  const code = typeof err?.code === 'string' ? err.code : typeof err?.cause?.code === 'string' ? err.cause.code : '';
  const timedOut =
    ['TimeoutError', 'AbortError'].includes(String(err?.name)) || String(err?.cause?.name) === 'TimeoutError' || /TIMEOUT/.test(code);
  return timedOut ? 'timeout' : 'network';
}

function refusedByPolicy(e: unknown): boolean {
  for (let err = e, depth = 0; err instanceof Error && depth < 4; err = err.cause, depth++)
    if (err instanceof TargetRefusedError) return true;
  return false;
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error';
}
