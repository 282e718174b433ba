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
    p.done(250, 25); // 4x faster than the target: doubles only
    expect(await p.next()).toBe(500);
    p.done(500, 100); // on target
    expect(await p.next()).toBe(500);
    p.done(500, 1000); // 10x slower: halves only
    expect(await p.next()).toBe(250);
    p.done(250, 10);
    p.done(500, 10);
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

  it('rests while the probe is slow, halving the batch, at most maxRestMs before one batch', async () => {
    // Quiet at 2 ms, then slow (10 ms) twice, then quiet again.
    const slowTwice = pacer([2, 10, 10, 2]);
    await slowTwice.p.next();
    expect(await slowTwice.p.next()).toBe(PACER_DEFAULTS.minRows); // 250 halved twice, not below the smallest batch
    expect(slowTwice.rests).toEqual([50, 100]);
    expect(slowTwice.p.figures.slowProbes).toBe(2);

    // Slow for good: the rests stop at maxRestMs and the purge goes on with the smallest batch.
    const slowForGood = pacer([2, 50]);
    await slowForGood.p.next();
    const rows = await slowForGood.p.next();
    expect(slowForGood.rests.reduce((a, b) => a + b, 0)).toBe(PACER_DEFAULTS.maxRestMs);
    expect(rows).toBe(PACER_DEFAULTS.minRows);
  });

  it('a small difference is noise, and a lasting load becomes the new quiet', async () => {
    const noise = pacer([1, 3.5]);
    await noise.p.next();
    await noise.p.next(); // 3.5 ms against 1: 3.5x but only 2.5 ms more
    expect(noise.rests).toEqual([]);

    const lasting = pacer([1, 10]);
    for (let k = 0; k < 20; k++) await lasting.p.next();
    const rested = lasting.rests.length;
    expect(rested).toBeGreaterThan(0);
    await lasting.p.next(); // 50 probes of 10 ms since the last quiet one: 10 ms is quiet now
    expect(lasting.rests.length).toBe(rested);
  });
});
