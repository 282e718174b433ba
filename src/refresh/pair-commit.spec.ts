import { describe, expect, it } from '@jest/globals';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import type { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { RenewalSaveRepository, RenewedItem } from '../connections/store/renewal-save.repository.js';
import type { ConnectionTokens } from '../connections/connection-tokens.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { PairCommit } from './pair-commit.js';
import { codeOf, fakeConfig, fakeLane, fakeMetrics, row, systemClock } from '../../test/support/renewal-fakes.js';

const pair: TokenSet = { accessToken: 'at-new', refreshToken: 'rt-new', expiresIn: 3600, scope: null, tokenType: 'Bearer' };
const tokens = {
  fields: (_id: string, t: TokenSet, now: Date) => ({
    accessTokenEnc: `sealed-${t.accessToken}`,
    refreshTokenEnc: `sealed-${t.refreshToken}`,
    accessTokenExpiresAt: new Date(now.getTime() + t.expiresIn * 1000),
    refreshDueAt: new Date(now.getTime() + t.expiresIn * 800),
    now,
  }),
} as unknown as ConnectionTokens;

function setup(current: Partial<ConnectionEntity> | null, poolSaves: boolean[] = []) {
  const poolSaved: RenewedItem[] = [];
  const repo = {
    findInAnyTenant: async () => (current ? ({ ...row(), ...current } as ConnectionEntity) : null),
    async saveRenewed(_owner: string, item: RenewedItem) {
      poolSaved.push(item);
      return poolSaves.shift() ?? true;
    },
  };
  const metrics = fakeMetrics();
  const commit = new PairCommit(
    fakeConfig,
    repo as unknown as ConnectionsRepository,
    repo as unknown as RenewalSaveRepository,
    tokens,
    metrics,
    systemClock,
  );
  return { commit, metrics, poolSaved };
}

const now = () => performance.now();

describe('PairCommit (the new pair saved before anyone uses it)', () => {
  it('saves on the reserved lane with a compare-and-swap on the version it renewed, and hands out the new token', async () => {
    const t = setup(null);
    const lane = fakeLane(true);
    const outcome = await t.commit.commit(row(), pair, now(), now(), lane);
    expect(lane.saved).toEqual([
      expect.objectContaining({
        id: 'c-1',
        version: 3,
        accessTokenEnc: 'sealed-at-new',
        refreshTokenEnc: 'sealed-rt-new',
        durationMs: expect.any(Number),
      }),
    ]);
    expect(outcome.accessToken).toBe('at-new');
    expect(outcome.connection).toMatchObject({ version: 4, accessTokenEnc: 'sealed-at-new', refreshFailures: 0 });
    expect(t.poolSaved).toEqual([]);
    expect(t.metrics.outcomes).toEqual(['success']);
  });

  it('drops a lane that failed and retries on the shared pool: a received pair is never given up while the lease holds', async () => {
    const t = setup(null, [true]);
    const lane = fakeLane(Object.assign(new Error('connection terminated'), { code: '57P01' }));
    const outcome = await t.commit.commit(row(), pair, now(), now(), lane);
    expect(lane.released).toEqual([true]);
    expect(t.poolSaved).toHaveLength(1);
    expect(outcome.accessToken).toBe('at-new');
  });

  it('takes a refused CAS whose row holds our pair as an earlier save whose answer was lost', async () => {
    const t = setup({ accessTokenEnc: 'sealed-at-new', version: 4 });
    const outcome = await t.commit.commit(row(), pair, now(), now(), fakeLane(false));
    expect(outcome.accessToken).toBe('at-new');
    expect(t.metrics.outcomes).toEqual(['success']);
  });

  it('discards the pair when a reconnect replaced the row meanwhile, and serves the newer tokens', async () => {
    const t = setup({ accessTokenEnc: 'sealed-reconnected', version: 9 });
    const outcome = await t.commit.commit(row(), pair, now(), now(), fakeLane(false));
    expect(outcome).toMatchObject({ accessToken: null, connection: { version: 9, accessTokenEnc: 'sealed-reconnected' } });
    expect(t.metrics.outcomes).toEqual(['lost_race']);
  });

  it('answers connection_not_found when the row was deleted, reauth_required when it is no longer active', async () => {
    expect(await codeOf(setup(null).commit.commit(row(), pair, now(), now(), fakeLane(false)))).toBe('connection_not_found');
    expect(
      await codeOf(setup({ accessTokenEnc: 'x', status: 'reauth_required' }).commit.commit(row(), pair, now(), now(), fakeLane(false))),
    ).toBe('reauth_required');
  });
});
