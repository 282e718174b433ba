import { describe, expect, it } from '@jest/globals';
import { refreshDueAt } from './connection-tokens.js';

const now = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(now.getTime() + ms);

describe('refreshDueAt (the scheduler due time)', () => {
  it('falls between REFRESH_AT minus 5% and REFRESH_AT of the lifetime from expiresIn', () => {
    expect(refreshDueAt(now, 21600, 0.8, () => 0)).toEqual(at(21600_000 * 0.8));
    expect(refreshDueAt(now, 21600, 0.8, () => 1)).toEqual(at(21600_000 * 0.75));
    expect(refreshDueAt(now, 20, 0.8, () => 0.5).getTime() - now.getTime()).toBe(15_500);
  });
});
