import type { Budget, QuotaClass } from '../config/quota-budgets.js';

/** Who a call is for, in the order served when a company's budget is short (routing's `Lane`; docs/quotas.md). */
export const LANES = ['interactive', 'agent', 'background'] as const;
export type QuotaLane = (typeof LANES)[number];

/**
 * A part of a class's budget kept apart, with its own log beside the class's (`quota_logs.class` = `<class>:<part>`):
 * `sync`, the share of the read budget the sync engine may spend (SYNC_BUDGET_SHARE, docs/records.md).
 */
export type BudgetPart = 'sync';
/** Which log of a tenant: a class's, or a part's. */
export type LogKey = QuotaClass | `${QuotaClass}:${BudgetPart}`;

/** A budget's log in PostgreSQL (`logOf`): the span every grant counts in, its buckets, the budget. */
export interface LogGeometry {
  spanMs: number;
  bucketMs: number;
  calls: number;
}

/** The constants of the lane rule (`leaseRuleOf`), applied by the lease in PostgreSQL. */
export interface LeaseRule {
  /** Units of every span people are assumed to need, however few they used. */
  peopleFloor: number;
  /** People's (and agents') pace is counted at this many times what they took. */
  headroom: number;
  /** A lane's pace is counted over the last 1/parts of the span... */
  parts: number;
  /** ...where it may take up to burst/parts of its share. */
  burst: number;
}

/** A lane's place in LANES: 0 is served first. */
export const RANK: Readonly<Record<QuotaLane, number>> = { interactive: 0, agent: 1, background: 2 };

/**
 * People strictly first (docs/quotas.md, "Lanes"), applied by the lease in PostgreSQL (cws_quota_lease_v1):
 * - people may take the whole budget of any window;
 * - agents take what people leave: a unit only while, at every moment of the coming span, what will still be
 *   counted then plus people at their pace × headroom (until a tenth of the span past that moment) fits the
 *   budget; people's pace is the most of their last span and of their last tenth, at least `peopleFloor` a span;
 * - background work takes what both leave, agents' pace counted the same way;
 * - agents and background work are paced: over any tenth of the span, at most `burst` tenths of their share (the
 *   budget less the pace of the lanes before them), so that before people's pace is known they cannot spend a
 *   window in its first seconds.
 */
export function leaseRuleOf(calls: number): LeaseRule {
  return {
    peopleFloor: Math.ceil(calls * 0.1),
    headroom: 1.2,
    parts: 10,
    burst: 1.5,
  };
}

/** The longest a leased unit may wait for its call, from the moment its lease was asked for: 1 s, 5 % of a shorter window. */
export function unitLifeMs(budget: Budget): number {
  return Math.min(1000, Math.floor(budget.windowMs / 20));
}

/** The delay allowed between a call's admission and its arrival upstream: 250 ms, 1 % of a shorter window. */
export function jitterMs(budget: Budget): number {
  return Math.min(250, Math.floor(budget.windowMs / 100));
}

/**
 * The log of a budget: every grant counts for a window plus a unit's life plus the jitter, so that the calls any
 * interval of the window's length sees upstream were all granted within one span (docs/quotas.md, "The bound").
 * A hundred buckets per span: the log rounds a grant's age down by at most one.
 */
export function logOf(budget: Budget): LogGeometry {
  const spanMs = budget.windowMs + unitLifeMs(budget) + jitterMs(budget);
  return { spanMs, bucketMs: Math.ceil(spanMs / 100), calls: budget.calls };
}
