import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/app-error.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import type { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { LeasedConnection, RenewalLeaseRepository, RenewalRow } from '../connections/store/renewal-lease.repository.js';
import type { CommitLane, RenewalSaveRepository } from '../connections/store/renewal-save.repository.js';
import type { ConnectionTokens } from '../connections/connection-tokens.js';
import type { RenewalAttempt } from './renewal-attempt.js';
import { codeOf, fakeConfig, fakeLane, row, systemClock } from '../../test/support/renewal-fakes.js';
import type { Need } from './renewal-types.js';
import { RenewalService } from './renewal.service.js';

const soon = () => new Date(Date.now() + 10_000);
const later = () => new Date(Date.now() + 3_600_000);

function connection(overrides: Partial<ConnectionEntity> = {}): ConnectionEntity {
  return { ...row(), accessTokenExpiresAt: later(), ...overrides } as ConnectionEntity;
}

/** `attempt` stands for a renewal under the lease; the repository hands out the lease once unless told otherwise. */
function setup(
  attempt: (leased: LeasedConnection, need: Need) => Promise<{ connection: RenewalRow; accessToken: string | null }>,
  current?: ConnectionEntity,
) {
  const leases: string[] = [];
  const lanes: CommitLane[] = [];
  const repo = {
    async reserveCommitLane() {
      const lane = fakeLane();
      lanes.push(lane);
      return lane;
    },
    async tryLease(id: string) {
      leases.push(id);
      return { connection: row({ id }), environment: 'sandbox' };
    },
    findInAnyTenant: async () => current ?? null,
  };
  const tokens = { openAccessToken: (c: { accessTokenEnc: string }) => `opened(${c.accessTokenEnc})` } as unknown as ConnectionTokens;
  let attempts = 0;
  const renewalAttempt = {
    run: (leased: LeasedConnection, need: Need) => {
      attempts++;
      return attempt(leased, need);
    },
  } as unknown as RenewalAttempt;
  const service = new RenewalService(
    fakeConfig,
    repo as unknown as ConnectionsRepository,
    repo as unknown as RenewalLeaseRepository,
    repo as unknown as RenewalSaveRepository,
    tokens,
    renewalAttempt,
    systemClock,
  );
  return { service, leases, lanes, attempts: () => attempts };
}

const renewed = async (leased: LeasedConnection) => {
  await new Promise((r) => setTimeout(r, 5));
  return {
    connection: {
      ...leased.connection,
      version: leased.connection.version + 1,
      accessTokenEnc: 'sealed-new',
      accessTokenExpiresAt: later(),
    },
    accessToken: 'at-new',
  };
};

describe('RenewalService (who renews, and who waits for it)', () => {
  it('serves a token that is not near its expiry as stored, without renewing', async () => {
    const t = setup(renewed);
    await expect(t.service.accessTokenFor(connection())).resolves.toMatchObject({ accessToken: 'opened(sealed-old-at)', version: 3 });
    expect(t.attempts()).toBe(0);
  });

  it('renews a token within the margin of its expiry once for all concurrent callers in this process', async () => {
    const t = setup(renewed);
    const c = connection({ accessTokenExpiresAt: soon() });
    const answers = await Promise.all([t.service.accessTokenFor(c), t.service.accessTokenFor(c), t.service.accessTokenFor(c)]);
    expect(answers.map((a) => a.accessToken)).toEqual(['at-new', 'at-new', 'at-new']);
    expect(t.attempts()).toBe(1);
    expect(t.leases).toEqual(['c-1']);
    expect(t.lanes.every((l) => (l as ReturnType<typeof fakeLane>).released.length === 1)).toBe(true);
  });

  it('refuses a connection that needs its user again', async () => {
    const t = setup(renewed);
    expect(await codeOf(t.service.accessTokenFor(connection({ status: 'reauth_required' })))).toBe('reauth_required');
    expect(t.attempts()).toBe(0);
  });

  it('falls back to a still-valid token when the upstream is in trouble during an early renewal', async () => {
    const stored = connection({ accessTokenExpiresAt: soon() });
    const t = setup(async () => {
      throw new AppError('upstream_unavailable', 'down');
    }, stored);
    await expect(t.service.accessTokenFor(stored)).resolves.toMatchObject({ accessToken: 'opened(sealed-old-at)' });
  });

  it('after a 401 renews only when the row has not moved past the refused version', async () => {
    const t = setup(renewed);
    await expect(t.service.renewAfterRejection(connection({ version: 5 }), 4)).resolves.toMatchObject({
      version: 5,
      accessToken: 'opened(sealed-old-at)',
    });
    expect(t.attempts()).toBe(0);
    await expect(t.service.renewAfterRejection(connection({ version: 3 }), 3)).resolves.toMatchObject({ accessToken: 'at-new' });
    expect(t.attempts()).toBe(1);
  });
});
