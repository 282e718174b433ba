// Fakes shared by the renewal unit specs: the database row, the metrics and the configuration a renewal reads.
import type { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { RenewalRow } from '../../src/connections/store/renewal-lease.repository.js';
import type { CommitLane, RenewedItem } from '../../src/connections/store/renewal-save.repository.js';
import type { RefreshMetrics, RenewalOutcome } from '../../src/refresh/refresh-metrics.service.js';

export const fakeConfig = {
  instanceId: 'me',
  refresh: { leaseMs: 60_000, at: 0.8, onDemandMarginMs: 60_000 },
  upstream: { tokenTimeoutMs: 1000, connectTimeoutMs: 1000 },
} as unknown as AppConfig;

export const systemClock = { now: () => new Date() } as Clock;

export function row(overrides: Partial<RenewalRow> = {}): RenewalRow {
  return {
    id: 'c-1',
    tenantId: 't',
    status: 'active',
    version: 3,
    accessTokenEnc: 'sealed-old-at',
    refreshTokenEnc: 'sealed-old-rt',
    accessTokenExpiresAt: new Date(Date.now() - 1000),
    refreshFailures: 0,
    ...overrides,
  };
}

export function fakeMetrics(): RefreshMetrics & { outcomes: RenewalOutcome[] } {
  const outcomes: RenewalOutcome[] = [];
  return { outcomes, record: (o: RenewalOutcome) => outcomes.push(o) } as unknown as RefreshMetrics & { outcomes: RenewalOutcome[] };
}

/** A lane that answers `save` with the given results in turn (an Error is thrown). */
export function fakeLane(...results: Array<boolean | Error>): CommitLane & { saved: RenewedItem[]; released: Array<boolean | undefined> } {
  const saved: RenewedItem[] = [];
  const released: Array<boolean | undefined> = [];
  return {
    saved,
    released,
    async save(_owner: string, item: RenewedItem) {
      saved.push(item);
      const r = results.shift() ?? true;
      if (r instanceof Error) throw r;
      return r;
    },
    release(broken?: boolean) {
      released.push(broken);
    },
  };
}

export function codeOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'ok',
    (e: unknown) => ((e as { code?: unknown }).code as string | undefined) ?? (e instanceof Error ? e.name : String(e)),
  );
}
