import type { Budget } from '../config/quota-budgets.js';
import type { QuotaLane } from './lane-policy.js';

/** Units of one lease: for calls of `lane`, until `expires` (then given back). */
export interface Lot {
  lane: QuotaLane;
  units: number;
  bucket: number;
  expires: number;
  /** The budget it was leased under: a give-back names that budget's log. */
  budget: Budget;
}

/**
 * The units one instance holds of a company's class, lot by lot. A lane spends only its own lots (the log reads each
 * lane's pace from what it was granted: people spending agents' units would hide theirs), the soonest to expire
 * first; what a lot still holds when it expires, or is released, goes to `giveBack`.
 */
export class HeldUnits {
  private lots: Lot[] = [];

  constructor(private readonly giveBack: (lot: Lot) => void) {}

  get empty(): boolean {
    return this.lots.length === 0;
  }

  add(lot: Lot): void {
    this.lots.push(lot);
  }

  spend(lane: QuotaLane, now: number): boolean {
    let best: Lot | null = null;
    for (const lot of this.lots) {
      if (lot.units === 0 || lot.expires <= now || lot.lane !== lane) continue;
      if (best === null || lot.expires < best.expires) best = lot;
    }
    if (best === null) return false;
    best.units--;
    return true;
  }

  /** Units a call of `lane` may spend now. */
  usable(lane: QuotaLane, now: number): number {
    let n = 0;
    for (const lot of this.lots) if (lot.expires > now && lot.lane === lane) n += lot.units;
    return n;
  }

  /** Lots past their life, or spent, are dropped; what they still held goes back (in place: no array per call). */
  expire(now: number): void {
    let kept = 0;
    for (const lot of this.lots) {
      if (lot.units > 0 && lot.expires > now) this.lots[kept++] = lot;
      else if (lot.units > 0) this.back(lot);
    }
    this.lots.length = kept;
  }

  release(): void {
    for (const lot of this.lots) if (lot.units > 0) this.back(lot);
    this.lots = [];
  }

  /** A lot that came back too late, or under a budget no longer in force. */
  back(lot: Lot): void {
    this.giveBack(lot);
    lot.units = 0;
  }
}
