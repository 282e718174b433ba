import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { backoffMs } from '../common/backoff.js';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { isQuotaClass, type Budget, type QuotaBudgets, type QuotaClass } from '../config/quota-budgets.js';
import { ChangeFeed, type Change } from '../changes/change-feed.service.js';
import { BudgetWindow } from './budget-window.js';
import type { LeaseAnswer, QuotaOutcome, WindowCounts, WindowHost, WindowKey } from './window-host.js';
import { leaseRuleOf, logOf, type BudgetPart, type QuotaLane } from './lane-policy.js';
import { QuotaMetrics } from './quota-metrics.js';
import { quotaRefusal } from './quota-refusal.js';
import { usageOf, type QuotaClassUsage } from './quota-usage.js';
import { QuotaWindowsRepository } from './quota-windows.repository.js';

/** How often figures are saved and units past their life given back. */
const TICK_MS = 1000;
/** The longest pause an upstream 429 may ask for. */
const MAX_PAUSE_MS = 3_600_000;
/** A 429 without Retry-After pauses for this backoff, doubling per 429 in a row (forgotten after a quiet minute). */
const PAUSE_BACKOFF = { baseMs: 1000, capMs: 60_000 };
const STRIKES_FORGOTTEN_MS = 60_000;

/** One tenant's class on this instance: its budget window (when it has a budget) and the upstream's pause. */
interface ClassState {
  window: BudgetWindow | null;
  pausedUntil: number;
  strikes: number;
  strikeAt: number;
}

type TenantClasses = Partial<Record<QuotaClass, ClassState>>;

const logger = new Logger('QuotaService');

/**
 * Each company's upstream budget per class of calls, shared by every instance (docs/quotas.md). A call's check is
 * in memory (BudgetWindow); PostgreSQL's sliding log is asked for units ahead of need, and told the figures every
 * second. An
 * upstream 429 pauses the class here at once and on every other instance through the change feed.
 */
@Injectable()
export class QuotaService implements WindowHost, OnModuleDestroy {
  readonly maxWaitMs: number;
  private readonly tenants = new Map<string, TenantClasses>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly ticker: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly clock: Clock,
    private readonly repo: QuotaWindowsRepository,
    private readonly metrics: QuotaMetrics,
    feed: ChangeFeed,
  ) {
    this.maxWaitMs = config.quota.maxWaitMs;
    feed.subscribe((change) => this.heard(change));
    this.ticker = setInterval(() => this.tick(), TICK_MS);
    this.ticker.unref();
  }

  /**
   * Before a resource call of `cls` for `tenantId`: null when it may go now (decided in memory), else a promise that
   * settles when it may go. Throws (or rejects with) `429 quota_exhausted` when it may not within QUOTA_MAX_WAIT_MS.
   * `budget` undefined: the class has none; only the upstream's pause applies.
   */
  take(tenantId: string, cls: QuotaClass, budget: Budget | undefined, lane: QuotaLane): Promise<void> | null {
    let state = this.tenants.get(tenantId)?.[cls];
    if (budget === undefined) {
      if (state === undefined || state.pausedUntil === 0) return null;
      const waitMs = state.pausedUntil - this.now();
      if (waitMs <= 0) return null;
      if (waitMs <= this.maxWaitMs) return new Promise((resolve) => setTimeout(resolve, waitMs).unref());
      this.metrics.observe(cls, lane, 'refused');
      throw quotaRefusal(cls, lane, null, waitMs);
    }
    const now = this.now();
    state ??= this.stateOf(tenantId, cls);
    let window = state.window;
    if (window === null) {
      window = state.window = new BudgetWindow(tenantId, cls, budget, this);
      window.pause(state.pausedUntil, now);
    } else if (window.current !== budget) {
      window.setBudget(budget, now);
    }
    return window.take(lane, now);
  }

  /**
   * One unit of a part of `budget` kept apart (`part` of class `cls`: sync's share of the read budget), `share` of its
   * calls (at least 1) within any interval of its window over every instance: the same sliding log and lease as the
   * class's own (quota_logs, key `<class>:<part>`), one unit per call, on the database's clock. The part's log has
   * one lane: its units are filed as people's, which the lease limits by the budget alone. Answers 0 when the unit is
   * granted, else the ms until the log frees one. The call still takes its unit of the class's budget (`take`).
   */
  async takePart(tenantId: string, cls: QuotaClass, part: BudgetPart, budget: Budget, share: number): Promise<number> {
    const calls = Math.max(1, Math.floor(budget.calls * share));
    const log = logOf({ calls, windowMs: budget.windowMs, text: budget.text });
    const answer = await this.track(this.repo.lease(tenantId, `${cls}:${part}`, log, 'interactive', 1, leaseRuleOf(calls)));
    return answer.units > 0 ? 0 : Math.max(1, answer.waitMs);
  }

  /**
   * The upstream answered 429: the class waits `retryAfterSeconds` (its Retry-After), or a backoff when it named
   * none, here at once and on every instance (quota_pauses, and the change feed).
   */
  upstreamRefused(tenantId: string, cls: QuotaClass, lane: QuotaLane, retryAfterSeconds: number | null): void {
    const now = this.now();
    const state = this.stateOf(tenantId, cls);
    if (now - state.strikeAt > STRIKES_FORGOTTEN_MS) state.strikes = 0;
    const waitMs = retryAfterSeconds !== null ? Math.min(retryAfterSeconds * 1000, MAX_PAUSE_MS) : backoffMs(state.strikes, PAUSE_BACKOFF);
    state.strikes++;
    state.strikeAt = now;
    this.metrics.observe(cls, lane, 'upstream_429');
    state.window?.upstreamRefused();
    if (waitMs <= 0) return;
    this.pauseHere(state, now + waitMs, now);
    this.track(this.repo.pause(tenantId, cls, now + waitMs)).catch((e: unknown) => this.saveFailed(e, 'a pause'));
  }

  /** What a tenant shows per class: `budgets` in force, `own` its own as stored (figures saved within the last second). */
  async usage(
    tenantId: string,
    budgets: QuotaBudgets,
    own: Readonly<Record<string, string>> | null,
  ): Promise<Record<QuotaClass, QuotaClassUsage>> {
    return usageOf(await this.repo.figuresOf(tenantId), budgets, own, this.now());
  }

  onModuleDestroy(): Promise<unknown> {
    clearInterval(this.ticker);
    for (const classes of this.tenants.values()) for (const state of Object.values(classes)) state.window?.close();
    return Promise.allSettled([...this.pending]);
  }

  // WindowHost: what every BudgetWindow shares.

  now(): number {
    return this.clock.now().getTime();
  }

  lease(w: WindowKey, lane: QuotaLane, want: number): Promise<LeaseAnswer> {
    const budget = w.current;
    return this.track(this.repo.lease(w.tenantId, w.cls, logOf(budget), lane, want, leaseRuleOf(budget.calls)));
  }

  giveBack(w: WindowKey, budget: Budget, bucket: number, lane: QuotaLane, units: number): void {
    this.track(this.repo.giveBack(w.tenantId, w.cls, logOf(budget), bucket, lane, units)).catch((e: unknown) =>
      this.saveFailed(e, 'units given back'),
    );
  }

  report(w: WindowKey, start: number, counts: WindowCounts): void {
    const { calls, windowMs } = w.current;
    this.track(this.repo.report(w.tenantId, w.cls, { start, windowMs, calls }, counts)).catch((e: unknown) =>
      this.saveFailed(e, 'figures'),
    );
  }

  observe(cls: QuotaClass, lane: QuotaLane, outcome: QuotaOutcome): void {
    this.metrics.observe(cls, lane, outcome);
  }

  leaseFailed(e: unknown): void {
    this.saveFailed(e, 'a lease');
  }

  private stateOf(tenantId: string, cls: QuotaClass): ClassState {
    let classes = this.tenants.get(tenantId);
    if (classes === undefined) this.tenants.set(tenantId, (classes = {}));
    return (classes[cls] ??= { window: null, pausedUntil: 0, strikes: 0, strikeAt: Number.NEGATIVE_INFINITY });
  }

  private pauseHere(state: ClassState, until: number, now: number): void {
    if (until <= state.pausedUntil) return;
    state.pausedUntil = until;
    state.window?.pause(until, now);
  }

  /** Another instance's pause (`quota_pauses:<tenant>:<class>:<until ms>`). */
  private heard(change: Change): void {
    if (change.table !== 'quota_pauses') return;
    const [cls, until] = change.id.split(':');
    if (!isQuotaClass(cls) || !Number.isFinite(Number(until))) return;
    this.pauseHere(this.stateOf(change.tenantId, cls), Number(until), this.now());
  }

  /** Figures to PostgreSQL, idle units back, and the states nobody uses any more forgotten (the map stays bounded). */
  private tick(): void {
    const now = this.now();
    for (const [tenantId, classes] of this.tenants) {
      for (const cls of Object.keys(classes) as QuotaClass[]) {
        const state = classes[cls] as ClassState;
        const window = state.window;
        if (window !== null) window.tick(now);
        const quiet = window === null || (window.idle && now - window.lastUse > 2 * window.current.windowMs);
        if (quiet && state.pausedUntil <= now && now - state.strikeAt > STRIKES_FORGOTTEN_MS) delete classes[cls];
      }
      if (Object.keys(classes).length === 0) this.tenants.delete(tenantId);
    }
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    const done = () => this.pending.delete(p);
    p.then(done, done);
    return p;
  }

  private saveFailed(e: unknown, what: string): void {
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else logger.warn({ err: e instanceof Error ? e.message : String(e) }, `quota: ${what} was not saved`);
  }
}
