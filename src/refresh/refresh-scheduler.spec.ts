import { describe, expect, it } from '@jest/globals';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config.js';
import type { RefreshMetrics } from './refresh-metrics.service.js';
import { RefreshScheduler } from './refresh-scheduler.service.js';
import type { LeasedConnection, RefreshRepository } from './refresh.repository.js';
import type { RenewalService } from './renewal.service.js';

/**
 * The scheduler's pipelining, with the database and the renewal replaced by fakes: token calls are bounded
 * by REFRESH_CONCURRENCY, commits are not waited for by the next call, the commit backlog is bounded, and a
 * pass ends only once every outcome is stored.
 */
function harness(rows: number, concurrency: number) {
  const ids = Array.from({ length: rows }, (_, i) => `c-${i}`);
  let next = 0;
  const repo = {
    async claimDueForRefresh(_owner: string, _leaseMs: number, limit: number): Promise<LeasedConnection[]> {
      const batch = ids.slice(next, next + limit);
      next += batch.length;
      return batch.map((id) => ({
        connection: { id, tenantId: 't', status: 'active', version: 1, accessTokenEnc: 'a', refreshTokenEnc: 'r', accessTokenExpiresAt: null, refreshFailures: 0 },
        environment: 'sandbox',
      }));
    },
    extendLease: async () => true,
    releaseLeases: async () => undefined,
  };
  const state = { calling: 0, maxCalling: 0, called: 0, committed: 0, holdCommits: true };
  const held: Array<() => void> = [];
  const renewal = {
    async renewClaimed(_leased: LeasedConnection, _takenAt: number, callOver: () => void): Promise<void> {
      state.calling++;
      state.maxCalling = Math.max(state.maxCalling, state.calling);
      await new Promise((r) => setImmediate(r));
      state.calling--;
      state.called++;
      callOver();
      if (state.holdCommits) await new Promise<void>((r) => held.push(r));
      state.committed++;
    },
  };
  const config = {
    instanceId: 'me',
    refresh: { batchSize: 7, concurrency, leaseMs: 60_000 },
    upstream: { tokenTimeoutMs: 15_000, connectTimeoutMs: 5_000 },
  } as unknown as AppConfig;
  const scheduler = new RefreshScheduler(config, repo as unknown as RefreshRepository, renewal as unknown as RenewalService, {} as RefreshMetrics, {} as SchedulerRegistry);
  const releaseCommits = () => {
    state.holdCommits = false;
    for (const r of held.splice(0)) r();
  };
  return { scheduler, state, releaseCommits };
}

const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
};

describe('RefreshScheduler pass', () => {
  it('keeps REFRESH_CONCURRENCY token calls in flight while earlier pairs wait for their commit, and ends after the last commit', async () => {
    const { scheduler, state, releaseCommits } = harness(20, 4);
    let done = false;
    const pass = scheduler.runOnce().then((n) => {
      done = true;
      return n;
    });
    await settle();
    // No commit has landed, yet more calls than slots are over: the slots did not wait for the commits.
    expect(state.committed).toBe(0);
    expect(state.called).toBeGreaterThan(4);
    expect(state.maxCalling).toBeLessThanOrEqual(4);
    expect(done).toBe(false);
    releaseCommits();
    expect(await pass).toBe(20);
    expect(state.called).toBe(20);
    expect(state.committed).toBe(20);
    expect(state.maxCalling).toBeLessThanOrEqual(4);
  });

  it('stops calling the upstream once the commit backlog is full', async () => {
    const { scheduler, state, releaseCommits } = harness(50, 2);
    const pass = scheduler.runOnce();
    await settle();
    // 2 slots x (1 + 4 waiting per slot): a stalled database holds back new token calls.
    expect(state.called).toBe(10);
    expect(state.committed).toBe(0);
    releaseCommits();
    expect(await pass).toBe(50);
    expect(state.committed).toBe(50);
  });
});
