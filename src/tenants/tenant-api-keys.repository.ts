import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, Repository } from 'typeorm';
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

  async revoke(tenantId: string, id: string, at: Date): Promise<boolean> {
    const result = await this.repo.update({ tenantId, id, revokedAt: IsNull() }, { revokedAt: at });
    return (result.affected ?? 0) > 0;
  }
}
