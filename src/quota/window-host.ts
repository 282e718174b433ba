import type { Budget, QuotaClass } from '../config/quota-budgets.js';
import type { QuotaLane } from './lane-policy.js';

/** Which log a lease is for: a tenant's class under its budget. */
export interface WindowKey {
  readonly tenantId: string;
  readonly cls: QuotaClass;
  readonly current: Budget;
}

/** What the log answers a lease: the units given now, the bucket they are filed under, when to ask again, the pause. */
export interface LeaseAnswer {
  units: number;
  bucket: number;
  /** Fewer than asked: the soonest the lane's limit could free a unit, in ms. */
  waitMs: number;
  /** ms since the epoch; null: not paused. */
  pausedUntil: number | null;
}

/** What happened to calls of this class here since the last flush (the figures a tenant shows). */
export interface WindowCounts {
  spent: number;
  waited: number;
  refused: number;
  upstream429: number;
}

export type QuotaOutcome = 'spent' | 'waited' | 'refused';

/** The shared part of every budget: time, PostgreSQL, metrics (QuotaService). */
export interface WindowHost {
  readonly maxWaitMs: number;
  now(): number;
  /** Up to `want` units for `lane`, as the lane rule allows. */
  lease(w: WindowKey, lane: QuotaLane, want: number): Promise<LeaseAnswer>;
  /** Units of a lease (made under `budget`) that no call spent. */
  giveBack(w: WindowKey, budget: Budget, bucket: number, lane: QuotaLane, units: number): void;
  /** Counts to the figures of the clock window that starts at `start`. */
  report(w: WindowKey, start: number, counts: WindowCounts): void;
  observe(cls: QuotaClass, lane: QuotaLane, outcome: QuotaOutcome): void;
  /** A lease failed (the database): logged once by the host. */
  leaseFailed(e: unknown): void;
}
