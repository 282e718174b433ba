import { Inject, Injectable, Optional } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { ChangeFeed, type Change } from '../changes/change-feed.service.js';
import type { EnvironmentName } from '../config/environment-config.js';
import type { QuotaBudgets } from '../config/quota-budgets.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import { MetricsService } from '../telemetry/metrics.service.js';
import type { Design } from '../tenants/tenant.entity.js';

export interface CachedTenant {
  environment: EnvironmentName;
  design: Design;
  /** The budgets in force (its own, else its environment's), read once per load. */
  quotas: QuotaBudgets;
}

export interface CachedToken {
  accessToken: string;
  version: number;
  /** ms since the epoch. */
  expiresAt: number;
}

/** 'admin' for the admin connection, the partner's user id (prefixed) for a user's. */
export type OwnerKey = string;

export function ownerKey(kind: 'admin' | 'user', userId: string | null): OwnerKey {
  return kind === 'admin' ? 'admin' : `u:${userId ?? ''}`;
}

/**
 * The most owners held at once (then everything is dropped and refilled by the calls that follow). A cached
 * owner (its connection row) costs about 1.3 KiB of heap, its token about 0.2 KiB more (measured at 100,000
 * connections, test/scale.e2e-spec.ts): 40,000 keep the cache under the 64 MiB that issue 24 allows an
 * instance to grow by, whatever the number of connections stored.
 */
export const MAX_OWNERS = 40_000;

/**
 * One tenant's owners, indexed both ways: a change names a connection id, and must find its owner without
 * walking every owner of the tenant (a big tenant's cache holds tens of thousands, and every renewal of any
 * of them is a change).
 *
 * That an owner has no connection is never held. Such an entry would be wrong from the moment the owner
 * connects until this instance hears the change (a call right after a connect, here or on another instance,
 * would answer 409), and a caller naming ever new users would fill the cache and push valid callers' entries
 * out. The 409 costs one indexed read instead.
 */
interface TenantOwners {
  byOwner: Map<OwnerKey, ConnectionEntity>;
  byConnection: Map<string, OwnerKey>;
}

/**
 * What routing needs per call, kept in memory so that a call whose connection is known and fresh costs
 * no database round trip: the tenant's environment and design, the connection of each owner (never that
 * there is none), and each connection's decrypted access token with its version and expiry.
 *
 * Invalidation is by the change feed (PostgreSQL NOTIFY from every instance); while the feed is not live
 * every read misses and nothing is stored. Loads capture an epoch first and store only if no change was
 * heard meanwhile, so a row read just before a change cannot outlive the change.
 */
@Injectable()
export class RouteCache {
  private readonly tenants = new Map<string, CachedTenant>();
  /** tenantId → owner → connection (an owner with none is never held). */
  private readonly owners = new Map<string, TenantOwners>();
  private readonly tokens = new Map<string, CachedToken>();
  /** tenantId → the connections whose token is held: a change of the tenant (its deletion) drops them all. */
  private readonly tokensOf = new Map<string, Set<string>>();
  private ownerCount = 0;
  private epoch = 0;

  constructor(
    @Inject(ChangeFeed) private readonly feed: ChangeFeed,
    @Optional() @Inject(MetricsService) metrics?: MetricsService,
  ) {
    feed.onReset(() => this.clear());
    feed.subscribe((change) => this.onChange(change));
    if (metrics) {
      const tokens = this.tokens;
      new Gauge({
        name: 'cws_route_tokens_cached',
        help: "Connections' access tokens this instance holds in memory for facade calls (a deleted tenant's are dropped when the change is heard).",
        registers: [metrics.registry],
        collect() {
          this.set(tokens.size);
        },
      });
    }
  }

  mark(): number {
    return this.epoch;
  }

  /** How many entries each part holds now. */
  size(): { tenants: number; owners: number; tokens: number } {
    return { tenants: this.tenants.size, owners: this.ownerCount, tokens: this.tokens.size };
  }

  tenant(tenantId: string): CachedTenant | undefined {
    return this.feed.live ? this.tenants.get(tenantId) : undefined;
  }

  setTenant(tenantId: string, value: CachedTenant, epoch: number): void {
    if (this.usable(epoch)) this.tenants.set(tenantId, value);
  }

  /** The owner's connection as last read; undefined when not held (then read the database). */
  owner(tenantId: string, key: OwnerKey): ConnectionEntity | undefined {
    return this.feed.live ? this.owners.get(tenantId)?.byOwner.get(key) : undefined;
  }

  /** Holds the owner's connection as read at `epoch`; none read (null) drops what was held. */
  setOwner(tenantId: string, key: OwnerKey, connection: ConnectionEntity | null, epoch: number): void {
    if (!this.usable(epoch)) return;
    let t = this.owners.get(tenantId);
    if (connection === null) {
      if (t) this.drop(t, key);
      return;
    }
    if (this.ownerCount >= MAX_OWNERS) {
      this.clear();
      t = undefined;
    }
    if (!t) this.owners.set(tenantId, (t = { byOwner: new Map(), byConnection: new Map() }));
    if (!t.byOwner.has(key)) this.ownerCount++;
    else this.unindex(t, key);
    t.byOwner.set(key, connection);
    t.byConnection.set(connection.id, key);
  }

  token(connectionId: string): CachedToken | undefined {
    return this.feed.live ? this.tokens.get(connectionId) : undefined;
  }

  setToken(tenantId: string, connectionId: string, token: CachedToken, epoch: number): void {
    if (this.usable(epoch)) this.holdToken(tenantId, connectionId, token);
  }

  /**
   * A renewal made by this instance: the new token replaces the old one at once, unless a newer one is
   * already known. The renewal's own NOTIFY then drops it, and the next call reloads the same token.
   */
  renewedHere(tenantId: string, connectionId: string, token: CachedToken): void {
    if (!this.feed.live) return;
    const current = this.tokens.get(connectionId);
    if (!current || current.version <= token.version) this.holdToken(tenantId, connectionId, token);
  }

  private holdToken(tenantId: string, connectionId: string, token: CachedToken): void {
    this.tokens.set(connectionId, token);
    let held = this.tokensOf.get(tenantId);
    if (!held) this.tokensOf.set(tenantId, (held = new Set()));
    held.add(connectionId);
  }

  private usable(epoch: number): boolean {
    return this.feed.live && epoch === this.epoch;
  }

  private onChange(change: Change): void {
    if (change.table === 'quota_pauses') return; // the quota module's, nothing cached here
    this.epoch++;
    if (change.table === 'tenants') {
      // A change of the tenant (its deletion, its data keys destroyed) drops its access tokens too: a deleted
      // tenant's tokens are in no instance's memory once the change is heard.
      this.tenants.delete(change.tenantId);
      this.dropTenantOwners(change.tenantId);
      for (const id of this.tokensOf.get(change.tenantId) ?? []) this.tokens.delete(id);
      this.tokensOf.delete(change.tenantId);
      return;
    }
    if (change.table !== 'connections') return;
    this.tokens.delete(change.id);
    this.tokensOf.get(change.tenantId)?.delete(change.id);
    const t = this.owners.get(change.tenantId);
    if (!t) return;
    // A change of a held connection drops it; a new connection's owner held none (nothing is held for it).
    const key = t.byConnection.get(change.id);
    if (key !== undefined) this.drop(t, key);
  }

  private drop(t: TenantOwners, key: OwnerKey): void {
    this.unindex(t, key);
    if (t.byOwner.delete(key)) this.ownerCount--;
  }

  private unindex(t: TenantOwners, key: OwnerKey): void {
    const previous = t.byOwner.get(key);
    if (previous && t.byConnection.get(previous.id) === key) t.byConnection.delete(previous.id);
  }

  private dropTenantOwners(tenantId: string): void {
    const t = this.owners.get(tenantId);
    if (!t) return;
    this.ownerCount -= t.byOwner.size;
    this.owners.delete(tenantId);
  }

  private clear(): void {
    this.epoch++;
    this.tenants.clear();
    this.owners.clear();
    this.tokens.clear();
    this.tokensOf.clear();
    this.ownerCount = 0;
  }
}
