import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, IsNull, Repository } from 'typeorm';
import { EntityRows } from '../database/entity-rows.js';
import { preparedQuery } from '../database/pg-pool.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';

/** What checking a presented key needs of a stored one. */
export type KeyCandidate = Pick<TenantApiKeyEntity, 'id' | 'tenantId' | 'keyPrefix' | 'keyHash'>;

@Injectable()
export class TenantApiKeysRepository {
  private readonly rows: EntityRows<TenantApiKeyEntity>;
  private readonly liveByPrefix: string;

  constructor(
    @InjectRepository(TenantApiKeyEntity) private readonly repo: Repository<TenantApiKeyEntity>,
    @InjectDataSource() private readonly db: DataSource,
  ) {
    this.rows = new EntityRows(db, TenantApiKeyEntity, 'k');
    this.liveByPrefix = `SELECT ${this.rows.select} FROM tenant_api_keys k WHERE k.key_prefix = $1 AND k.revoked_at IS NULL`;
  }

  async insert(key: TenantApiKeyEntity): Promise<void> {
    await this.repo.insert(key);
  }

  listForTenant(tenantId: string): Promise<TenantApiKeyEntity[]> {
    return this.repo.find({ where: { tenantId, revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** Live keys sharing a prefix (a named prepared statement: the first call of a key not cached yet): the candidates whose hashes are then compared in constant time. */
  async findLiveByPrefix(prefix: string): Promise<TenantApiKeyEntity[]> {
    const rows = await preparedQuery(this.db, { name: 'cws_api_keys_live_by_prefix', text: this.liveByPrefix, values: [prefix] });
    return rows.map((r) => this.rows.map(r));
  }

  /**
   * The candidates among live keys of any of these prefixes (the shared lookups of ApiKeysService, a flood's lane):
   * the four columns a check needs, read without building entities.
   */
  async findLiveByPrefixes(prefixes: string[]): Promise<KeyCandidate[]> {
    const rows = (await this.repo.query(
      `SELECT id, tenant_id, key_prefix, key_hash FROM tenant_api_keys WHERE key_prefix = ANY ($1::text[]) AND revoked_at IS NULL`,
      [prefixes],
    )) as Array<{ id: string; tenant_id: string; key_prefix: string; key_hash: Buffer }>;
    return rows.map((r) => ({ id: r.id, tenantId: r.tenant_id, keyPrefix: r.key_prefix, keyHash: r.key_hash }));
  }

  /** Revokes every live key of the tenant (its deletion). */
  async revokeAll(tenantId: string, at: Date): Promise<void> {
    await this.repo.update({ tenantId, revokedAt: IsNull() }, { revokedAt: at });
  }

  /** Removes up to `limit` of the tenant's keys (its deletion, in the background); answers how many. */
  async deleteSomeOfTenant(tenantId: string, limit: number): Promise<number> {
    const [, n] = (await this.repo.query(
      `DELETE FROM tenant_api_keys WHERE id IN (SELECT id FROM tenant_api_keys WHERE tenant_id = $1 LIMIT $2)`,
      [tenantId, limit],
    )) as [unknown, number];
    return n;
  }

  async revoke(tenantId: string, id: string, at: Date): Promise<boolean> {
    const result = await this.repo.update({ tenantId, id, revokedAt: IsNull() }, { revokedAt: at });
    return (result.affected ?? 0) > 0;
  }
}
