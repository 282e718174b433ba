import { Inject, Injectable } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { SEALED_COLUMNS } from './sealed-columns.js';
import { TenantKeys } from './tenant-keys.service.js';
import { type TenantKeyRow, TenantKeysRepository } from './tenant-keys.repository.js';
import { TokenVault, VaultError } from './token-vault.service.js';
import { VaultRepository } from './vault.repository.js';

export interface TenantKeyStatus {
  tenantId: string;
  /** The version new values are sealed with; null: the tenant has no data key yet (or it was destroyed). */
  activeVersion: number | null;
  kekId: string | null;
  /** The KEK of its own the tenant has in the key store (keys set-kek), or null: the store's shared KEK. */
  ownKek: string | null;
  /** Every version, live or destroyed. */
  versions: Array<{ version: number; kekId: string; destroyed: boolean }>;
  /** Values per format: `v1` (the VAULT_KEYS ring), `v2/<version>` (the data key's version). */
  rows: Record<string, number>;
}

export interface RewrapResult {
  /** Live data keys not wrapped by the active KEK when the run started. */
  total: number;
  rewrapped: number;
  /** Rewritten meanwhile (another run): read again. */
  skippedConcurrent: number;
  complete: boolean;
}

export interface SetKekResult {
  /** The id data keys wrapped by the tenant's KEK get (`pkcs11:<label>`, `transit:<name>:v<version>`). */
  kekId: string;
  /** The tenant's live data keys not wrapped by it when the run started. */
  total: number;
  rewrapped: number;
  skippedConcurrent: number;
  complete: boolean;
}

export interface RotateResult {
  version: number;
  resealed: number;
  /** Older versions destroyed because no value uses them any more. */
  retired: number[];
  /** Older versions kept: values still use them, or running instances may still seal with them (KEY_CACHE_TTL). */
  kept: number[];
  complete: boolean;
}

/**
 * The operator's key commands (src/cli/keys.command.ts): what each tenant's keys are, rewrapping every data key
 * under the active KEK, and a new data key version for a tenant with its values re-sealed. Never a key in the output.
 */
@Injectable()
export class TenantKeysAdmin {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(TenantKeys) private readonly keys: TenantKeys,
    @Inject(TenantKeysRepository) private readonly repo: TenantKeysRepository,
    @Inject(VaultRepository) private readonly vaultRepo: VaultRepository,
    @Inject(TokenVault) private readonly vault: TokenVault,
  ) {}

  async status(): Promise<TenantKeyStatus[]> {
    const byTenant = new Map<string, TenantKeyStatus>();
    const keks = await this.repo.keks();
    const of = (tenantId: string) => {
      let s = byTenant.get(tenantId);
      if (!s) {
        s = { tenantId, activeVersion: null, kekId: null, ownKek: keks.get(tenantId) ?? null, versions: [], rows: {} };
        byTenant.set(tenantId, s);
      }
      return s;
    };
    for (const tenantId of keks.keys()) of(tenantId);
    for (const row of await this.repo.all()) {
      const s = of(row.tenantId);
      s.versions.push({ version: row.version, kekId: row.kekId, destroyed: row.wrapped === null });
      if (row.wrapped !== null) [s.activeVersion, s.kekId] = [row.version, row.kekId];
      else if (s.activeVersion !== null && row.version > s.activeVersion) [s.activeVersion, s.kekId] = [null, null];
    }
    for (const col of await this.vaultRepo.existingColumns(SEALED_COLUMNS)) {
      for (const { tenantId, format, n } of await this.vaultRepo.formatsByTenant(col)) {
        const s = of(tenantId);
        s.rows[format] = (s.rows[format] ?? 0) + n;
      }
    }
    return [...byTenant.values()].sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0));
  }

  /**
   * Rewraps every live data key that the active KEK does not wrap: one row per tenant and version, each a
   * compare-and-swap, so a run stopped at any point leaves every key readable and a re-run finishes the rest. Never
   * touches the tenants' values.
   */
  async rotateKek(signal?: AbortSignal, onProgress?: (done: number, total: number) => void): Promise<RewrapResult> {
    let kekId = this.keys.store.describe().kekId;
    const result: RewrapResult = { total: 0, rewrapped: 0, skippedConcurrent: 0, complete: false };
    result.total = (await this.repo.notWrappedBy(kekId, 1_000_000)).length;
    onProgress?.(0, result.total);
    for (;;) {
      if (signal?.aborted) return result;
      const batch = await this.repo.notWrappedBy(kekId, 100);
      if (batch.length === 0) break;
      for (const row of batch) {
        if (signal?.aborted) return result;
        const now = await this.rewrap(row);
        if (now) result.rewrapped++;
        else result.skippedConcurrent++;
        // The KEK was rotated again meanwhile (a Transit key's new version): the walk goes on towards the newest.
        if (now && now !== kekId) kekId = now;
        onProgress?.(result.rewrapped, Math.max(result.total, result.rewrapped));
      }
    }
    result.complete = true;
    return result;
  }

  /**
   * Gives the tenant a KEK of its own in the key store (`kek`: a PKCS#11 label, a Transit key name), checked first;
   * then rewraps each of the tenant's live data keys under it, one row per version, each a compare-and-swap: a run
   * stopped at any point leaves every key readable, and a re-run finishes the rest (or, with Transit, moves the keys
   * to the newest version of the tenant's key after it was rotated). New versions are wrapped by it from the start.
   */
  async setKek(tenantId: string, kek: string, signal?: AbortSignal): Promise<SetKekResult> {
    const kekId = await this.keys.store.ownKek(kek);
    await this.repo.setKek(tenantId, kek);
    this.keys.forget(tenantId);
    const result: SetKekResult = { kekId, total: 0, rewrapped: 0, skippedConcurrent: 0, complete: false };
    result.total = (await this.repo.ofTenantNotWrappedBy(tenantId, kekId, 1_000_000)).length;
    for (;;) {
      if (signal?.aborted) return result;
      const batch = await this.repo.ofTenantNotWrappedBy(tenantId, result.kekId, 100);
      if (batch.length === 0) break;
      for (const row of batch) {
        if (signal?.aborted) return result;
        const now = await this.rewrap(row, kek);
        if (now) result.rewrapped++;
        else result.skippedConcurrent++;
        if (now && now !== result.kekId) result.kekId = now;
      }
    }
    result.complete = true;
    return result;
  }

  /** One row rewrapped (compare-and-swap): the KEK id it now names, or null when another run changed it first. */
  private async rewrap(row: TenantKeyRow, kek?: string): Promise<string | null> {
    if (row.wrapped === null) return null;
    const binding = { tenantId: row.tenantId, version: row.version };
    const key = await this.keys.store.unwrap({ wrapped: row.wrapped, kekId: row.kekId }, binding);
    try {
      const next = await this.keys.store.wrap(key, binding, kek);
      return (await this.repo.rewrap(row, next)) ? next.kekId : null;
    } finally {
      key.fill(0);
    }
  }

  /**
   * A new version of the tenant's data key (unless `resume`: the newest one stays), then every value of the tenant
   * not under it re-sealed with it, each a compare-and-swap. Older versions that no value uses are destroyed once
   * the newest is older than KEY_CACHE_TTL (until then a running instance may still seal with its cached version).
   */
  async rotateTenant(tenantId: string, resume: boolean, signal?: AbortSignal): Promise<RotateResult> {
    if (!this.vault.sealsEnvelope) throw new Error('tenant keys are not in use yet: an instance that does not open them is live');
    const newest = await this.repo.newest(tenantId);
    if (resume && (!newest || newest.wrapped === null))
      throw new VaultError(`tenant "${tenantId}" has no data key to resume with`, 'tenant_keys', 'wrapped_key');
    const version = resume && newest ? newest.version : await this.keys.rotate(tenantId);
    const result: RotateResult = { version, resealed: 0, retired: [], kept: [], complete: false };
    for (const col of await this.vaultRepo.existingColumns(SEALED_COLUMNS)) {
      for (;;) {
        if (signal?.aborted) return result;
        const batch = await this.vaultRepo.findUnderOtherVersion(col, tenantId, version, 100);
        if (batch.length === 0) break;
        const changes = [];
        for (const row of batch) {
          const ref = { table: col.table, id: row.id, column: col.column, tenantId };
          changes.push({ id: row.id, previous: row.value, next: await this.vault.seal(await this.vault.open(row.value, ref), ref) });
        }
        result.resealed += await this.vaultRepo.replaceIfUnchanged(col, changes);
      }
    }
    const settled = (await this.repo.find(tenantId, version))?.createdAt;
    const quiet = settled !== undefined && Date.now() - settled.getTime() > this.config.keys.cacheTtlMs;
    for (const row of await this.repo.all()) {
      if (row.tenantId !== tenantId || row.version >= version || row.wrapped === null) continue;
      let used = 0;
      for (const col of await this.vaultRepo.existingColumns(SEALED_COLUMNS))
        used += await this.vaultRepo.countUnderVersion(col, tenantId, row.version);
      if (used === 0 && quiet && (await this.repo.destroy(tenantId, row.version))) result.retired.push(row.version);
      else result.kept.push(row.version);
    }
    this.keys.forget(tenantId);
    result.complete = true;
    return result;
  }
}
