import { afterEach, describe, expect, it, jest } from '@jest/globals';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config.js';
import type { RefreshMetrics } from './refresh-metrics.service.js';
import { RefreshScheduler, renewalsInFlight } from './refresh-scheduler.service.js';
import type { LeasedConnection, RenewalLeaseRepository } from '../connections/store/renewal-lease.repository.js';
import type { CommitLane, RenewalSaveRepository } from '../connections/store/renewal-save.repository.js';
import type { RenewalService } from './renewal.service.js';

/**
 * The scheduler's pass, with the database and the renewal replaced by fakes: a renewal holds its slot from
 * its lane reservation to its commit, no more are in flight than the cap or the backlog needs, every
 * renewal gets a lane of its own, and a pass ends only once every outcome is stored.
 */
function harness(rows: number, concurrency: number, maxPerSecond = 0) {
  const ids = Array.from({ length: rows }, (_, i) => `c-${i}`);
  let next = 0;
  const state = { inFlight: 0, maxInFlight: 0, committed: 0, lanesOut: 0, maxLanesOut: 0, renewedOnOwnLane: 0 };
  const repo = {
    countDue: async () => rows - next,
    async claimDueForRefresh(_owner: string, _leaseMs: number, limit: number): Promise<LeasedConnection[]> {
      const batch = ids.slice(next, next + limit);
      next += batch.length;
      return batch.map((id) => ({
        connection: {
          id,
          tenantId: 't',
          status: 'active',
          version: 1,
          accessTokenEnc: 'a',
          refreshTokenEnc: 'r',
          accessTokenExpiresAt: null,
          refreshFailures: 0,
        },
        environment: 'sandbox',
      }));
    },
    async reserveCommitLane(): Promise<CommitLane> {
      state.lanesOut++;
      state.maxLanesOut = Math.max(state.maxLanesOut, state.lanesOut);
      let released = false;
      return {
        save: async () => true,
        release: () => {
          if (!released) state.lanesOut--;
          released = true;
        },
      };
    },
    extendLease: async () => true,
    releaseLeases: async () => 0,
  };
  const renewal = {
    async renewClaimed(_leased: LeasedConnection, _takenAt: number, lane: CommitLane): Promise<void> {
      state.inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
      await new Promise((r) => setTimeout(r, 2));
      if (await lane.save('me', {} as never)) state.renewedOnOwnLane++;
      state.committed++;
      state.inFlight--;
    },
  };
  const config = {
    instanceId: 'me',
    refresh: { batchSize: 7, concurrency, maxPerSecond, leaseMs: 60_000 },
    upstream: { tokenTimeoutMs: 15_000, connectTimeoutMs: 5_000 },
  } as unknown as AppConfig;
  const scheduler = new RefreshScheduler(
    config,
    repo as unknown as RenewalLeaseRepository,
    repo as unknown as RenewalSaveRepository,
    renewal as unknown as RenewalService,
    {} as RefreshMetrics,
    {} as SchedulerRegistry,
  );
  return { scheduler, state };
}

describe('renewalsInFlight', () => {
  it('is one per due connection, at least one, at most the cap', () => {
    expect(renewalsInFlight(0, 8)).toBe(0);
    expect(renewalsInFlight(3, 8)).toBe(3);
    expect(renewalsInFlight(10_000, 8)).toBe(8);
  });
});

describe('RefreshScheduler pass', () => {
  it('keeps at most the cap in flight, each renewal on a lane of its own until its commit, and ends after the last commit', async () => {
    const { scheduler, state } = harness(60, 4);
    expect(await scheduler.runOnce()).toBe(60);
    expect(state.committed).toBe(60);
    expect(state.renewedOnOwnLane).toBe(60);
    expect(state.maxInFlight).toBeGreaterThan(1);
    expect(state.maxInFlight).toBeLessThanOrEqual(4);
    expect(state.maxLanesOut).toBeLessThanOrEqual(4);
    expect(state.lanesOut).toBe(0);
  });

  it('keeps no more in flight than there are due connections', async () => {
    const { scheduler, state } = harness(2, 8);
    expect(await scheduler.runOnce()).toBe(2);
    expect(state.maxInFlight).toBeLessThanOrEqual(2);
  });

  it('claims nothing when nothing is due', async () => {
    const { scheduler, state } = harness(0, 8);
    expect(await scheduler.runOnce()).toBe(0);
    expect(state.maxLanesOut).toBe(0);
  });
});

describe('RefreshScheduler pacing (REFRESH_MAX_PER_SECOND)', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('starts no more renewals a second than the limit (and a burst), and still renews the whole backlog', async () => {
    jest.useFakeTimers();
    const { scheduler, state } = harness(60, 4, 20);
    const pass = scheduler.runOnce();
    await jest.advanceTimersByTimeAsync(1000);
    // One second of the clock: about the rate (20), give or take the burst of 4 and one tick's worth (2).
    expect(state.committed).toBeGreaterThanOrEqual(20 - 2);
    expect(state.committed).toBeLessThanOrEqual(20 + 4 + 1);
    await jest.advanceTimersByTimeAsync(3000);
    expect(await pass).toBe(60);
    expect(state.committed).toBe(60);
    expect(state.lanesOut).toBe(0);
  });
});
