import { Injectable } from '@nestjs/common';
import { ChangeFeed, type Change } from '../changes/change-feed.service.js';
import type { EnvironmentName } from '../config/app-config.js';
import type { ConnectionEntity } from '../connections/connection.entity.js';
import type { Design } from '../tenants/tenant.entity.js';

export interface CachedTenant {
  environment: EnvironmentName;
  design: Design;
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

const MAX_OWNERS = 100_000;

/**
 * What routing needs per call, kept in memory so that a call whose connection is known and fresh costs
 * no database round trip: the tenant's environment and design, the connection of each owner (or that
 * there is none), and each connection's decrypted access token with its version and expiry.
 *
 * Invalidation is by the change feed (PostgreSQL NOTIFY from every instance); while the feed is not live
 * every read misses and nothing is stored. Loads capture an epoch first and store only if no change was
 * heard meanwhile, so a row read just before a change cannot outlive the change.
 */
@Injectable()
export class RouteCache {
  private readonly tenants = new Map<string, CachedTenant>();
  /** tenantId → owner → connection, or null: known to have none. */
  private readonly owners = new Map<string, Map<OwnerKey, ConnectionEntity | null>>();
  private readonly tokens = new Map<string, CachedToken>();
  private ownerCount = 0;
  private epoch = 0;

  constructor(private readonly feed: ChangeFeed) {
    feed.onReset(() => this.clear());
    feed.subscribe((change) => this.onChange(change));
  }

  mark(): number {
    return this.epoch;
  }

  tenant(tenantId: string): CachedTenant | undefined {
    return this.feed.live ? this.tenants.get(tenantId) : undefined;
  }

  setTenant(tenantId: string, value: CachedTenant, epoch: number): void {
    if (this.usable(epoch)) this.tenants.set(tenantId, value);
  }

  /** undefined: not known; null: known to have no connection. */
  owner(tenantId: string, key: OwnerKey): ConnectionEntity | null | undefined {
    return this.feed.live ? this.owners.get(tenantId)?.get(key) : undefined;
  }

  setOwner(tenantId: string, key: OwnerKey, connection: ConnectionEntity | null, epoch: number): void {
    if (!this.usable(epoch)) return;
    if (this.ownerCount >= MAX_OWNERS) this.clear();
    let map = this.owners.get(tenantId);
    if (!map) this.owners.set(tenantId, (map = new Map()));
    if (!map.has(key)) this.ownerCount++;
    map.set(key, connection);
  }

  token(connectionId: string): CachedToken | undefined {
    return this.feed.live ? this.tokens.get(connectionId) : undefined;
  }

  setToken(connectionId: string, token: CachedToken, epoch: number): void {
    if (this.usable(epoch)) this.tokens.set(connectionId, token);
  }

  /**
   * A renewal made by this instance: the new token replaces the old one at once, unless a newer one is
   * already known. The renewal's own NOTIFY then drops it, and the next call reloads the same token.
   */
  renewedHere(connectionId: string, token: CachedToken): void {
    if (!this.feed.live) return;
    const current = this.tokens.get(connectionId);
    if (!current || current.version <= token.version) this.tokens.set(connectionId, token);
  }

  private usable(epoch: number): boolean {
    return this.feed.live && epoch === this.epoch;
  }

  private onChange(change: Change): void {
    this.epoch++;
    if (change.table === 'tenants') {
      this.tenants.delete(change.tenantId);
      this.dropTenantOwners(change.tenantId);
      return;
    }
    if (change.table !== 'connections') return;
    this.tokens.delete(change.id);
    const map = this.owners.get(change.tenantId);
    if (!map) return;
    // A change may be a new connection (a "none" entry is now wrong) or a change of this one.
    for (const [key, value] of map) {
      if (value === null || value.id === change.id) {
        map.delete(key);
        this.ownerCount--;
      }
    }
  }

  private dropTenantOwners(tenantId: string): void {
    const map = this.owners.get(tenantId);
    if (!map) return;
    this.ownerCount -= map.size;
    this.owners.delete(tenantId);
  }

  private clear(): void {
    this.epoch++;
    this.tenants.clear();
    this.owners.clear();
    this.tokens.clear();
    this.ownerCount = 0;
  }
}
