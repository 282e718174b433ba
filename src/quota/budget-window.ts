import type { Budget, QuotaClass } from '../config/quota-budgets.js';
import { ceilingOf, RANK, servedFrom, type QuotaLane } from './lane-policy.js';
import { quotaRefusal } from './quota-refusal.js';
import type { WindowCounts, WindowHost } from './window-host.js';

/** Calls are not sent in a window's last 100 ms (1 % of a shorter one): one sent then could reach the upstream in the next. */
const GUARD_MS = 100;
/** A lease asks for what this instance spends in this long, so the next one is rarely awaited. */
const LEASE_AHEAD_MS = 500;
/** An instance whose people called this recently leases for them (the whole window), not only for agents or background. */
const PEOPLE_RECENT_MS = 2000;

interface Waiter {
  lane: QuotaLane;
  deadline: number;
  resolve(): void;
  reject(e: unknown): void;
}

/**
 * One company's budget for one class of calls, as this instance sees it: windows of `budget.windowMs` aligned to
 * the epoch; units of the current window leased from its PostgreSQL row ahead of need (never past the budget in
 * all instances together); a call takes a unit in memory, or waits up to QUOTA_MAX_WAIT_MS in a queue served by
 * lane, or is refused with the time to wait. docs/quotas.md has the rules and the bound.
 */
export class BudgetWindow {
  private start = Number.NEGATIVE_INFINITY;
  private held = 0;
  /** The window's granted units, all instances, as last heard: what may be spent already (ours held excepted). */
  private granted = 0;
  /** Calls served here (all windows), and where the last lease was asked for: the rate since is the next slice's measure. */
  private taken = 0;
  private lastAsk = { at: Number.NEGATIVE_INFINITY, taken: 0 };
  private slice = 1;
  private leasing = false;
  private readonly queues: Waiter[][] = [[], [], []];
  private waiting = 0;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Number.POSITIVE_INFINITY;
  private peopleAt = Number.NEGATIVE_INFINITY;
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
    if (lane === 'interactive') this.peopleAt = now;
    if (now >= this.start + this.budget.windowMs) this.roll(now);
    if (this.held > 0 && !this.queuedAtOrAbove(lane) && this.open(now) && this.allows(lane, now)) {
      this.serve(lane, now, false);
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

  /** A budget read again (a tenant's own changed): a new window length starts afresh, a lower budget gives back what is held. */
  setBudget(budget: Budget, now: number): void {
    if (budget.calls === this.budget.calls && budget.windowMs === this.budget.windowMs) return;
    const lower = budget.calls < this.budget.calls || budget.windowMs !== this.budget.windowMs;
    if (lower) this.release();
    if (budget.windowMs !== this.budget.windowMs) this.start = Number.NEGATIVE_INFINITY;
    this.budget = budget;
    this.pump(now);
  }

  get current(): Budget {
    return this.budget;
  }

  private get guardMs(): number {
    return Math.min(GUARD_MS, this.budget.windowMs / 100);
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

  /** Every second (QuotaService): figures to PostgreSQL, and units an idle instance holds back to the window. */
  tick(now: number, idleMs: number): void {
    if (now >= this.start + this.budget.windowMs) this.roll(now);
    if (this.held > 0 && this.waiting === 0 && !this.leasing && now - this.lastUse >= idleMs) this.release();
    this.flush();
  }

  /** Nothing held, waiting or unsaved: the window can be forgotten. */
  get idle(): boolean {
    return this.held === 0 && this.waiting === 0 && !this.leasing && !hasCounts(this.counts);
  }

  /** Gives back what is held and stops (shutdown). */
  close(): void {
    this.release();
    this.flush();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private serve(lane: QuotaLane, now: number, waited: boolean): void {
    this.held--;
    this.taken++;
    this.counts.spent++;
    this.host.observe(this.cls, lane, 'spent');
    if (waited) {
      this.counts.waited++;
      this.host.observe(this.cls, lane, 'waited');
    }
    const ahead = (this.slice >> 1) + (now - this.peopleAt < PEOPLE_RECENT_MS ? 1 : 0);
    if (!this.leasing && this.held <= ahead) this.lease(now, lane, this.sliceSize(now));
  }

  private refuse(lane: QuotaLane, now: number, at: number): Error {
    this.counts.refused++;
    this.host.observe(this.cls, lane, 'refused');
    return quotaRefusal(this.cls, lane, this.pausedUntil > now ? null : this.budget, at - now);
  }

  private roll(now: number): void {
    const windowMs = this.budget.windowMs;
    const start = Math.floor(now / windowMs) * windowMs;
    this.flush();
    this.start = start;
    this.held = 0;
    this.granted = 0;
  }

  private open(now: number): boolean {
    return this.pausedUntil <= now && now < this.start + this.budget.windowMs - this.guardMs;
  }

  /** Whether a held unit may serve `lane`: people always; the others while what is spent is below their ceiling now. */
  private allows(lane: QuotaLane, now: number): boolean {
    if (lane === 'interactive') return true;
    // While people call here, the last unit held is theirs: they wait for a lease less often.
    if (this.held <= 1 && now - this.peopleAt < PEOPLE_RECENT_MS) return false;
    return ceilingOf(lane, this.budget.calls, (now - this.start) / this.budget.windowMs) > this.granted - this.held;
  }

  private queuedAtOrAbove(lane: QuotaLane): boolean {
    if (this.waiting === 0) return false;
    for (let r = 0; r <= RANK[lane]; r++) if (this.queues[r].length > 0) return true;
    return false;
  }

  /** The earliest time a call of `lane` could be served, from what is known here. */
  private earliest(lane: QuotaLane, now: number): number {
    const { calls, windowMs } = this.budget;
    const t = Math.max(now, this.pausedUntil);
    const end = this.start + windowMs;
    if (t >= end - this.guardMs) return Math.max(t, end);
    if (this.held > 0 && this.allows(lane, t)) return t;
    if (this.granted < ceilingOf(lane, calls, (t - this.start) / windowMs)) return t; // a lease may bring it
    const from = servedFrom(lane, calls, windowMs, this.granted);
    return from === null || this.start + from >= end - this.guardMs ? end : Math.max(t, this.start + from);
  }

  /** Serves the queue in lane order from what is held, refuses whoever cannot be served in time, leases and sets the timer. */
  private pump(now: number): void {
    if (now >= this.start + this.budget.windowMs) this.roll(now);
    if (this.open(now)) {
      serving: for (const queue of this.queues) {
        while (queue.length > 0) {
          if (this.held === 0 || !this.allows(queue[0].lane, now)) break serving;
          const w = queue.shift() as Waiter;
          this.waiting--;
          this.serve(w.lane, now, true);
          w.resolve();
        }
      }
    }
    let wake = Number.POSITIVE_INFINITY;
    let lease: QuotaLane | null = null;
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
        if (at <= now && lease === null) lease = w.lane;
      }
    }
    if (lease !== null && !this.leasing && this.open(now)) this.lease(now, lease, Math.max(this.sliceSize(now), this.waiting));
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
   * Units for about LEASE_AHEAD_MS of this instance's calls at the rate they came since the last lease was asked
   * for (so a burst is measured within one lease), at most a twentieth of the window (docs/quotas.md).
   */
  private sliceSize(now: number): number {
    const { calls } = this.budget;
    const perMs = (this.taken - this.lastAsk.taken) / Math.max(1, now - this.lastAsk.at);
    this.lastAsk = { at: now, taken: this.taken };
    this.slice = Math.min(Math.max(1, Math.floor(calls / 20)), Math.max(1, Math.ceil(perMs * LEASE_AHEAD_MS)));
    return this.slice;
  }

  /** The figures so far, to the current window's row (apart from any lease: it asks for no units). */
  private flush(): void {
    if (!hasCounts(this.counts) || this.start < 0) return;
    const counts = this.counts;
    this.counts = { spent: 0, waited: 0, refused: 0, upstream429: 0 };
    this.host.lease(this, this.start, 0, 0, counts).catch((e: unknown) => this.host.leaseFailed(e));
  }

  private lease(now: number, lane: QuotaLane, want: number): void {
    const start = this.start;
    // Leased for people when people call here: agents and background still take a unit only below their ceiling.
    const forLane = now - this.peopleAt < PEOPLE_RECENT_MS ? 'interactive' : lane;
    const ceiling = ceilingOf(forLane, this.budget.calls, (now - start) / this.budget.windowMs);
    const counts = this.counts;
    this.counts = { spent: 0, waited: 0, refused: 0, upstream429: 0 };
    this.leasing = true;
    this.host.lease(this, start, want, ceiling, counts).then(
      (answer) => {
        this.leasing = false;
        if (this.start === start) {
          this.held += answer.units;
          this.granted = answer.granted;
        } else if (answer.units > 0) {
          this.host.giveBack(this, start, answer.units);
        }
        if (answer.pausedUntil !== null && answer.pausedUntil > this.pausedUntil) this.pausedUntil = answer.pausedUntil;
        this.pump(this.host.now());
      },
      (e: unknown) => {
        this.leasing = false;
        for (const k of ['spent', 'waited', 'refused', 'upstream429'] as const) this.counts[k] += counts[k];
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

  private release(): void {
    if (this.held === 0) return;
    const units = this.held;
    this.held = 0;
    this.granted -= units;
    if (this.start > 0) this.host.giveBack(this, this.start, units);
  }
}

function hasCounts(c: WindowCounts): boolean {
  return c.spent + c.waited + c.refused + c.upstream429 > 0;
}
