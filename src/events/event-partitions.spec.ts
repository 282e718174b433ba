import { describe, expect, it } from '@jest/globals';
import { startOfDay, upperBoundOf } from './event-partitions.js';
import { timeOfId } from './events.repository.js';

describe('day partitions', () => {
  it('reads the upper bound a partition name states', () => {
    expect(upperBoundOf('events_p20261127')?.toISOString()).toBe('2026-11-28T00:00:00.000Z');
    expect(upperBoundOf('event_attempts_p20261231')?.toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(upperBoundOf('events_pre_20261127')?.toISOString()).toBe('2026-11-27T00:00:00.000Z');
    expect(upperBoundOf('event_attempts_pre_20261127')?.toISOString()).toBe('2026-11-27T00:00:00.000Z');
    expect(upperBoundOf('events')).toBeNull();
    expect(upperBoundOf('events_p2026112')).toBeNull();
  });

  it('puts a time in its UTC day', () => {
    expect(startOfDay(new Date('2026-11-27T23:59:59.999Z')).toISOString()).toBe('2026-11-27T00:00:00.000Z');
    expect(startOfDay(new Date('2026-11-28T00:00:00.000Z')).toISOString()).toBe('2026-11-28T00:00:00.000Z');
  });
});

describe('the time an event id names', () => {
  it('is the first 48 bits of a time-ordered (v7) id, and nothing for any other', () => {
    expect(timeOfId('0190f6c8-1e00-7000-8000-000000000001')?.getTime()).toBe(0x0190f6c81e00);
    expect(timeOfId('0190F6C8-1E00-7ABC-9000-000000000001')?.getTime()).toBe(0x0190f6c81e00);
    expect(timeOfId('0190f6c8-1e00-4000-8000-000000000001')).toBeNull();
    expect(timeOfId('not-an-id')).toBeNull();
  });
});
