export interface BackoffPolicy {
  /** The delay around attempt 0; each further attempt doubles it. */
  baseMs: number;
  /** Never more than this (before jitter), however many attempts. */
  capMs: number;
  /** Never less than this, after jitter. */
  floorMs?: number;
  /**
   * Jitter: the delay is drawn from [low, high] times the exponential figure. [0.5, 1] ("equal jitter", the
   * default) keeps half fixed and spreads the rest, so retries of many callers that failed together spread out
   * instead of hitting a recovering peer in one wave.
   */
  spread?: readonly [number, number];
  random?: () => number;
}

/** The one exponential backoff: the delay before retry number `attempt` (0 = the first retry). */
export function backoffMs(attempt: number, policy: BackoffPolicy): number {
  const { baseMs, capMs, floorMs = 0, spread = [0.5, 1], random = Math.random } = policy;
  const exp = Math.min(capMs, baseMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  const [low, high] = spread;
  return Math.max(floorMs, Math.round(exp * (low + (high - low) * random())));
}
