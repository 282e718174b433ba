import { Inject, Injectable, Optional } from '@nestjs/common';
import { AuditService } from '../audit/audit.service.js';
import { SEALED_COLUMNS, type SealedColumn } from './sealed-columns.js';
import { type SealedRef, TokenVault, VaultError } from './token-vault.service.js';
import { type ReencryptTarget, VaultRepository } from './vault.repository.js';

export interface ReencryptResult {
  /** Rows under an old key when the run started. */
  total: number;
  reencrypted: number;
  /** Rows rewritten by a running instance between our read and our write; they were read again. */
  skippedConcurrent: number;
  /** false when the run was stopped through the signal before the end; a re-run continues. */
  complete: boolean;
}

export interface ReencryptOptions {
  batchSize?: number;
  /** Every value to the ring's active key (before a rollback to 0.2.0); the vault must seal with the ring then. */
  toRing?: boolean;
  /** Checked between batches: an abort stops the run cleanly, with every finished row committed. */
  signal?: AbortSignal;
  /**
   * Tenants whose values never move to or from a data key: deleted ones whose rows the purge has not taken yet (their
   * data keys are destroyed). Between ring keys their values still move.
   */
  passOver?: readonly string[];
}

/**
 * Moves every sealed secret to the active key, one committed batch at a time, each row a compare-and-swap; while
 * the vault seals with the tenants' data keys (every live instance opens that format), it moves every value still
 * in the ring's format to its tenant's data key instead (an upgrade from 0.2.0). Values already under a tenant's
 * data key are left alone: `keys rotate` moves those.
 * The run can stop at any point (Ctrl-C, a crash, a failed batch) and leaves every row readable under the
 * ring, under its old key or its new one; a re-run picks up what is left.
 */
@Injectable()
export class VaultReencryptService {
  constructor(
    @Inject(TokenVault) private readonly vault: TokenVault,
    @Inject(VaultRepository) private readonly repository: VaultRepository,
    @Optional() @Inject(AuditService) private readonly audit?: AuditService,
  ) {}

  /** Rows per sealed column that are not under the active key (absent tables and columns are left out). */
  async pending(toRing = false, passOver: readonly string[] = []): Promise<Array<{ column: SealedColumn; count: number }>> {
    const columns = await this.repository.existingColumns(SEALED_COLUMNS);
    const out: Array<{ column: SealedColumn; count: number }> = [];
    for (const column of columns) {
      out.push({ column, count: await this.repository.countNotUnderKey(column, this.vault.activeKid, this.target(toRing), passOver) });
    }
    return out;
  }

  private target(toRing: boolean): ReencryptTarget {
    if (toRing) {
      if (this.vault.sealsEnvelope) throw new Error('a move to the ring needs a vault that seals with the ring');
      return 'ring';
    }
    return this.vault.sealsEnvelope ? 'tenant-keys' : 'ring-key';
  }

  async reencryptAll(onProgress?: (done: number, total: number) => void, options: ReencryptOptions = {}): Promise<ReencryptResult> {
    const batchSize = options.batchSize ?? 200;
    const kid = this.vault.activeKid;
    const target = this.target(options.toRing ?? false);
    const passOver = options.passOver ?? [];
    const work = await this.pending(options.toRing ?? false, passOver);
    const result: ReencryptResult = { total: work.reduce((n, w) => n + w.count, 0), reencrypted: 0, skippedConcurrent: 0, complete: false };
    onProgress?.(0, result.total);
    // Audited when there is something to move (a run that finds nothing changes nothing): the operator's command.
    if (result.total > 0) await this.record('vault.reencrypt_started', { target, kid, total: result.total });
    try {
      await this.moveAll(work, { kid, target, passOver }, batchSize, result, options.signal, onProgress);
    } finally {
      if (result.total > 0 || result.reencrypted > 0)
        await this.record('vault.reencrypt_finished', { target, kid, ...result }, result.complete ? 'success' : 'failure');
    }
    return result;
  }

  private async moveAll(
    work: Array<{ column: SealedColumn }>,
    { kid, target, passOver }: { kid: string; target: ReencryptTarget; passOver: readonly string[] },
    batchSize: number,
    result: ReencryptResult,
    signal?: AbortSignal,
    onProgress?: (done: number, total: number) => void,
  ): Promise<void> {
    for (const { column } of work) {
      for (;;) {
        if (signal?.aborted) return;
        // Always from the start: finished rows no longer match, and a row that lost its compare-and-swap
        // comes back with its new value (or not at all, when a running instance already sealed it anew).
        const batch = await this.repository.findNotUnderKey(column, kid, batchSize, target, passOver);
        if (batch.length === 0) break;
        const changes = [];
        for (const row of batch) {
          const ref = { table: column.table, id: row.id, column: column.column, tenantId: row.tenantId };
          changes.push({ id: row.id, previous: row.value, next: await this.vault.seal(await this.open(row.value, ref), ref) });
        }
        const updated = await this.repository.replaceIfUnchanged(column, changes);
        result.reencrypted += updated;
        result.skippedConcurrent += changes.length - updated;
        // Rows sealed under an old key by an instance still on the old ring can make the work grow.
        onProgress?.(result.reencrypted, Math.max(result.total, result.reencrypted));
      }
    }
    result.complete = true;
  }

  /** The run's audit row (the command line's, as the operator): the target, the ring's key id and counts; never a key. */
  private async record(
    action: 'vault.reencrypt_started' | 'vault.reencrypt_finished',
    details: Record<string, string | number | boolean>,
    outcome: 'success' | 'failure' = 'success',
  ): Promise<void> {
    await this.audit?.recordAfter({
      action,
      actor: { kind: 'operator', id: 'cli' },
      tenantId: null,
      target: null,
      requestId: null,
      outcome,
      details,
    });
  }

  private async open(sealed: string, ref: SealedRef): Promise<string> {
    try {
      return await this.vault.open(sealed, ref);
    } catch (e) {
      // Stop rather than skip: an unreadable row means the ring is missing a key (or the row is damaged),
      // and the operator must know before retiring any key. The row id says where to look.
      if (e instanceof VaultError) throw new VaultError(`${e.message} (row id ${ref.id})`, e.table, e.column, e.kid);
      throw e;
    }
  }
}
