/** Who a call is for, in the order served when a company's budget is short (routing's `Lane`; docs/quotas.md). */
export const LANES = ['interactive', 'agent', 'background'] as const;
export type QuotaLane = (typeof LANES)[number];

/** A lane's place in LANES: 0 is served first. */
export const RANK: Readonly<Record<QuotaLane, number>> = { interactive: 0, agent: 1, background: 2 };

/**
 * The share of every window that a lane may never take: agents leave the last 10 % to people, background work the
 * last 20 % to people and agents. People (interactive) may take the whole window.
 */
export const RESERVE: Readonly<Record<QuotaLane, number>> = { interactive: 0, agent: 0.1, background: 0.2 };

/**
 * Agents and background work are paced: at a fraction f of the window, they may have found at most (f + BURST) of
 * their share spent. So a burst of theirs cannot spend the window in its first seconds and leave the people who
 * come later with nothing; what they leave unspent early stays theirs later in the window.
 */
export const BURST = 0.1;

/** The calls of a `calls` window a lane may find spent, all lanes together, and still be served: its whole share. */
export function shareOf(lane: QuotaLane, calls: number): number {
  return calls - Math.round(calls * RESERVE[lane]);
}

/** The most of the window, all lanes together, that may be spent for a call of `lane` to be served at `fraction` (0–1) of it. */
export function ceilingOf(lane: QuotaLane, calls: number, fraction: number): number {
  if (lane === 'interactive') return calls;
  return Math.ceil(shareOf(lane, calls) * Math.min(1, Math.max(0, fraction) + BURST));
}

/**
 * When, in ms from the window's start, a call of `lane` can be served with `spent` calls of the window gone (the
 * first moment its ceiling passes `spent`); null when not in this window.
 */
export function servedFrom(lane: QuotaLane, calls: number, windowMs: number, spent: number): number | null {
  const share = shareOf(lane, calls);
  if (spent >= share) return null;
  if (lane === 'interactive') return 0;
  return Math.max(0, Math.floor((spent / share - BURST) * windowMs) + 1);
}
