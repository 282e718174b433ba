import { Inject, Injectable } from '@nestjs/common';
import type { AuditActor } from '../audit/audit-entry.js';
import { AuditService } from '../audit/audit.service.js';
import { SEALED_COLUMNS } from './sealed-columns.js';
import { type ResealRun, TenantKeyResealer } from './tenant-key-resealer.js';
import { TenantKeyResealsRepository } from './tenant-key-reseals.repository.js';
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
  /** The newest rotation's re-seal; null: the tenant's key was never rotated. */
  reseal: ResealStatus | null;
}

export interface ResealStatus {
  version: number;
  /** `re-sealing`: values are moving; `retiring`: every value moved, older versions wait for KEY_CACHE_TTL; `done`. */
  state: 're-sealing' | 'retiring' | 'done';
  resealed: number;
  /** The tenant's values not under `version` yet. */
  left: number;
  /** The instance (or command line) holding it now; null: none. */
  worker: string | null;
  requestedAt: string;
  retired: number[];
}

/** Who the command line is in audit rows: the operator, through the CLI. */
export const CLI_ACTOR: AuditActor = { kind: 'operator', id: 'cli' };

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

/** What the command line's foreground re-seal saw (`--wait`, `--resume`). */
export type ForegroundReseal =
  | (ResealRun & { heldBy?: undefined })
  /** Another worker (a running instance) holds the re-seal: it goes on there. */
  | { heldBy: string; tenantId: string; version: number };

/**
 * The operator's key commands (src/cli/keys.command.ts): what each tenant's keys are, rewrapping every data key
 * under the active KEK, and a new data key version for a tenant (its values re-sealed by the running instances, or
 * in the foreground). Each writes its audit rows (docs/keys.md, "Audit rows"). Never a key in the output.
 */
@Injectable()
export class TenantKeysAdmin {
  constructor(
    @Inject(TenantKeys) private readonly keys: TenantKeys,
    @Inject(TenantKeysRepository) private readonly repo: TenantKeysRepository,
    @Inject(VaultRepository) private readonly vaultRepo: VaultRepository,
    @Inject(TokenVault) private readonly vault: TokenVault,
    @Inject(TenantKeyResealsRepository) private readonly reseals: TenantKeyResealsRepository,
    @Inject(TenantKeyResealer) private readonly resealer: TenantKeyResealer,
    @Inject(AuditService) private readonly audit: AuditService,
  ) {}

  async status(): Promise<TenantKeyStatus[]> {
    const byTenant = new Map<string, TenantKeyStatus>();
    const keks = await this.repo.keks();
    const of = (tenantId: string) => {
      let s = byTenant.get(tenantId);
      if (!s) {
        s = { tenantId, activeVersion: null, kekId: null, ownKek: keks.get(tenantId) ?? null, versions: [], rows: {}, reseal: null };
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
    for (const r of await this.reseals.all()) {
      const s = of(r.tenantId);
      const left = Object.entries(s.rows)
        .filter(([format]) => format !== `v2/${r.version}`)
        .reduce((n, [, count]) => n + count, 0);
      s.reseal = {
        version: r.version,
        state: r.finishedAt ? 'done' : r.resealedAt ? 'retiring' : 're-sealing',
        resealed: r.resealed,
        left: r.finishedAt ? 0 : left,
        worker: r.leaseOwner !== null && r.leaseUntil !== null && r.leaseUntil.getTime() > Date.now() ? r.leaseOwner : null,
        requestedAt: r.requestedAt.toISOString(),
        retired: r.retired,
      };
    }
    return [...byTenant.values()].sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0));
  }

  /**
   * Rewraps every live data key that the active KEK does not wrap: one row per tenant and version, each a
   * compare-and-swap, so a run stopped at any point leaves every key readable and a re-run finishes the rest. Never
   * touches the tenants' values.
   */
  async rotateKek(signal?: AbortSignal, onProgress?: (done: number, total: number) => void): Promise<RewrapResult> {
    const kekId = this.keys.store.describe().kekId;
    const result: RewrapResult = { total: 0, rewrapped: 0, skippedConcurrent: 0, complete: false };
    result.total = (await this.repo.notWrappedBy(kekId, 1_000_000)).length;
    onProgress?.(0, result.total);
    // Audited when there is something to rewrap: a run that finds every key under the KEK changes nothing.
    if (result.total > 0) await this.record('kek.rotation_started', null, { kekId, total: result.total });
    try {
      await this.rewrapAll(kekId, result, signal, onProgress);
    } finally {
      if (result.total > 0 || result.rewrapped > 0)
        await this.record('kek.rotation_finished', null, { kekId, ...result }, result.complete ? 'success' : 'failure');
    }
    return result;
  }

  private async rewrapAll(
    first: string,
    result: RewrapResult,
    signal?: AbortSignal,
    onProgress?: (done: number, total: number) => void,
  ): Promise<void> {
    let kekId = first;
    for (;;) {
      if (signal?.aborted) return;
      const batch = await this.repo.notWrappedBy(kekId, 100);
      if (batch.length === 0) break;
      for (const row of batch) {
        if (signal?.aborted) return;
        const now = await this.rewrap(row);
        if (now) result.rewrapped++;
        else result.skippedConcurrent++;
        // The KEK was rotated again meanwhile (a Transit key's new version): the walk goes on towards the newest.
        if (now && now !== kekId) kekId = now;
        onProgress?.(result.rewrapped, Math.max(result.total, result.rewrapped));
      }
    }
    result.complete = true;
  }

  /** One audit row of the command line's key operations (never a key: ids, versions, counts). */
  private record(
    action: 'kek.rotation_started' | 'kek.rotation_finished' | 'tenant_key.rotated' | 'tenant_key.kek_set',
    tenantId: string | null,
    details: Record<string, string | number | boolean>,
    outcome: 'success' | 'failure' = 'success',
  ): Promise<void> {
    const target = tenantId === null ? null : details.version === undefined ? 'tenant-keys' : `tenant-keys/${String(details.version)}`;
    return this.audit.recordAfter({ action, actor: CLI_ACTOR, tenantId, target, requestId: null, outcome, details });
  }

  /**
   * Gives the tenant a KEK of its own in the key store (`kek`: a PKCS#11 label, a Transit key name), checked first;
   * then rewraps each of the tenant's live data keys under it, one row per version, each a compare-and-swap: a run
   * stopped at any point leaves every key readable, and a re-run finishes the rest (or, with Transit, moves the keys
   * to the newest version of the tenant's key after it was rotated). New versions are wrapped by it from the start.
   * Audited (`tenant_key.kek_set`, the key's name and counts) once the run is over, complete or not.
   */
  async setKek(tenantId: string, kek: string, signal?: AbortSignal): Promise<SetKekResult> {
    const kekId = await this.keys.store.ownKek(kek);
    await this.repo.setKek(tenantId, kek);
    this.keys.forget(tenantId);
    const result: SetKekResult = { kekId, total: 0, rewrapped: 0, skippedConcurrent: 0, complete: false };
    try {
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
    } finally {
      await this.record(
        'tenant_key.kek_set',
        tenantId,
        { kek, kekId: result.kekId, rewrapped: result.rewrapped, complete: result.complete },
        result.complete ? 'success' : 'failure',
      );
    }
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
   * A new version of the tenant's data key; new values are sealed with it (on every instance within KEY_CACHE_TTL),
   * and the re-seal of the tenant's values is recorded for the running instances to do in the background
   * (TenantKeyResealLoop), or for `resealNow`. Answers the new version.
   */
  async rotateTenant(tenantId: string): Promise<number> {
    if (!this.vault.sealsEnvelope) throw new Error('tenant keys are not in use yet: an instance that does not open them is live');
    const newest = await this.repo.newest(tenantId);
    if (newest && newest.wrapped === null)
      throw new VaultError(`tenant "${tenantId}" was deleted: its data keys are destroyed`, 'tenant_keys', 'wrapped_key');
    const version = await this.keys.rotate(tenantId);
    await this.reseals.request(tenantId, version);
    await this.record('tenant_key.rotated', tenantId, { version, previous: newest?.version ?? 0 });
    return version;
  }

  /**
   * The tenant's re-seal, run here (the command line's `--wait` and `--resume`): it takes the lease unless a running
   * instance holds it (then it answers who). Without a re-seal on record (a key rotated before this release), one
   * to the newest version is recorded first.
   */
  async resealNow(tenantId: string, owner: string, signal?: AbortSignal): Promise<ForegroundReseal> {
    if (!this.vault.sealsEnvelope) throw new Error('tenant keys are not in use yet: an instance that does not open them is live');
    const newest = await this.repo.newest(tenantId);
    if (!newest || newest.wrapped === null)
      throw new VaultError(`tenant "${tenantId}" has no data key to re-seal with`, 'tenant_keys', 'wrapped_key');
    const recorded = await this.reseals.find(tenantId);
    if (!recorded || recorded.version !== newest.version || (recorded.finishedAt && (await this.olderLive(tenantId, newest.version))))
      await this.reseals.request(tenantId, newest.version);
    const job = await this.reseals.claimTenant(tenantId, owner, this.resealer.leaseMs);
    if (!job) {
      const now = await this.reseals.find(tenantId);
      if (now?.finishedAt)
        return { tenantId, version: now.version, outcome: 'finished', resealed: 0, resealedInAll: now.resealed, retired: [], kept: [] };
      return { heldBy: now?.leaseOwner ?? 'another worker', tenantId, version: newest.version };
    }
    return this.resealer.run(job, owner, CLI_ACTOR, signal);
  }

  private async olderLive(tenantId: string, version: number): Promise<boolean> {
    return (await this.repo.versionsOf(tenantId)).some((k) => k.version < version && k.wrapped !== null);
  }
}
