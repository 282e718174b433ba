import { Injectable } from '@nestjs/common';
import { ChangeFeed } from '../changes/change-feed.service.js';
import type { Principal } from './auth.decorators.js';

type TenantPrincipal = Extract<Principal, { kind: 'tenant' }>;

const MAX_ENTRIES = 10_000;

/**
 * Successful tenant-key lookups, by the key's SHA-256 (hex), so that the guard costs no database round
 * trip per request. Dropped when the key row changes (revocation is an UPDATE, tenant deletion cascades
 * to a DELETE) on any instance, and bypassed entirely while the change feed is not live.
 */
@Injectable()
export class ApiKeyCache {
  private readonly byHash = new Map<string, TenantPrincipal>();
  private readonly hashByKeyId = new Map<string, string>();
  /**
   * Hashes of keys looked up and not found live. A key is 256 random bits made here, so one that matched no live
   * row never comes to match one (creation gives out a key nobody presented before, revocation is for good): these
   * hold without the change feed, and spare a client that repeats a wrong key (a revoked one) the database.
   */
  private readonly wrong = new Set<string>();
  private epoch = 0;

  constructor(private readonly feed: ChangeFeed) {
    feed.onReset(() => {
      this.clear();
      this.wrong.clear();
    });
    feed.subscribe((change) => {
      if (change.table !== 'tenant_api_keys') return;
      this.epoch++;
      const hash = this.hashByKeyId.get(change.id);
      if (hash === undefined) return;
      this.hashByKeyId.delete(change.id);
      this.byHash.delete(hash);
    });
  }

  get(hash: string): TenantPrincipal | undefined {
    return this.feed.live ? this.byHash.get(hash) : undefined;
  }

  /** The epoch to pass to `set`: a change heard between the read and the set makes the set a no-op. */
  mark(): number {
    return this.epoch;
  }

  set(hash: string, principal: TenantPrincipal, epoch: number): void {
    if (!this.feed.live || epoch !== this.epoch) return;
    if (this.byHash.size >= MAX_ENTRIES) this.clear();
    this.byHash.set(hash, principal);
    this.hashByKeyId.set(principal.keyId, hash);
  }

  isWrong(hash: string): boolean {
    return this.wrong.has(hash);
  }

  setWrong(hash: string): void {
    if (this.wrong.size >= MAX_ENTRIES) this.wrong.clear();
    this.wrong.add(hash);
  }

  /**
   * Drops a key at once on the instance that revoked it (other instances drop it when the change feed
   * announces the UPDATE): the answer to the revocation must not be followed by a call the key still passes.
   */
  dropKey(keyId: string): void {
    this.epoch++;
    const hash = this.hashByKeyId.get(keyId);
    if (hash === undefined) return;
    this.hashByKeyId.delete(keyId);
    this.byHash.delete(hash);
  }

  /** Drops every key of a tenant deleted by this instance (the cascade's DELETEs reach the others by the feed). */
  dropTenant(tenantId: string): void {
    this.epoch++;
    for (const [hash, principal] of this.byHash) {
      if (principal.tenantId !== tenantId) continue;
      this.byHash.delete(hash);
      this.hashByKeyId.delete(principal.keyId);
    }
  }

  private clear(): void {
    this.epoch++;
    this.byHash.clear();
    this.hashByKeyId.clear();
  }
}
