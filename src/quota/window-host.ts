import type { Budget, QuotaClass } from '../config/quota-budgets.js';
import type { QuotaLane } from './lane-policy.js';

/** Which window a lease is for: a tenant's class under its budget. */
export interface WindowKey {
  readonly tenantId: string;
  readonly cls: QuotaClass;
  readonly current: Budget;
}

/** What a window's row answers a lease: the units given now, the window's granted total after it, the class's pause. */
export interface LeaseAnswer {
  units: number;
  granted: number;
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

/** The shared part of every window: time, PostgreSQL, metrics (QuotaService). */
export interface WindowHost {
  readonly maxWaitMs: number;
  now(): number;
  /** Up to `want` units of the window that starts at `start`, never past `ceiling` granted in all; adds `counts` to its figures. */
  lease(w: WindowKey, start: number, want: number, ceiling: number, counts: WindowCounts): Promise<LeaseAnswer>;
  /** Units of the window that starts at `start` this instance will not use. */
  giveBack(w: WindowKey, start: number, units: number): void;
  observe(cls: QuotaClass, lane: QuotaLane, outcome: QuotaOutcome): void;
  /** A lease failed (the database): logged once by the host. */
  leaseFailed(e: unknown): void;
}
