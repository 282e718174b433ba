import { describe, expect, it } from '@jest/globals';
import { Environments } from '../config/environments.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import type { ConnectionHealthRepository, RenewalRecord } from '../connections/store/connection-health.repository.js';
import type { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { LeasedConnection, RenewalLeaseRepository, RenewalRow } from '../connections/store/renewal-lease.repository.js';
import type { ConnectionsService } from '../connections/connections.service.js';
import type { ConnectionTokens } from '../connections/connection-tokens.js';
import type { PairCommit } from './pair-commit.js';
import { RenewalAttempt } from './renewal-attempt.js';
import { codeOf, fakeConfig, fakeLane, fakeMetrics, row, systemClock } from '../../test/support/renewal-fakes.js';
import { GrantRejected, type Need } from './renewal-types.js';
import type { TokenCall } from './token-call.js';
import { VaultError } from '../vault/token-vault.service.js';

const sandbox = { name: 'sandbox' } as CwsEnvironment;

/** `answer` is what the token call does: a pair (committed by the fake commit), or an error it throws. */
function setup(answer: 'pair' | Error, opts: { marked?: boolean; current?: Partial<ConnectionEntity>; unreadable?: VaultError } = {}) {
  const history: RenewalRecord[] = [];
  const released: string[] = [];
  const failures: string[] = [];
  const marked: Array<{ id: string; version: number; reason: string }> = [];
  const repo = {
    async releaseLease(id: string) {
      released.push(id);
    },
    async recordFailure(id: string) {
      failures.push(id);
      return true;
    },
    findInAnyTenant: async () => ({ ...row(), version: 7, ...opts.current }) as ConnectionEntity,
    async recordRenewal(_id: string, r: RenewalRecord) {
      history.push(r);
    },
  };
  const connections = {
    async markReauthRequired(id: string, _owner: string, version: number, reason: string) {
      marked.push({ id, version, reason });
      return opts.marked === false ? null : ({ id, tenantId: 't' } as ConnectionEntity);
    },
    async markTokensUnreadable(id: string, version: number, reason: string) {
      marked.push({ id, version, reason });
      return opts.marked === false ? null : ({ id, tenantId: 't' } as ConnectionEntity);
    },
  } as unknown as ConnectionsService;
  const tokens = {
    openRefreshToken: (c: { refreshTokenEnc: string }) => {
      if (opts.unreadable) throw opts.unreadable;
      return `opened(${c.refreshTokenEnc})`;
    },
    prepareSeal: () => Promise.resolve(),
  } as unknown as ConnectionTokens;
  const sent: string[] = [];
  const tokenCall = {
    async call(_row: RenewalRow, _env: CwsEnvironment, refreshToken: string) {
      sent.push(refreshToken);
      if (answer instanceof Error) throw answer;
      return { accessToken: 'at-new' };
    },
  } as unknown as TokenCall;
  const pairCommit = {
    commit: async (r: RenewalRow) => ({ connection: { ...r, version: r.version + 1 }, accessToken: 'at-new' }),
  } as unknown as PairCommit;
  const metrics = fakeMetrics();
  const attempt = new RenewalAttempt(
    fakeConfig,
    repo as unknown as ConnectionsRepository,
    repo as unknown as RenewalLeaseRepository,
    repo as unknown as ConnectionHealthRepository,
    connections,
    tokens,
    new Environments({ sandbox }),
    tokenCall,
    pairCommit,
    metrics,
    systemClock,
  );
  const run = (leased: LeasedConnection = { connection: row(), environment: 'sandbox' }, need: Need = () => true) =>
    attempt.run(leased, need, 'scheduled', performance.now(), fakeLane());
  // History is written after the fact; let it land.
  const settled = () => new Promise((r) => setImmediate(r));
  return { run, history, released, failures, marked, sent, metrics, settled };
}

describe('RenewalAttempt (one renewal under the lease)', () => {
  it('renews with the opened refresh token and commits; the "renewed" line is the save\'s, not written after the fact', async () => {
    const t = setup('pair');
    const outcome = await t.run();
    await t.settled();
    expect(t.sent).toEqual(['opened(sealed-old-rt)']);
    expect(outcome).toMatchObject({ accessToken: 'at-new', connection: { version: 4 } });
    expect(t.history).toEqual([]);
  });

  it('gives the lease back without a token call when the row no longer needs the renewal (someone else renewed it)', async () => {
    const t = setup('pair');
    const outcome = await t.run(undefined, () => false);
    await t.settled();
    expect(t.sent).toEqual([]);
    expect(t.released).toEqual(['c-1']);
    expect(outcome.accessToken).toBeNull();
    expect(t.metrics.outcomes).toEqual(['lost_race']);
    expect(t.history).toEqual([]);
  });

  it('stores a failure and answers environment_not_configured for a tenant whose environment is not configured', async () => {
    const t = setup('pair');
    expect(await codeOf(t.run({ connection: row(), environment: 'eu' }))).toBe('environment_not_configured');
    await t.settled();
    expect(t.sent).toEqual([]);
    expect(t.failures).toEqual(['c-1']);
    expect(t.history).toEqual([expect.objectContaining({ outcome: 'failed', error: 'environment_not_configured' })]);
  });

  it('marks the connection reauth_required on a rejected grant, on the version it renewed', async () => {
    const t = setup(new GrantRejected());
    expect(await codeOf(t.run())).toBe('reauth_required');
    await t.settled();
    expect(t.marked).toEqual([{ id: 'c-1', version: 3, reason: 'refresh_token_rejected' }]);
    expect(t.history).toEqual([expect.objectContaining({ outcome: 'reauth_required', error: 'refresh_token_rejected' })]);
  });

  it('marks the connection reauth_required (token_unreadable) when its refresh token does not open; nothing is sent', async () => {
    const unreadable = new VaultError('does not open', 'connections', 'refresh_token_enc', 'k1');
    const t = setup('pair', { unreadable });
    const e = await t.run().catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'reauth_required', details: { reason: 'token_unreadable' } });
    await t.settled();
    expect(t.sent).toEqual([]);
    expect(t.marked).toEqual([{ id: 'c-1', version: 3, reason: 'token_unreadable' }]);
    expect(t.history).toEqual([expect.objectContaining({ outcome: 'reauth_required', error: 'token_unreadable' })]);
  });

  it('under a key this ring lacks but others hold: 503, a failure with backoff, nothing marked or sent', async () => {
    const unreadable = new VaultError('not in VAULT_KEYS', 'connections', 'refresh_token_enc', 'k2', true);
    const t = setup('pair', { unreadable });
    expect(await codeOf(t.run())).toBe('service_unavailable');
    await t.settled();
    expect(t.sent).toEqual([]);
    expect(t.marked).toEqual([]);
    expect(t.failures).toEqual(['c-1']);
  });

  it('takes a rejected grant on a row that moved meanwhile as a lost race and serves the current row', async () => {
    const t = setup(new GrantRejected(), { marked: false });
    const outcome = await t.run();
    expect(outcome).toMatchObject({ accessToken: null, connection: { version: 7 } });
    expect(t.released).toEqual(['c-1']);
    expect(t.metrics.outcomes).toEqual(['lost_race']);
  });

  it('gives the lease back when the renewal failed before anything was sent', async () => {
    const t = setup(new TypeError('boom'));
    expect(await codeOf(t.run())).toBe('TypeError');
    expect(t.released).toEqual(['c-1']);
  });
});
