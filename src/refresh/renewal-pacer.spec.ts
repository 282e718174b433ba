import { describe, expect, it } from '@jest/globals';
import { PACER_TICK_MS, RenewalPacer } from './renewal-pacer.js';

describe('RenewalPacer', () => {
  it('spaces renewals at the rate once the burst is spent, a tick at a time', () => {
    let now = 10_000;
    const pacer = new RenewalPacer(100, 4, () => now);
    const waits = Array.from({ length: 25 }, () => pacer.reserve());
    // The slot due now and four banked ones start at once; then the rate's ten a tick start together on each tick.
    expect(waits).toEqual([0, 0, 0, 0, 0, ...Array<number>(10).fill(PACER_TICK_MS), ...Array<number>(10).fill(2 * PACER_TICK_MS)]);
    now += 1000; // a quiet second banks the burst again, no more
    expect(Array.from({ length: 6 }, () => pacer.reserve())).toEqual([0, 0, 0, 0, 0, PACER_TICK_MS]);
  });

  it('keeps a backlog linear: n renewals take n / rate seconds', () => {
    const now = 0;
    const pacer = new RenewalPacer(250, 8, () => now);
    let last = 0;
    for (let i = 0; i < 50_000; i++) last = pacer.reserve();
    // The last slot is due at (n - 1) / rate, rounded up to its tick.
    expect(last).toBe(Math.ceil(((50_000 - 1) * 1000) / 250 / PACER_TICK_MS) * PACER_TICK_MS);
  });

  it('0 means no limit', () => {
    const pacer = new RenewalPacer(0, 8, () => 0);
    expect(Array.from({ length: 1000 }, () => pacer.reserve()).every((w) => w === 0)).toBe(true);
  });
});
