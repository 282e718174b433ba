import { describe, expect, it } from '@jest/globals';
import { PACER_DEFAULTS, PurgePacer } from './purge-pacer.js';

/** A pacer whose probe answers `probes` in turn (then the last one) and whose rests are only counted. */
function pacer(probes: number[], maxRows = 1000) {
  const rests: number[] = [];
  let i = 0;
  const p = new PurgePacer(
    { ...PACER_DEFAULTS, maxRows },
    async () => probes[Math.min(i++, probes.length - 1)],
    async (ms) => rests.push(ms),
  );
  return { p, rests };
}

describe('PurgePacer', () => {
  it('sizes each batch from the last one’s time, within the bounds and at most doubling or halving', async () => {
    const { p } = pacer([1]);
    expect(await p.next()).toBe(250);
    p.done(250, 50); // 4x faster than the target: doubles only
    expect(await p.next()).toBe(500);
    p.done(500, 200); // on target
    expect(await p.next()).toBe(500);
    p.done(500, 2000); // 10x slower: halves only
    expect(await p.next()).toBe(250);
    p.done(250, 20);
    p.done(500, 20);
    expect(await p.next()).toBe(1000); // the largest batch
    for (let k = 0; k < 10; k++) p.done(await p.next(), 10_000);
    expect(await p.next()).toBe(PACER_DEFAULTS.minRows);
  });

  it('rests after a batch as long as the batch took (half of the time busy)', async () => {
    const { p, rests } = pacer([1]);
    await p.next();
    p.done(250, 120);
    await p.next();
    expect(rests).toEqual([120]);
    expect(p.figures.restedMs).toBe(120);
  });

  it('rests while the probe is slow, doubling the rest, at most maxRestMs before one batch', async () => {
    // Usually 2 ms, then slow (10 ms) twice, then usual again.
    const slowTwice = pacer([2, 2, 2, 10, 10, 2]);
    for (let k = 0; k < 4; k++) await slowTwice.p.next();
    expect(slowTwice.rests).toEqual([50, 100]);
    expect(slowTwice.p.figures.slowProbes).toBe(2);

    // Slow for good: the rests stop at maxRestMs and the purge goes on.
    const slowForGood = pacer([...Array<number>(10).fill(2), 50]);
    for (let k = 0; k < 10; k++) await slowForGood.p.next();
    expect(await slowForGood.p.next()).toBe(250);
    expect(slowForGood.rests.reduce((a, b) => a + b, 0)).toBe(PACER_DEFAULTS.maxRestMs);
  });

  it('a small difference is noise, and a lasting load becomes the usual one', async () => {
    const noise = pacer([1, 3.5]);
    await noise.p.next();
    await noise.p.next(); // 3.5 ms against 1: 3.5x but only 2.5 ms more
    expect(noise.rests).toEqual([]);

    const lasting = pacer([...Array<number>(10).fill(1), 10]);
    for (let k = 0; k < 30; k++) await lasting.p.next();
    const rested = lasting.rests.length;
    expect(rested).toBeGreaterThan(0);
    await lasting.p.next(); // mostly probes of 10 ms now: 10 ms is usual
    expect(lasting.rests.length).toBe(rested);
  });
});
