import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { AppError } from '../common/app-error.js';
import { parseBudget, type Budget } from '../config/quota-budgets.js';
import { BudgetWindow } from './budget-window.js';
import { unitLifeMs, type QuotaLane } from './lane-policy.js';
import type { LeaseAnswer, WindowCounts, WindowHost, WindowKey } from './window-host.js';

/**
 * A log that grants what a test leaves it per lane (the rule itself is PostgreSQL's, test/quota-log.e2e-spec.ts):
 * what this instance asks, is given back, and reports.
 */
class Log implements WindowHost {
  readonly maxWaitMs = 250;
  readonly room: Record<QuotaLane, number> = { interactive: 1000, agent: 1000, background: 1000 };
  waitMs = 2000;
  pausedUntil: number | null = null;
  readonly leases: Array<{ lane: QuotaLane; want: number; units: number }> = [];
  readonly givenBack: Array<{ bucket: number; lane: QuotaLane; units: number }> = [];
  readonly reports: Array<{ start: number } & WindowCounts> = [];
  /** Answers wait for this long (ms of fake time). */
  delayMs = 0;

  now(): number {
    return Date.now();
  }

  async lease(_w: WindowKey, lane: QuotaLane, want: number): Promise<LeaseAnswer> {
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    const units = Math.max(0, Math.min(want, this.room[lane]));
    this.room[lane] -= units;
    this.leases.push({ lane, want, units });
    return { units, bucket: this.leases.length, waitMs: units < want ? this.waitMs : 0, pausedUntil: this.pausedUntil };
  }

  giveBack(_w: WindowKey, _budget: Budget, bucket: number, lane: QuotaLane, units: number): void {
    this.givenBack.push({ bucket, lane, units });
  }

  report(_w: WindowKey, start: number, counts: WindowCounts): void {
    this.reports.push({ start, ...counts });
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
  const T0 = Date.UTC(2027, 0, 1, 12, 0, 10);
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('waits for the first lease, then serves from memory with the next lease taken ahead of need', async () => {
    const log = new Log();
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    const first = attempt(w, 'interactive');
    await settle();
    expect(await first).toEqual({ outcome: 'sent', waited: true });
    // The first calls measure the rate (each leases its own unit); from then on, units are leased ahead.
    let fromMemory = 0;
    for (let i = 0; i < 100; i++) {
      const r = await attempt(w, 'interactive');
      if (!r.waited && i >= 50) fromMemory++;
      await settle(20);
    }
    expect(fromMemory).toBeGreaterThanOrEqual(45);
    expect(log.leases.length).toBeLessThan(65);
  });

  it('refuses a lane the log refused until the time it named, without asking it again, and then asks', async () => {
    const log = new Log();
    log.room.agent = 0;
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    const first = attempt(w, 'agent');
    await settle();
    expect(await first).toMatchObject({ outcome: 'refused', retryAfter: 2 });
    const asked = log.leases.length;
    for (let i = 0; i < 20; i++) expect(await attempt(w, 'agent')).toMatchObject({ outcome: 'refused' });
    expect(log.leases).toHaveLength(asked);
    // People are not held by the agents' refusal.
    const person = attempt(w, 'interactive');
    await settle();
    expect(await person).toEqual({ outcome: 'sent', waited: true });
    log.room.agent = 5;
    await settle(2000);
    const later = attempt(w, 'agent');
    await settle();
    expect(await later).toMatchObject({ outcome: 'sent' });
  });

  it("each lane spends only its own units: agents never people's, people never agents' (the log reads each lane's need)", async () => {
    const log = new Log();
    log.room.agent = 0;
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    for (let i = 0; i < 60; i++) {
      const person = attempt(w, 'interactive');
      await settle(20);
      expect(await person).toMatchObject({ outcome: 'sent' });
    }
    expect(log.leases.at(-1)?.units).toBeGreaterThan(1);
    const agent = attempt(w, 'agent');
    await settle();
    expect(await agent).toMatchObject({ outcome: 'refused' });

    const log2 = new Log();
    log2.room.interactive = 0;
    const w2 = new BudgetWindow('t', 'read', budget('400/60s'), log2);
    for (let i = 0; i < 60; i++) {
      const agent = attempt(w2, 'agent');
      await settle(20);
      expect(await agent).toMatchObject({ outcome: 'sent' });
    }
    expect(log2.leases.at(-1)?.units).toBeGreaterThan(1);
    const person = attempt(w2, 'interactive');
    await settle();
    expect(await person).toMatchObject({ outcome: 'refused' });
    expect(log2.leases.filter((l) => l.lane === 'interactive')).toHaveLength(1);
  });

  it('gives back the units of a lease no call spent within their life, and a lease that came back too late', async () => {
    const log = new Log();
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    for (let i = 0; i < 10; i++) {
      const r = attempt(w, 'interactive');
      await settle(10);
      await r;
    }
    const leased = log.leases.reduce((n, l) => n + l.units, 0);
    await settle(unitLifeMs(budget('400/60s')) + 1000);
    w.tick(Date.now());
    expect(log.givenBack.reduce((n, g) => n + g.units, 0)).toBe(leased - 10);
    expect(log.givenBack.every((g) => g.lane === 'interactive')).toBe(true);

    log.delayMs = unitLifeMs(budget('400/60s')) + 10;
    const late = attempt(w, 'interactive');
    await settle(log.delayMs + 300);
    expect(await late).toMatchObject({ outcome: 'refused' });
    expect(log.givenBack.at(-1)).toMatchObject({ bucket: log.leases.length, units: log.leases.at(-1)?.units });
  });

  it("leases for people at once, never behind another lane's lease in flight", async () => {
    const log = new Log();
    log.delayMs = 100;
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    const background = attempt(w, 'background'); // its lease goes out first
    await settle(10);
    let personDone = false;
    const person = attempt(w, 'interactive').then((r) => ((personDone = true), r));
    await settle(90);
    expect(personDone).toBe(false);
    // 115 ms: the person's lease, sent 10 ms after the background one, is back; behind it, it would be back at 200 ms.
    await settle(15);
    expect(personDone).toBe(true);
    expect([(await background).outcome, (await person).outcome]).toEqual(['sent', 'sent']);
  });

  it('paused by the upstream: a short pause is waited out, a long one refused with its seconds', async () => {
    const log = new Log();
    const w = new BudgetWindow('t', 'write', budget('40/60s'), log);
    expect((await Promise.all([attempt(w, 'interactive'), settle()]))[0].outcome).toBe('sent');
    w.pause(Date.now() + 200, Date.now());
    const short = attempt(w, 'interactive');
    await settle(250);
    expect(await short).toEqual({ outcome: 'sent', waited: true });
    w.pause(Date.now() + 7_500, Date.now());
    expect(await attempt(w, 'agent')).toMatchObject({ outcome: 'refused', retryAfter: 8 });
  });

  it('reports its figures to the clock window they were counted in', async () => {
    const log = new Log();
    const w = new BudgetWindow('t', 'read', budget('400/60s'), log);
    const minute = Math.floor(T0 / 60_000) * 60_000;
    for (let i = 0; i < 3; i++) await Promise.all([attempt(w, 'interactive'), settle(10)]);
    await settle(minute + 60_000 - Date.now());
    await Promise.all([attempt(w, 'interactive'), settle(10)]);
    w.tick(Date.now());
    expect(log.reports.map((r) => [r.start - minute, r.spent])).toEqual([
      [0, 3],
      [60_000, 1],
    ]);
  });
});
