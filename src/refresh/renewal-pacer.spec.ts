import { describe, expect, it } from '@jest/globals';
import { RenewalPacer } from './renewal-pacer.js';

describe('RenewalPacer', () => {
  it('spaces renewals at the rate once the burst is spent', () => {
    let now = 10_000;
    const pacer = new RenewalPacer(100, 4, () => now);
    const waits = Array.from({ length: 10 }, () => pacer.reserve());
    // The slot due now and four banked ones start at once, then one every 10 ms.
    expect(waits).toEqual([0, 0, 0, 0, 0, 10, 20, 30, 40, 50]);
    now += 1000; // a quiet second banks the burst again, no more
    expect(Array.from({ length: 6 }, () => pacer.reserve())).toEqual([0, 0, 0, 0, 0, 10]);
  });

  it('keeps a backlog linear: n renewals take n / rate seconds', () => {
    const now = 0;
    const pacer = new RenewalPacer(250, 8, () => now);
    let last = 0;
    for (let i = 0; i < 50_000; i++) last = pacer.reserve();
    expect(last).toBeCloseTo(((50_000 - 1) * 1000) / 250, 6);
  });

  it('0 means no limit', () => {
    const pacer = new RenewalPacer(0, 8, () => 0);
    expect(Array.from({ length: 1000 }, () => pacer.reserve()).every((w) => w === 0)).toBe(true);
  });
});
