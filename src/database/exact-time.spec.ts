import { describe, expect, it } from '@jest/globals';
import { exactTime } from './exact-time.js';

describe('exactTime', () => {
  it('reads PostgreSQL’s text of a timestamptz in any time zone as UTC to the microsecond', () => {
    const cases: Array<[string, string]> = [
      ['2026-11-27 18:22:37.107123+00', '2026-11-27T18:22:37.107123Z'],
      ['2026-11-27 23:52:37.107123+05:30', '2026-11-27T18:22:37.107123Z'],
      ['2026-11-27 15:22:37.000001-03', '2026-11-27T18:22:37.000001Z'],
      // PostgreSQL leaves out trailing zeros of the fraction, and the fraction when there is none.
      ['2026-11-27 18:22:37.1071+00', '2026-11-27T18:22:37.107100Z'],
      ['2026-11-27 18:22:37+00', '2026-11-27T18:22:37.000000Z'],
      // Across midnight and a year's end in UTC.
      ['2027-01-01 00:30:00.999999+01', '2026-12-31T23:30:00.999999Z'],
    ];
    for (const [text, exact] of cases) {
      const parsed = exactTime(text);
      expect(parsed.exact).toBe(exact);
      expect(parsed.at.toISOString()).toBe(`${exact.slice(0, 23)}Z`);
    }
  });
});
