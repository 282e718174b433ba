/** Renewals a pacer lets start together: slots are handed out on ticks of this length. */
export const PACER_TICK_MS = 100;

/**
 * Spaces the scheduler's renewals: at most `perSecond` start per second, with a burst of `burst` after a quiet
 * spell (0: no limit). A backlog after an outage is then renewed at a steady rate, in time linear in its size,
 * while the facade, the inbound receiver and on-demand renewals (never paced) keep the CPU they need, and the
 * upstream's token endpoint sees no thundering herd. Slots start on ticks of PACER_TICK_MS: the renewals of one
 * tick make their token calls together, so their saves share the commit lane's group commits, as an unpaced
 * backlog's do (one renewal at a time, each committing alone, cost twice the CPU). One pacer per instance.
 */
export class RenewalPacer {
  /** When (performance.now(), ms) the next renewal may start, before rounding up to its tick. */
  private next = 0;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes the next slot: answers how many ms to wait before starting the renewal (0: start now). */
  reserve(): number {
    if (!(this.perSecond > 0)) return 0;
    const interval = 1000 / this.perSecond;
    const now = this.now();
    // A pacer left idle banks at most `burst` slots.
    const start = Math.max(this.next, now - this.burst * interval);
    this.next = start + interval;
    if (start <= now) return 0;
    return Math.ceil(start / PACER_TICK_MS) * PACER_TICK_MS - now;
  }
}
