import { describe, expect, it } from '@jest/globals';
import type { ChangeFeed, ChangeHandler } from '../changes/change-feed.service.js';
import { parseChanges } from '../changes/change-feed.service.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import { ownerKey, RouteCache } from './route-cache.js';

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
  emit(payload: string) {
    for (const c of parseChanges(payload) ?? []) for (const h of this.handlers) h(c);
  }
  reset() {
    for (const h of this.resets) h();
  }
}

const conn = (id: string) => ({ id, tenantId: 't1', kind: 'user', userId: 'u1', status: 'active' }) as ConnectionEntity;
const token = { accessToken: 'tok', version: 1, expiresAt: Date.now() + 60_000 };

function setup() {
  const feed = new FakeFeed();
  const cache = new RouteCache(feed as unknown as ChangeFeed);
  return { feed, cache };
}

describe('RouteCache', () => {
  it('serves what was stored, and drops a connection and its token when its row changes', () => {
    const { feed, cache } = setup();
    const key = ownerKey('user', 'u1');
    cache.setOwner('t1', key, conn('c1'), cache.mark());
    cache.setToken('t1', 'c1', token, cache.mark());
    expect(cache.owner('t1', key)?.id).toBe('c1');
    expect(cache.token('c1')).toEqual(token);
    feed.emit('connections:t1:c2');
    expect(cache.owner('t1', key)?.id).toBe('c1');
    feed.emit('connections:t1:c1');
    expect(cache.owner('t1', key)).toBeUndefined();
    expect(cache.token('c1')).toBeUndefined();
  });

  it('never holds that an owner has no connection (a connect on any instance is seen by the next call)', () => {
    const { feed, cache } = setup();
    const key = ownerKey('user', 'u9');
    cache.setOwner('t1', key, null, cache.mark());
    expect(cache.owner('t1', key)).toBeUndefined();
    expect(cache.size().owners).toBe(0);
    // A read that finds none drops what was held (the row went away before its change was heard).
    cache.setOwner('t1', key, conn('c9'), cache.mark());
    cache.setOwner('t1', key, null, cache.mark());
    expect(cache.owner('t1', key)).toBeUndefined();
    expect(cache.size().owners).toBe(0);
    feed.emit('connections:t1:c9');
    expect(cache.size().owners).toBe(0);
  });

  it('callers naming ever new users who have no connection push no held owner out', () => {
    const { cache } = setup();
    cache.setOwner('t1', ownerKey('user', 'u1'), conn('c1'), cache.mark());
    for (let i = 0; i < 100_000; i++) cache.setOwner('t1', ownerKey('user', `nobody-${i}`), null, cache.mark());
    expect(cache.owner('t1', ownerKey('user', 'u1'))?.id).toBe('c1');
  });

  it('follows an owner whose connection was replaced or who went from none to one, and drops only what a change names', () => {
    const { feed, cache } = setup();
    const [u1, u2, u3] = ['u1', 'u2', 'u3'].map((u) => ownerKey('user', u));
    cache.setOwner('t1', u1, conn('c1'), cache.mark());
    cache.setOwner('t1', u1, conn('c1b'), cache.mark());
    cache.setOwner('t1', u2, null, cache.mark());
    cache.setOwner('t1', u2, conn('c2'), cache.mark());
    cache.setOwner('t1', u3, conn('c3'), cache.mark());
    feed.emit('connections:t1:c1');
    feed.emit('connections:t1:c9');
    expect([cache.owner('t1', u1)?.id, cache.owner('t1', u2)?.id, cache.owner('t1', u3)?.id]).toEqual(['c1b', 'c2', 'c3']);
    feed.emit('connections:t1:c1b');
    feed.emit('connections:t1:c3');
    expect([cache.owner('t1', u1), cache.owner('t1', u2)?.id, cache.owner('t1', u3)]).toEqual([undefined, 'c2', undefined]);
  });

  it('a change in a tenant of many cached owners drops its own owner, nothing else', () => {
    const { feed, cache } = setup();
    for (let i = 0; i < 20_000; i++) cache.setOwner('t1', ownerKey('user', `u${i}`), conn(`c${i}`), cache.mark());
    feed.emit('connections:t1:c4242');
    feed.emit('connections:t1:a-new-one');
    const left = Array.from({ length: 20_000 }, (_, i) => cache.owner('t1', ownerKey('user', `u${i}`)));
    expect(left.filter((o) => o === undefined)).toHaveLength(1);
    expect(left[4242]).toBeUndefined();
    expect(left[4243]?.id).toBe('c4243');
  });

  it('refuses to store a load that raced with a change', () => {
    const { feed, cache } = setup();
    const epoch = cache.mark();
    feed.emit('connections:t1:c1');
    cache.setOwner('t1', 'admin', conn('c1'), epoch);
    cache.setTenant('t1', { environment: 'sandbox', design: 'admin', quotas: {} }, epoch);
    expect(cache.owner('t1', 'admin')).toBeUndefined();
    expect(cache.tenant('t1')).toBeUndefined();
  });

  it('is bypassed while the feed is not live and empty after a reset', () => {
    const { feed, cache } = setup();
    cache.setTenant('t1', { environment: 'sandbox', design: 'users', quotas: {} }, cache.mark());
    feed.live = false;
    expect(cache.tenant('t1')).toBeUndefined();
    cache.setTenant('t2', { environment: 'sandbox', design: 'users', quotas: {} }, cache.mark());
    feed.reset();
    feed.live = true;
    expect(cache.tenant('t1')).toBeUndefined();
    expect(cache.tenant('t2')).toBeUndefined();
  });

  it('drops a tenant and its owners when the tenant row changes', () => {
    const { feed, cache } = setup();
    cache.setTenant('t1', { environment: 'sandbox', design: 'users', quotas: {} }, cache.mark());
    cache.setOwner('t1', 'admin', conn('c1'), cache.mark());
    feed.emit('tenants:t1:t1');
    expect(cache.tenant('t1')).toBeUndefined();
    expect(cache.owner('t1', 'admin')).toBeUndefined();
  });

  it("drops every access token of a tenant when the tenant row changes (its deletion), and no other tenant's", () => {
    const { feed, cache } = setup();
    cache.setToken('t1', 'c1', token, cache.mark());
    cache.setToken('t1', 'c2', token, cache.mark());
    cache.renewedHere('t1', 'c3', { ...token, version: 2 });
    cache.setToken('t2', 'c4', token, cache.mark());
    expect(cache.size().tokens).toBe(4);
    feed.emit('tenants:t1:t1');
    expect([cache.token('c1'), cache.token('c2'), cache.token('c3')]).toEqual([undefined, undefined, undefined]);
    expect(cache.token('c4')).toEqual(token);
    expect(cache.size().tokens).toBe(1);
  });

  it('keeps the newest token of a renewal made here', () => {
    const { cache } = setup();
    cache.setToken('t1', 'c1', { ...token, version: 3 }, cache.mark());
    cache.renewedHere('t1', 'c1', { ...token, accessToken: 'old', version: 2 });
    expect(cache.token('c1')?.version).toBe(3);
    cache.renewedHere('t1', 'c1', { ...token, accessToken: 'new', version: 4 });
    expect(cache.token('c1')?.accessToken).toBe('new');
  });

  it('parses notification payloads and rejects unknown ones', () => {
    expect(parseChanges('connections:acme:1b2c')).toEqual([{ table: 'connections', tenantId: 'acme', id: '1b2c' }]);
    expect(parseChanges('connections:acme:1b2c,3d4e')).toEqual([
      { table: 'connections', tenantId: 'acme', id: '1b2c' },
      { table: 'connections', tenantId: 'acme', id: '3d4e' },
    ]);
    expect(parseChanges('tenant_api_keys:acme:k:1')).toEqual([{ table: 'tenant_api_keys', tenantId: 'acme', id: 'k:1' }]);
    expect(parseChanges('users:acme:1')).toBeNull();
    expect(parseChanges('connections:acme')).toBeNull();
    expect(parseChanges('connections:acme:1b2c,')).toBeNull();
  });
});
