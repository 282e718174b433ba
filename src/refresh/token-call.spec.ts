import { describe, expect, it } from '@jest/globals';
import type { CwsEnvironment } from '../config/environment-config.js';
import type { RenewalLeaseRepository } from '../connections/store/renewal-lease.repository.js';
import type { UpstreamClient } from '../upstream/upstream-client.service.js';
import { TokenEndpointError, UpstreamTimeoutError } from '../upstream/upstream.errors.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { codeOf, fakeConfig, fakeMetrics, row, systemClock } from '../../test/support/renewal-fakes.js';
import type { Mode } from './renewal-types.js';
import { TokenCall } from './token-call.js';

const env = { name: 'sandbox' } as CwsEnvironment;
const pair: TokenSet = { accessToken: 'at-new', refreshToken: 'rt-new', expiresIn: 3600, scope: null, tokenType: 'Bearer' };

/** A token endpoint that answers with `answers` in turn (an Error is thrown), and a repository that keeps stored failures. */
function setup(...answers: Array<TokenSet | Error>) {
  const calls: string[] = [];
  const failures: Array<{ id: string; version: number; next: Date }> = [];
  const upstream = {
    async refresh(_env: CwsEnvironment, refreshToken: string) {
      calls.push(refreshToken);
      const a = answers.shift();
      if (!a || a instanceof Error) throw a ?? new Error('no more answers');
      return a;
    },
  } as unknown as UpstreamClient;
  const repo = {
    async recordFailure(id: string, _owner: string, version: number, next: Date) {
      failures.push({ id, version, next });
      return true;
    },
  } as unknown as RenewalLeaseRepository;
  const metrics = fakeMetrics();
  const tokenCall = new TokenCall(fakeConfig, repo, upstream, metrics, systemClock);
  const call = (mode: Mode) => tokenCall.call(row(), env, 'rt-old', mode, performance.now(), performance.now());
  return { call, calls, failures, metrics };
}

describe('TokenCall (one token call of a renewal holding the lease)', () => {
  it('retries a transient failure while the caller waits on a token the upstream already refused', async () => {
    const t = setup(new TokenEndpointError(503, null, null), pair);
    await expect(t.call('rejected')).resolves.toEqual(pair);
    expect(t.calls).toEqual(['rt-old', 'rt-old']);
    expect(t.failures).toEqual([]);
  });

  it('does not retry inline for the scheduler: the failure is stored with a later due time and answered as upstream_unavailable', async () => {
    const t = setup(new TokenEndpointError(503, null, null), pair);
    expect(await codeOf(t.call('scheduled'))).toBe('upstream_unavailable');
    expect(t.calls).toHaveLength(1);
    expect(t.failures).toEqual([{ id: 'c-1', version: 3, next: expect.any(Date) }]);
    expect(t.failures[0].next.getTime()).toBeGreaterThan(Date.now());
    expect(t.metrics.outcomes).toEqual(['failure']);
  });

  it('honours Retry-After as the floor of the next attempt', async () => {
    const t = setup(new TokenEndpointError(429, null, 120));
    expect(await codeOf(t.call('scheduled'))).toBe('upstream_unavailable');
    expect(t.failures[0].next.getTime() - Date.now()).toBeGreaterThanOrEqual(119_000);
  });

  it('reports invalid_grant as a rejected grant and stores nothing (the caller marks the connection)', async () => {
    const t = setup(new TokenEndpointError(400, 'invalid_grant', null));
    expect(await codeOf(t.call('on_demand'))).toBe('GrantRejected');
    expect(t.failures).toEqual([]);
    expect(t.metrics.outcomes).toEqual([]);
  });

  it('answers a timeout as upstream_timeout and a refused client as upstream_error', async () => {
    expect(await codeOf(setup(new UpstreamTimeoutError('slow')).call('forced'))).toBe('upstream_timeout');
    expect(await codeOf(setup(new TokenEndpointError(401, 'invalid_client', null)).call('forced'))).toBe('upstream_error');
  });
});
