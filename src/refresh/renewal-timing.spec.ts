import { describe, expect, it } from '@jest/globals';
import { TokenEndpointError, UpstreamTimeoutError, UpstreamUnavailableError } from '../upstream/upstream.errors.js';
import { backoffDelayMs, classifyFailure, needsRenewal, RETRY_BASE_MS, RETRY_CAP_MS, RETRY_FLOOR_MS, retryAt } from './renewal-timing.js';

const now = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(now.getTime() + ms);

describe('backoffDelayMs', () => {
  it('doubles with each failure, half fixed and half jitter', () => {
    expect(backoffDelayMs(0, () => 0)).toBe(RETRY_BASE_MS / 2);
    expect(backoffDelayMs(0, () => 1)).toBe(RETRY_BASE_MS);
    expect(backoffDelayMs(3, () => 0)).toBe(4 * RETRY_BASE_MS);
    expect(backoffDelayMs(3, () => 1)).toBe(8 * RETRY_BASE_MS);
  });

  it('is capped, floored, and sane for absurd failure counts', () => {
    expect(backoffDelayMs(1000, () => 1)).toBe(RETRY_CAP_MS);
    expect(backoffDelayMs(1000, () => 0)).toBe(RETRY_CAP_MS / 2);
    expect(backoffDelayMs(-5, () => 0, 10)).toBe(RETRY_FLOOR_MS);
  });

  it('spreads a wave of simultaneous failures', () => {
    const delays = new Set(Array.from({ length: 50 }, () => backoffDelayMs(4)));
    expect(delays.size).toBeGreaterThan(40);
    for (const d of delays) expect(d).toBeGreaterThanOrEqual(8 * RETRY_BASE_MS);
  });
});

describe('retryAt', () => {
  it('uses the backoff when the token has time left', () => {
    expect(retryAt(now, 0, at(3_600_000), null, () => 0)).toEqual(at(RETRY_BASE_MS / 2));
  });

  it('pulls the retry in to half the remaining life of a still-working token', () => {
    expect(retryAt(now, 10, at(10_000), null, () => 1)).toEqual(at(5_000));
    expect(retryAt(now, 10, at(100), null, () => 1)).toEqual(at(RETRY_FLOOR_MS));
  });

  it('backs off in full once the token has expired', () => {
    expect(retryAt(now, 10, at(-1000), null, () => 1)).toEqual(at(RETRY_CAP_MS));
    expect(retryAt(now, 2, null, null, () => 1)).toEqual(at(4 * RETRY_BASE_MS));
  });

  it('honours Retry-After as a floor', () => {
    expect(retryAt(now, 0, at(10_000), 30, () => 0)).toEqual(at(30_000));
  });
});

describe('needsRenewal', () => {
  it('is true when expired, unknown or within the margin', () => {
    expect(needsRenewal(null, now, 0)).toBe(true);
    expect(needsRenewal(at(-1), now, 0)).toBe(true);
    expect(needsRenewal(at(60_000), now, 60_000)).toBe(true);
    expect(needsRenewal(at(60_001), now, 60_000)).toBe(false);
  });
});

describe('classifyFailure', () => {
  it('only invalid_grant rejects the grant; outages and throttling are transient', () => {
    expect(classifyFailure(new TokenEndpointError(400, 'invalid_grant', null))).toBe('rejected');
    expect(classifyFailure(new TokenEndpointError(503, null, null))).toBe('transient');
    expect(classifyFailure(new TokenEndpointError(429, 'slow_down', 5))).toBe('transient');
    expect(classifyFailure(new UpstreamUnavailableError('down'))).toBe('transient');
    expect(classifyFailure(new UpstreamTimeoutError('slow'))).toBe('transient');
    expect(classifyFailure(new TokenEndpointError(401, 'invalid_client', null))).toBe('permanent');
    expect(classifyFailure(new Error('boom'))).toBe('permanent');
  });
});
