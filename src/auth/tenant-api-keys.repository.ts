import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, Repository } from 'typeorm';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';

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

  /** Live keys of any of these prefixes (the shared lookups of ApiKeysService). */
  findLiveByPrefixes(prefixes: string[]): Promise<TenantApiKeyEntity[]> {
    return this.repo.find({ where: { keyPrefix: In(prefixes), revokedAt: IsNull() } });
  }

  /** Revokes every live key of the tenant (its deletion). */
  async revokeAll(tenantId: string, at: Date): Promise<void> {
    await this.repo.update({ tenantId, revokedAt: IsNull() }, { revokedAt: at });
  }

  /** Removes up to `limit` of the tenant's keys (its deletion, in the background); answers how many. */
  async deleteSome(tenantId: string, limit: number): Promise<number> {
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
