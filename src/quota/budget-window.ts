import type { Budget, QuotaClass } from '../config/quota-budgets.js';
import { LANES, RANK, unitLifeMs, type QuotaLane } from './lane-policy.js';
import { quotaRefusal } from './quota-refusal.js';
import { HeldUnits } from './held-units.js';
import type { WindowCounts, WindowHost } from './window-host.js';

/** A lease asks for what this instance spends of a lane in this long (less for a short unit life). */
const LEASE_AHEAD_MS = 500;
/** A lane's rate here is measured over periods of a second, or as short as 100 ms once they hold 10 calls. */
const RATE_MS = 1000;
const RATE_MIN_MS = 100;
const RATE_MIN_CALLS = 10;

interface Waiter {
  lane: QuotaLane;
  deadline: number;
  resolve(): void;
  reject(e: unknown): void;
}

/**
 * One company's budget for one class of calls, as this instance sees it (docs/quotas.md). Units are leased per lane
 * from the class's sliding log in PostgreSQL, which never grants more than the budget within one span, and only
 * what the lane rule leaves a lane; a unit not spent within its life goes back. A call takes a unit in memory, or
 * waits up to QUOTA_MAX_WAIT_MS in a queue served by lane, or is refused with the time to wait: a lane the log
 * last refused is refused here, without asking again, until the time the log named.
 */
export class BudgetWindow {
  private readonly held = new HeldUnits((lot) => this.host.giveBack(this, lot.budget, lot.bucket, lot.lane, lot.units));
  /** Per lane (RANK): a lease in flight. Each lane leases on its own: people never wait behind an agents' lease. */
  private readonly leasing = [false, false, false];
  /** Per lane (RANK): the log had nothing for it until then (ms, this instance's clock). */
  private readonly blockedUntil = [0, 0, 0];
  /** Per lane: calls served here, their rate (per ms) over the last period measured, where that period started. */
  private readonly taken = [0, 0, 0];
  private readonly rate = [0, 0, 0];
  private readonly mark = LANES.map(() => ({ at: Number.NEGATIVE_INFINITY, taken: 0 }));
  private readonly slice = [1, 1, 1];
  private readonly queues: Waiter[][] = [[], [], []];
  private waiting = 0;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Number.POSITIVE_INFINITY;
  /** The clock window the figures below are counted for (the tenant shows spent, waited, refused per window). */
  private figuresStart = Number.NEGATIVE_INFINITY;
  private counts: WindowCounts = { spent: 0, waited: 0, refused: 0, upstream429: 0 };
  pausedUntil = 0;
  lastUse = 0;

  constructor(
    readonly tenantId: string,
    readonly cls: QuotaClass,
    private budget: Budget,
    private readonly host: WindowHost,
  ) {}

  /** null: served now, from memory. Else a promise that settles when served, or rejects with `quota_exhausted`. */
  take(lane: QuotaLane, now: number): Promise<void> | null {
    this.lastUse = now;
    this.roll(now);
    this.held.expire(now);
    if (this.queues[RANK[lane]].length === 0 && this.pausedUntil <= now && this.held.spend(lane, now)) {
      this.served(lane, now, false);
      return null;
    }
    const at = this.earliest(lane, now);
    if (at > now + this.host.maxWaitMs) throw this.refuse(lane, now, at);
    return new Promise<void>((resolve, reject) => {
      this.queues[RANK[lane]].push({ lane, deadline: now + this.host.maxWaitMs, resolve, reject });
      this.waiting++;
      this.pump(now);
    });
  }

  /** A budget read again (a tenant's own changed): what is held under the old one goes back. */
  setBudget(budget: Budget, now: number): void {
    if (budget.calls === this.budget.calls && budget.windowMs === this.budget.windowMs) return;
    this.held.release();
    this.blockedUntil.fill(0);
    this.budget = budget;
    this.pump(now);
  }

  get current(): Budget {
    return this.budget;
  }

  /** The upstream said 429: this class waits until `until` here (and, through the host, everywhere). */
  pause(until: number, now: number): void {
    if (until <= this.pausedUntil) return;
    this.pausedUntil = until;
    this.pump(now);
  }

  upstreamRefused(): void {
    this.counts.upstream429++;
  }

  /** Every second (QuotaService): units past their life back to the log, figures to PostgreSQL. */
  tick(now: number): void {
    this.roll(now);
    this.held.expire(now);
    this.flush();
  }

  /** Nothing held, waiting or unsaved: the window can be forgotten. */
  get idle(): boolean {
    return this.held.empty && this.waiting === 0 && !this.leasing.includes(true) && !hasCounts(this.counts);
  }

  /** Gives back what is held and stops (shutdown). */
  close(): void {
    this.held.release();
    this.flush();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private served(lane: QuotaLane, now: number, waited: boolean): void {
    const r = RANK[lane];
    this.taken[r]++;
    const elapsed = now - this.mark[r].at;
    if (elapsed >= RATE_MS || (elapsed >= RATE_MIN_MS && this.taken[r] - this.mark[r].taken >= RATE_MIN_CALLS)) {
      if (this.mark[r].at > Number.NEGATIVE_INFINITY) this.rate[r] = (this.taken[r] - this.mark[r].taken) / (now - this.mark[r].at);
      this.mark[r] = { at: now, taken: this.taken[r] };
    }
    this.counts.spent++;
    this.host.observe(this.cls, lane, 'spent');
    if (waited) {
      this.counts.waited++;
      this.host.observe(this.cls, lane, 'waited');
    }
    if (!this.leasing[r] && this.blockedUntil[r] <= now && this.held.usable(lane, now) <= this.slice[r] >> 1) {
      const ahead = this.sliceSize(lane);
      if (ahead > 0) this.lease(now, lane, ahead);
    }
  }

  private refuse(lane: QuotaLane, now: number, at: number): Error {
    this.counts.refused++;
    this.host.observe(this.cls, lane, 'refused');
    return quotaRefusal(this.cls, lane, this.pausedUntil > now ? null : this.budget, at - now);
  }

  /** The earliest time a call of `lane` could be served, from what is known here. */
  private earliest(lane: QuotaLane, now: number): number {
    return Math.max(now, this.pausedUntil, this.blockedUntil[RANK[lane]]);
  }

  /** Serves the queue in lane order from what is held, refuses whoever cannot be served in time, leases and sets the timer. */
  private pump(now: number): void {
    this.held.expire(now);
    if (this.pausedUntil <= now) {
      for (const queue of this.queues) {
        while (queue.length > 0 && this.held.spend(queue[0].lane, now)) {
          const w = queue.shift() as Waiter;
          this.waiting--;
          this.served(w.lane, now, true);
          w.resolve();
        }
      }
    }
    let wake = Number.POSITIVE_INFINITY;
    const wanted = [0, 0, 0];
    for (const queue of this.queues) {
      for (let i = 0; i < queue.length; i++) {
        const w = queue[i];
        const at = this.earliest(w.lane, now);
        if (now >= w.deadline || at > w.deadline) {
          queue.splice(i--, 1);
          this.waiting--;
          w.reject(this.refuse(w.lane, now, Math.max(at, now + 1000)));
          continue;
        }
        wake = Math.min(wake, w.deadline, at > now ? at : w.deadline);
        if (at <= now) wanted[RANK[w.lane]]++;
      }
    }
    for (const lane of LANES) {
      const r = RANK[lane];
      if (wanted[r] > 0 && !this.leasing[r]) this.lease(now, lane, Math.max(this.sliceSize(lane), wanted[r]));
    }
    this.wakeAt(this.waiting > 0 ? wake : Number.POSITIVE_INFINITY, now);
  }

  private wakeAt(at: number, now: number): void {
    if (at === this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = at;
    if (at === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.pump(this.host.now());
      },
      Math.max(0, at - now),
    );
    this.timer.unref();
  }

  /**
   * Units for about LEASE_AHEAD_MS of this lane's calls here (half a unit's life, when shorter) at the rate they came
   * over the last period measured, at most a twentieth of the budget; none when fewer than one call is expected within a
   * unit's life: a unit leased ahead would go back unspent, and until then the log would count it as spent
   * (people's need, which agents leave them, is read from what people were granted).
   */
  private sliceSize(lane: QuotaLane): number {
    const r = RANK[lane];
    const lifeMs = unitLifeMs(this.budget);
    const aheadMs = Math.min(LEASE_AHEAD_MS, lifeMs / 2);
    this.slice[r] = Math.min(Math.max(1, Math.floor(this.budget.calls / 20)), Math.max(1, Math.ceil(this.rate[r] * aheadMs)));
    return this.rate[r] * lifeMs < 1 ? 0 : this.slice[r];
  }

  private lease(now: number, lane: QuotaLane, want: number): void {
    const budget = this.budget;
    // A unit's life runs from the moment it was asked for: the log filed it no earlier (docs/quotas.md, "The bound").
    const expires = now + unitLifeMs(budget);
    this.leasing[RANK[lane]] = true;
    this.host.lease(this, lane, want).then(
      (answer) => {
        this.leasing[RANK[lane]] = false;
        const at = this.host.now();
        if (answer.units > 0) {
          const lot = { lane, units: answer.units, bucket: answer.bucket, expires, budget };
          if (budget === this.budget && expires > at) this.held.add(lot);
          else this.held.back(lot);
        }
        this.blockedUntil[RANK[lane]] = answer.units < want ? at + answer.waitMs : 0;
        if (answer.pausedUntil !== null && answer.pausedUntil > this.pausedUntil) this.pausedUntil = answer.pausedUntil;
        this.pump(at);
      },
      (e: unknown) => {
        this.leasing[RANK[lane]] = false;
        this.host.leaseFailed(e);
        this.failWaiters(e);
      },
    );
  }

  /** The database did not answer: whoever waits gets that answer (503 with Retry-After), not a guess about the budget. */
  private failWaiters(e: unknown): void {
    for (const queue of this.queues) for (const w of queue.splice(0)) w.reject(e);
    this.waiting = 0;
    this.wakeAt(Number.POSITIVE_INFINITY, 0);
  }

  /** A call in a new clock window: the figures so far go to the window they were counted in. */
  private roll(now: number): void {
    const start = Math.floor(now / this.budget.windowMs) * this.budget.windowMs;
    if (start === this.figuresStart) return;
    this.flush();
    this.figuresStart = start;
  }

  private flush(): void {
    if (!hasCounts(this.counts) || this.figuresStart < 0) return;
    const counts = this.counts;
    this.counts = { spent: 0, waited: 0, refused: 0, upstream429: 0 };
    this.host.report(this, this.figuresStart, counts);
  }
}

function hasCounts(c: WindowCounts): boolean {
  return c.spent + c.waited + c.refused + c.upstream429 > 0;
}
