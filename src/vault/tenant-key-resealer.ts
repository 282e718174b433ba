import { performance } from 'node:perf_hooks';
import { Inject, Injectable } from '@nestjs/common';
import type { AuditActor } from '../audit/audit-entry.js';
import { AuditService } from '../audit/audit.service.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { SEALED_COLUMNS } from './sealed-columns.js';
import { type TenantKeyReseal, TenantKeyResealsRepository } from './tenant-key-reseals.repository.js';
import { TenantKeys } from './tenant-keys.service.js';
import { TenantKeysRepository } from './tenant-keys.repository.js';
import { TokenVault } from './token-vault.service.js';
import { VaultRepository } from './vault.repository.js';

/** Rows re-sealed per batch: one short transaction (a compare-and-swap per row). */
export const RESEAL_BATCH = 50;
/** The least rest after a batch; a batch that took longer rests as long as it took (at most half of one connection). */
export const RESEAL_MIN_PAUSE_MS = 100;

/**
 * How a run ended: `finished` (every value under the new version, the older versions destroyed), `waiting` (every
 * value moved, but the new version is younger than KEY_CACHE_TTL: the older ones are destroyed later), `stopped`
 * (asked to stop; the progress is stored), `lost` (another worker or a newer rotation took the re-seal).
 */
export type ResealOutcome = 'finished' | 'waiting' | 'stopped' | 'lost';

export interface ResealRun {
  tenantId: string;
  version: number;
  outcome: ResealOutcome;
  /** Values re-sealed by this run, and by every run of this rotation. */
  resealed: number;
  resealedInAll: number;
  /** Older versions destroyed by this run; older versions still live (waiting for KEY_CACHE_TTL). */
  retired: number[];
  kept: number[];
}

/**
 * The re-seal of one tenant's values after `keys rotate --tenant` (docs/keys.md): the instances run it in the
 * background (TenantKeyResealLoop), the command line in the foreground (`--wait`, `--resume`). It walks every sealed
 * column from the stored progress in batches of RESEAL_BATCH rows of the tenant, each value opened and sealed with
 * the newest version and written with a compare-and-swap (a value a running instance rewrote meanwhile is newer and
 * wins: it is walked again). The progress is stored after each batch with the lease, so a worker killed part way is
 * followed from there. Once a final count finds no value of the tenant under another version, and the new version
 * is older than KEY_CACHE_TTL (until then an instance may still seal with its cached older version), the older
 * versions are destroyed.
 */
@Injectable()
export class TenantKeyResealer {
  /** How long a worker holds a tenant's re-seal without storing progress (renewed at each batch). */
  readonly leaseMs: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(TenantKeys) private readonly keys: TenantKeys,
    @Inject(TenantKeysRepository) private readonly keyRows: TenantKeysRepository,
    @Inject(TenantKeyResealsRepository) private readonly reseals: TenantKeyResealsRepository,
    @Inject(VaultRepository) private readonly vaultRepo: VaultRepository,
    @Inject(TokenVault) private readonly vault: TokenVault,
    @Inject(AuditService) private readonly audit: AuditService,
  ) {
    this.leaseMs = Math.min(60_000, Math.max(5_000, 4 * config.vaultHeartbeatMs));
  }

  /** Runs the re-seal `job`, which `owner` has claimed, until it ends (see ResealOutcome). `actor` signs its audit rows. */
  async run(job: TenantKeyReseal, owner: string, actor: AuditActor, signal?: AbortSignal): Promise<ResealRun> {
    const { tenantId, version } = job;
    const result: ResealRun = { tenantId, version, outcome: 'lost', resealed: 0, resealedInAll: job.resealed, retired: [], kept: [] };
    const key = await this.keyRows.find(tenantId, version);
    if (!key || key.wrapped === null) {
      // The tenant was deleted (every version destroyed): nothing of it is to be re-sealed.
      if (await this.reseals.finish(job, owner, [])) result.outcome = 'finished';
      return result;
    }
    if (!this.vault.sealsEnvelope) return this.stop(result, owner, 'stopped');
    // From now on this instance seals the tenant's values with the newest version, not a cached older one.
    this.keys.forget(tenantId);
    const columns = await this.vaultRepo.existingColumns(SEALED_COLUMNS);
    let at = { columnIndex: job.columnIndex, afterId: job.afterId };
    let resealedAt = job.resealedAt;
    for (;;) {
      for (; at.columnIndex < columns.length; at = { columnIndex: at.columnIndex + 1, afterId: null }) {
        const col = columns[at.columnIndex];
        for (;;) {
          if (signal?.aborted) return this.stop(result, owner, 'stopped');
          const started = performance.now();
          const batch = await this.vaultRepo.findUnderOtherVersion(col, tenantId, version, RESEAL_BATCH, at.afterId);
          if (batch.length === 0) break;
          const changes = [];
          for (const row of batch) {
            const ref = { table: col.table, id: row.id, column: col.column, tenantId };
            changes.push({ id: row.id, previous: row.value, next: await this.vault.seal(await this.vault.open(row.value, ref), ref) });
          }
          const n = await this.vaultRepo.replaceIfUnchanged(col, changes);
          at = { columnIndex: at.columnIndex, afterId: batch[batch.length - 1].id };
          if (!(await this.reseals.progress(job, owner, at, n, this.leaseMs))) return result;
          result.resealed += n;
          result.resealedInAll += n;
          await rest(Math.max(RESEAL_MIN_PAUSE_MS, performance.now() - started), signal);
        }
      }
      // Every column walked. What a running instance sealed meanwhile with its cached older version (or rewrote
      // between our read and our write) is walked again.
      let left = 0;
      for (const col of columns) left += await this.vaultRepo.countUnderOtherVersion(col, tenantId, version);
      if (left > 0) {
        at = { columnIndex: 0, afterId: null };
        if (!(await this.reseals.progress(job, owner, at, 0, this.leaseMs))) return result;
        continue;
      }
      if (resealedAt === null) {
        if (!(await this.reseals.markResealed(job, owner))) return result;
        resealedAt = new Date();
        await this.audit.recordAfter({
          action: 'tenant_key.resealed',
          actor,
          tenantId,
          target: `tenant-keys/${version}`,
          requestId: null,
          outcome: 'success',
          details: { version, resealed: result.resealedInAll },
        });
      }
      const older = (await this.keyRows.versionsOf(tenantId)).filter((k) => k.version < version && k.wrapped !== null);
      if (Date.now() - key.createdAt.getTime() <= this.config.keys.cacheTtlMs) {
        result.kept = older.map((k) => k.version);
        return this.stop(result, owner, 'waiting');
      }
      const kept: number[] = [];
      for (const k of older) {
        let used = 0;
        for (const col of columns) used += await this.vaultRepo.countUnderVersion(col, tenantId, k.version);
        if (used === 0 && (await this.keyRows.destroy(tenantId, k.version))) result.retired.push(k.version);
        else if (used > 0) kept.push(k.version);
      }
      if (kept.length > 0) {
        // A value came back under an older version: walk again.
        at = { columnIndex: 0, afterId: null };
        continue;
      }
      if (!(await this.reseals.finish(job, owner, result.retired))) return result;
      this.keys.forget(tenantId);
      if (result.retired.length > 0)
        await this.audit.recordAfter({
          action: 'tenant_key.retired',
          actor,
          tenantId,
          target: `tenant-keys/${version}`,
          requestId: null,
          outcome: 'success',
          details: { version, retired: result.retired },
        });
      result.outcome = 'finished';
      return result;
    }
  }

  private async stop(result: ResealRun, owner: string, outcome: 'stopped' | 'waiting'): Promise<ResealRun> {
    await this.reseals.release(result.tenantId, owner);
    result.outcome = outcome;
    return result;
  }
}

/** Waits `ms`, or less when `signal` aborts meanwhile. */
function rest(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
