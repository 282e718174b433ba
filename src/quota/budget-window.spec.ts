import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { AppError } from '../common/app-error.js';
import { parseBudget, type Budget } from '../config/quota-budgets.js';
import { BudgetWindow } from './budget-window.js';
import type { LeaseAnswer, WindowCounts, WindowHost, WindowKey } from './window-host.js';
import type { QuotaLane } from './lane-policy.js';

/** The window rows as PostgreSQL keeps them (QuotaWindowsRepository.lease's arithmetic), shared by every "instance". */
class Rows implements WindowHost {
  readonly maxWaitMs = 250;
  readonly granted = new Map<number, number>();
  readonly counts: WindowCounts = { spent: 0, waited: 0, refused: 0, upstream429: 0 };
  leases = 0;
  pausedUntil: number | null = null;

  now(): number {
    return Date.now();
  }

  async lease(w: WindowKey, start: number, want: number, ceiling: number, counts: WindowCounts): Promise<LeaseAnswer> {
    this.leases++;
    for (const k of ['spent', 'waited', 'refused', 'upstream429'] as const) this.counts[k] += counts[k];
    const granted = this.granted.get(start) ?? 0;
    const units = Math.max(0, Math.min(want, Math.min(ceiling, w.current.calls) - granted));
    this.granted.set(start, granted + units);
    return { units, granted: granted + units, pausedUntil: this.pausedUntil };
  }

  giveBack(_w: WindowKey, start: number, units: number): void {
    const granted = this.granted.get(start) ?? 0;
    this.granted.set(start, granted - Math.min(units, granted));
  }

  observe(): void {}

  leaseFailed(): void {}
}

function budget(text: string): Budget {
  return parseBudget(text) as Budget;
}

type Outcome = 'sent' | 'refused';

/** One call: its outcome, the Retry-After of a refusal, and whether it waited. */
async function attempt(w: BudgetWindow, lane: QuotaLane): Promise<{ outcome: Outcome; retryAfter?: number; waited: boolean }> {
  try {
    const wait = w.take(lane, Date.now());
    if (wait === null) return { outcome: 'sent', waited: false };
    await wait;
    return { outcome: 'sent', waited: true };
  } catch (e) {
    if (!(e instanceof AppError) || e.code !== 'quota_exhausted') throw e;
    return { outcome: 'refused', retryAfter: e.retryAfterSeconds, waited: false };
  }
}

/** Lets promise callbacks run under fake timers. */
async function settle(ms = 0): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
}

describe('BudgetWindow: one company class, as an instance sees it', () => {
  // 10 s into a minute window.
  const T0 = Date.UTC(2027, 0, 1, 12, 0, 10);
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('waits for the first lease, then serves from memory with the next lease taken ahead of need', async () => {
    const rows = new Rows();
    const w = new BudgetWindow('t', 'read', budget('400/60s'), rows);
    const first = attempt(w, 'interactive');
    await settle();
    expect(await first).toEqual({ outcome: 'sent', waited: true });
    let fromMemory = 0;
    for (let i = 0; i < 50; i++) {
      const r = await attempt(w, 'interactive');
      if (!r.waited) fromMemory++;
      await settle(20);
    }
    expect(fromMemory).toBeGreaterThanOrEqual(45);
    expect(rows.leases).toBeLessThan(51);
  });

  it('three instances on one window never send more than the budget, and a spent window says when it ends', async () => {
    const rows = new Rows();
    const instances = [0, 1, 2].map(() => new BudgetWindow('t', 'read', budget('30/60s'), rows));
    const outcomes = await Promise.all(Array.from({ length: 90 }, (_, i) => attempt(instances[i % 3], 'interactive')).map(async (p) => p));
    await settle();
    const sent = outcomes.filter((o) => o.outcome === 'sent').length;
    expect(sent).toBeLessThanOrEqual(30);
    const later = await Promise.all([0, 1, 2].map((i) => attempt(instances[i], 'interactive').then(async (r) => (await settle(300), r))));
    for (const r of later) expect(r).toMatchObject({ outcome: 'refused', retryAfter: 50 });
    await settle(250);
    expect([...rows.granted.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(30);
  });

  it('at three times the budget for a whole window: people are never refused, agents before them, background first', async () => {
    const rows = new Rows();
    const instances = [0, 1, 2].map(() => new BudgetWindow('t', 'read', budget('400/60s'), rows));
    const demand: Array<[QuotaLane, number]> = [
      ['interactive', 4],
      ['agent', 10],
      ['background', 6],
    ];
    const results: Record<QuotaLane, Outcome[]> = { interactive: [], agent: [], background: [] };
    const start = Math.ceil(Date.now() / 60_000) * 60_000;
    await settle(start - Date.now());
    const pending: Array<Promise<void>> = [];
    let n = 0;
    for (let ms = 0; ms < 60_000; ms += 50) {
      for (const [lane, perSecond] of demand) {
        // perSecond calls a second, spread evenly; each on the next instance in turn.
        if (Math.floor(((ms + 50) * perSecond) / 1000) > Math.floor((ms * perSecond) / 1000)) {
          const w = instances[n++ % 3];
          pending.push(attempt(w, lane).then((r) => void results[lane].push(r.outcome)));
        }
      }
      await settle(50);
    }
    await Promise.all(pending);
    const refused = (lane: QuotaLane) => results[lane].filter((o) => o === 'refused').length / results[lane].length;
    const sent = Object.values(results)
      .flat()
      .filter((o) => o === 'sent').length;
    console.log(
      `simulated 3 instances at 3x: sent ${sent}; refused interactive ${refused('interactive')}, agent ${refused('agent').toFixed(2)}, background ${refused('background').toFixed(2)}`,
    );
    expect(sent).toBeLessThanOrEqual(400);
    expect(refused('interactive')).toBe(0);
    expect(refused('agent')).toBeGreaterThan(0);
    expect(refused('background')).toBeGreaterThan(refused('agent'));
    expect(results.interactive).toHaveLength(240);
  });

  it('paused by the upstream: a short pause is waited out, a long one refused with its seconds', async () => {
    const rows = new Rows();
    const w = new BudgetWindow('t', 'write', budget('40/60s'), rows);
    expect((await Promise.all([attempt(w, 'interactive'), settle()]))[0].outcome).toBe('sent');
    w.pause(Date.now() + 200, Date.now());
    const short = attempt(w, 'interactive');
    await settle(250);
    expect(await short).toEqual({ outcome: 'sent', waited: true });
    w.pause(Date.now() + 7_500, Date.now());
    expect(await attempt(w, 'agent')).toMatchObject({ outcome: 'refused', retryAfter: 8 });
  });

  it('agents are paced through the window; people may take what agents may not', async () => {
    const rows = new Rows();
    const w = new BudgetWindow('t', 'read', budget('100/60s'), rows);
    // At 1/6 of the window agents may have found (1/6 + 0.1) of their 90 spent, 24 calls; within the 250 ms a call
    // may wait, one more (ceil(90 x (10.25/60 + 0.1)) = 25); the next one 0.67 s later.
    const agents = Array.from({ length: 40 }, () => attempt(w, 'agent'));
    await settle(300);
    const answered = await Promise.all(agents);
    expect(answered.filter((r) => r.outcome === 'sent')).toHaveLength(25);
    expect(answered.find((r) => r.outcome === 'refused')?.retryAfter).toBe(1);
    const people = Array.from({ length: 10 }, () => attempt(w, 'interactive'));
    await settle(300);
    expect((await Promise.all(people)).every((r) => r.outcome === 'sent')).toBe(true);
  });

  it('calls in the last 100 ms of a window wait for the next one', async () => {
    const rows = new Rows();
    const w = new BudgetWindow('t', 'read', budget('400/60s'), rows);
    await settle(50_000 - 60);
    const late = attempt(w, 'interactive');
    await settle(100);
    expect(await late).toEqual({ outcome: 'sent', waited: true });
    const windowStart = Math.floor(Date.now() / 60_000) * 60_000;
    expect(rows.granted.get(windowStart)).toBeGreaterThan(0);
    expect(rows.granted.get(windowStart - 60_000) ?? 0).toBe(0);
  });
});
