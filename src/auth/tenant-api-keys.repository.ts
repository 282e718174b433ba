import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, Repository } from 'typeorm';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';

/** What checking a presented key needs of a stored one. */
export type KeyCandidate = Pick<TenantApiKeyEntity, 'id' | 'tenantId' | 'keyPrefix' | 'keyHash'>;

@Injectable()
export class TenantApiKeysRepository {
  constructor(@InjectRepository(TenantApiKeyEntity) private readonly repo: Repository<TenantApiKeyEntity>) {}

  async insert(key: TenantApiKeyEntity): Promise<void> {
    await this.repo.insert(key);
  }

  listForTenant(tenantId: string): Promise<TenantApiKeyEntity[]> {
    return this.repo.find({ where: { tenantId, revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** Live keys sharing a prefix: the candidates whose hashes are then compared in constant time. */
  findLiveByPrefix(prefix: string): Promise<TenantApiKeyEntity[]> {
    return this.repo.find({ where: { keyPrefix: prefix, revokedAt: IsNull() } });
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
