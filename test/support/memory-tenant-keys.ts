import type { TenantKeyRow, TenantKeysRepository } from '../../src/vault/tenant-keys.repository.js';

/**
 * tenant_keys in memory: the part of TenantKeysRepository that TenantKeys calls (the unit spec of its cache and
 * bench/vault.ts, which measure the vault, not SQL).
 */
export class MemoryTenantKeys {
  readonly rows = new Map<string, TenantKeyRow>();
  find(tenantId: string, version: number): Promise<TenantKeyRow | null> {
    return Promise.resolve(this.rows.get(`${tenantId}/${version}`) ?? null);
  }
  newest(tenantId: string): Promise<TenantKeyRow | null> {
    let best: TenantKeyRow | null = null;
    for (const r of this.rows.values()) if (r.tenantId === tenantId && (!best || r.version > best.version)) best = r;
    return Promise.resolve(best);
  }
  kekOf(): Promise<string | null> {
    return Promise.resolve(null);
  }
  insert(tenantId: string, version: number, wrapped: string, kekId: string): Promise<boolean> {
    const id = `${tenantId}/${version}`;
    if (this.rows.has(id)) return Promise.resolve(false);
    this.rows.set(id, { tenantId, version, wrapped, kekId, createdAt: new Date(), destroyedAt: null });
    return Promise.resolve(true);
  }
  /** As TenantKeysRepository's: this store's rows, for what the caller types them as. */
  asRepository(): TenantKeysRepository {
    return this as unknown as TenantKeysRepository;
  }
}
