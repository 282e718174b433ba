import { describe, expect, it, jest } from '@jest/globals';
import type { ChangeFeed, ChangeHandler } from '../changes/change-feed.service.js';
import type { TenantKeys } from '../vault/tenant-keys.service.js';
import { REVOCATION_POLL_MS, TenantKeysRevocation } from './tenant-keys-revocation.js';

class FakeFeed {
  live = true;
  handlers: ChangeHandler[] = [];
  resets: Array<() => void> = [];
  subscribe(h: ChangeHandler) {
    this.handlers.push(h);
  }
  onReset(h: () => void) {
    this.resets.push(h);
  }
}

function setup(held: string[]) {
  const feed = new FakeFeed();
  const sweeps: Array<string | undefined> = [];
  const keys = {
    holds: (t: string) => held.includes(t),
    dropDestroyed: (t?: string) => {
      sweeps.push(t);
      return Promise.resolve(0);
    },
  };
  const revocation = new TenantKeysRevocation(feed as unknown as ChangeFeed, keys as unknown as TenantKeys);
  revocation.onModuleInit();
  return { feed, sweeps, revocation };
}

describe('TenantKeysRevocation', () => {
  it("checks a tenant's held keys when a change of that tenant is heard, and only then", () => {
    const { feed, sweeps, revocation } = setup(['acme']);
    for (const h of feed.handlers) h({ table: 'tenants', tenantId: 'acme', id: 'acme' });
    for (const h of feed.handlers) h({ table: 'tenants', tenantId: 'other', id: 'other' });
    for (const h of feed.handlers) h({ table: 'connections', tenantId: 'acme', id: 'c1' });
    expect(sweeps).toEqual(['acme']);
    revocation.onModuleDestroy();
  });

  it('polls every key held each second while the feed is not live, and once when it resets', async () => {
    jest.useFakeTimers();
    try {
      const { feed, sweeps, revocation } = setup(['acme']);
      await jest.advanceTimersByTimeAsync(REVOCATION_POLL_MS * 3);
      expect(sweeps).toEqual([]);
      feed.live = false;
      for (const r of feed.resets) r();
      expect(sweeps).toEqual([undefined]);
      await jest.advanceTimersByTimeAsync(REVOCATION_POLL_MS);
      expect(sweeps).toEqual([undefined, undefined]);
      revocation.onModuleDestroy();
      const n = sweeps.length;
      await jest.advanceTimersByTimeAsync(REVOCATION_POLL_MS * 3);
      expect(sweeps.length).toBe(n);
    } finally {
      jest.useRealTimers();
    }
  });
});
