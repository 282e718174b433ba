import { describe, expect, it } from '@jest/globals';
import { retryDelayMs } from './event-attempt.js';
import { settleAll } from './event-delivery.service.js';
import { retryAfterMsOf } from './event-target-client.js';

describe('retryAfterMsOf', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  const cap = 86_400_000;

  it('reads delay-seconds and HTTP dates', () => {
    expect(retryAfterMsOf('120', now, cap)).toBe(120_000);
    expect(retryAfterMsOf(' 0 ', now, cap)).toBe(0);
    expect(retryAfterMsOf('Mon, 23 Nov 2026 12:00:30 GMT', now, cap)).toBe(30_000);
    expect(retryAfterMsOf(['5', '9'], now, cap)).toBe(5_000);
  });

  it('a date in the past is no wait; anything beyond the cap waits the cap', () => {
    expect(retryAfterMsOf('Mon, 23 Nov 2026 11:00:00 GMT', now, cap)).toBe(0);
    expect(retryAfterMsOf('9999999', now, cap)).toBe(cap);
  });

  it('absent or unreadable: null (the backoff alone decides)', () => {
    for (const v of [undefined, '', 'soon', '-5', '1.5', '12345678901']) expect(retryAfterMsOf(v, now, cap)).toBeNull();
  });
});

describe('retryDelayMs', () => {
  it('doubles from the base up to the cap, within ±20 %', () => {
    expect(retryDelayMs(1, 100, 1000, () => 0.5)).toBe(100);
    expect(retryDelayMs(3, 100, 1000, () => 0.5)).toBe(400);
    expect(retryDelayMs(10, 100, 1000, () => 0.5)).toBe(1000);
    expect(retryDelayMs(1, 100, 1000, () => 0)).toBe(80);
    expect(retryDelayMs(1, 100, 1000, () => 1)).toBe(120);
  });
});

describe('settleAll (a batch of delivery jobs)', () => {
  it('fails only once every job has finished, with the first failure', async () => {
    const finished: number[] = [];
    const work = async (n: number) => {
      if (n === 1) throw new Error('database trouble');
      await new Promise((r) => setTimeout(r, 20 * n));
      finished.push(n);
    };
    await expect(settleAll([1, 2, 3], work)).rejects.toThrow('database trouble');
    // The jobs still running when the first failed finished before the batch was failed back to the queue.
    expect(finished).toEqual([2, 3]);
  });

  it('answers when every job succeeded', async () => {
    const finished: number[] = [];
    await settleAll([1, 2], async (n) => {
      finished.push(n);
    });
    expect(finished).toEqual([1, 2]);
  });
});
