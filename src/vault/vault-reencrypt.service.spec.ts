import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { SEALED_COLUMNS, type SealedColumn } from './sealed-columns.js';
import { TokenVault, VaultError } from './token-vault.service.js';
import { VaultReencryptService } from './vault-reencrypt.service.js';
import type { SealedChange, SealedValue, VaultRepository } from './vault.repository.js';

const oldKey = { kid: 'old', key: randomBytes(32) };
const newKey = { kid: 'new', key: randomBytes(32) };
const oldVault = new TokenVault({ vaultKeys: [oldKey] });
const ring = new TokenVault({ vaultKeys: [newKey, oldKey] });

/** The repository's contract over in-memory tables; the SQL itself is covered by test/vault.e2e-spec.ts. */
class MemoryVaultRepository implements Pick<
  VaultRepository,
  'existingColumns' | 'countNotUnderKey' | 'findNotUnderKey' | 'replaceIfUnchanged'
> {
  readonly tables = new Map<string, Map<string, Record<string, string | null>>>();
  /** Called just before a compare-and-swap, to play a concurrent writer. */
  beforeSwap: (col: SealedColumn, id: string) => void = () => undefined;

  async existingColumns(columns: readonly SealedColumn[]): Promise<SealedColumn[]> {
    return columns.filter((c) => this.tables.has(c.table));
  }
  async countNotUnderKey(col: SealedColumn, kid: string): Promise<number> {
    return this.pendingOf(col, kid).length;
  }
  async findNotUnderKey(col: SealedColumn, kid: string, limit: number): Promise<SealedValue[]> {
    return this.pendingOf(col, kid).slice(0, limit);
  }
  async replaceIfUnchanged(col: SealedColumn, changes: readonly SealedChange[]): Promise<number> {
    let updated = 0;
    for (const { id, previous, next } of changes) {
      this.beforeSwap(col, id);
      const row = this.tables.get(col.table)?.get(id);
      if (!row || row[col.column] !== previous) continue;
      row[col.column] = next;
      updated++;
    }
    return updated;
  }
  private pendingOf(col: SealedColumn, kid: string): SealedValue[] {
    return (
      [...(this.tables.get(col.table)?.entries() ?? [])]
        // A column a row does not set is NULL, as in SQL.
        .filter(([, row]) => row[col.column] != null && !row[col.column]?.startsWith(`v1.${kid}.`))
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([id, row]) => ({ id, value: row[col.column] as string, tenantId: id }))
    );
  }
}

const secretRef = (id: string) => ({ table: 'tenants', id, column: 'events_secret_enc', tenantId: id });

async function tenantsTable(count: number): Promise<Map<string, Record<string, string | null>>> {
  const rows = new Map<string, Record<string, string | null>>();
  for (let i = 0; i < count; i++) {
    const id = `t${String(i).padStart(3, '0')}`;
    rows.set(id, { events_secret_enc: await oldVault.seal(`whsec_${id}`, secretRef(id)) });
  }
  return rows;
}

async function setup(count: number): Promise<{ repo: MemoryVaultRepository; service: VaultReencryptService }> {
  const repo = new MemoryVaultRepository();
  repo.tables.set('tenants', await tenantsTable(count));
  return { repo, service: new VaultReencryptService(ring, repo as unknown as VaultRepository) };
}

async function assertAllCurrent(repo: MemoryVaultRepository): Promise<void> {
  for (const [id, row] of repo.tables.get('tenants') ?? []) {
    const sealed = row.events_secret_enc;
    if (sealed === null) continue;
    expect(sealed.startsWith('v1.new.')).toBe(true);
    expect(await ring.open(sealed, secretRef(id))).toBe(`whsec_${id}`);
  }
}

describe('VaultReencryptService', () => {
  it('moves every row to the active key in batches, skipping tables that do not exist yet', async () => {
    const { repo, service } = await setup(7);
    repo.tables.get('tenants')?.set('t999', { events_secret_enc: null });
    const progress: Array<[number, number]> = [];
    const result = await service.reencryptAll((done, total) => progress.push([done, total]), { batchSize: 3 });
    expect(result).toEqual({ total: 7, reencrypted: 7, skippedConcurrent: 0, complete: true });
    expect(progress).toEqual([
      [0, 7],
      [3, 7],
      [6, 7],
      [7, 7],
    ]);
    await assertAllCurrent(repo);
    expect(repo.tables.get('tenants')?.get('t999')?.events_secret_enc).toBeNull();
    expect(await service.reencryptAll()).toEqual({ total: 0, reencrypted: 0, skippedConcurrent: 0, complete: true });
  });

  it('lists the sealed columns of every module', () => {
    expect(SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`)).toEqual([
      'tenants.events_secret_enc',
      'tenants.events_secret_prev_enc',
      'connections.access_token_enc',
      'connections.refresh_token_enc',
      'webhook_receivers.secret_enc',
      'event_endpoints.secret_enc',
      'event_endpoints.secret_prev_enc',
      'records.data_enc',
      'record_changes.data_enc',
    ]);
  });

  it('never overwrites a value rewritten concurrently, and still finishes', async () => {
    const renewedT001 = await oldVault.seal('whsec_t001', secretRef('t001'));
    const { repo, service } = await setup(4);
    let renewed = false;
    repo.beforeSwap = (_col, id) => {
      if (id !== 't001' || renewed) return;
      renewed = true;
      // A running instance on the old ring renews this secret between our read and our write.
      const row = repo.tables.get('tenants')?.get(id);
      if (row) row.events_secret_enc = renewedT001;
    };
    const result = await service.reencryptAll(undefined, { batchSize: 2 });
    expect(result).toMatchObject({ total: 4, reencrypted: 4, skippedConcurrent: 1, complete: true });
    await assertAllCurrent(repo);
  });

  it('leaves a row alone when a running instance already sealed it under the active key', async () => {
    const { repo, service } = await setup(2);
    const fresh = await ring.seal('whsec_renewed', secretRef('t000'));
    repo.beforeSwap = (_col, id) => {
      const row = repo.tables.get('tenants')?.get(id);
      if (id === 't000' && row) row.events_secret_enc = fresh;
    };
    const result = await service.reencryptAll();
    expect(result).toMatchObject({ total: 2, reencrypted: 1, skippedConcurrent: 1, complete: true });
    expect(repo.tables.get('tenants')?.get('t000')?.events_secret_enc).toBe(fresh);
  });

  it('stops between batches on abort and a re-run completes the work', async () => {
    const { repo, service } = await setup(10);
    const stop = new AbortController();
    const first = await service.reencryptAll((done) => done >= 4 && stop.abort(), { batchSize: 4, signal: stop.signal });
    expect(first).toEqual({ total: 10, reencrypted: 4, skippedConcurrent: 0, complete: false });
    const second = await service.reencryptAll(undefined, { batchSize: 4 });
    expect(second).toEqual({ total: 6, reencrypted: 6, skippedConcurrent: 0, complete: true });
    await assertAllCurrent(repo);
  });

  it('stops on a row that does not open, naming where it is but not what it holds', async () => {
    const { repo, service } = await setup(3);
    const row = repo.tables.get('tenants')?.get('t001');
    const moved = repo.tables.get('tenants')?.get('t002')?.events_secret_enc ?? null;
    if (row) row.events_secret_enc = moved;
    const run = service.reencryptAll(undefined, { batchSize: 1 });
    await expect(run).rejects.toThrow(VaultError);
    await expect(run).rejects.toThrow(/tenants\.events_secret_enc .*row id t001/);
    await expect(run).rejects.not.toThrow(moved ?? 'unreachable');
    expect(repo.tables.get('tenants')?.get('t000')?.events_secret_enc?.startsWith('v1.new.')).toBe(true);
  });
});
