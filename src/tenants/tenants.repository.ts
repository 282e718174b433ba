import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { TenantEntity } from './tenant.entity.js';

@Injectable()
export class TenantsRepository {
  constructor(@InjectRepository(TenantEntity) private readonly repo: Repository<TenantEntity>) {}

  getById(id: string): Promise<TenantEntity | null> {
    return this.repo.findOneBy({ id });
  }

  exists(id: string): Promise<boolean> {
    return this.repo.existsBy({ id });
  }

  list(): Promise<TenantEntity[]> {
    return this.repo.find({ order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /**
   * At most `limit` tenants after the tenant `after` (none: from the first), in list()'s order: a keyset read
   * on ix_tenants_created, so a page costs the same at any depth and with any number of tenants. A tenant
   * `after` that no longer exists starts nothing: the page is empty.
   */
  listPage(limit: number, after: string | null): Promise<TenantEntity[]> {
    const q = this.repo.createQueryBuilder('t');
    if (after !== null) q.where('(t.created_at, t.id) > (SELECT a.created_at, a.id FROM tenants a WHERE a.id = :after)', { after });
    return q.orderBy('t.created_at', 'ASC').addOrderBy('t.id', 'ASC').limit(limit).getMany();
  }

  /** Inserts; returns false when the id is taken. */
  async insert(tenant: TenantEntity): Promise<boolean> {
    const result = await this.repo.createQueryBuilder().insert().into(TenantEntity).values(tenant).orIgnore().returning(['id']).execute();
    return result.raw.length === 1;
  }

  async update(
    id: string,
    changes: Partial<
      Pick<
        TenantEntity,
        | 'name'
        | 'design'
        | 'allowedReturnUrls'
        | 'eventsTargetUrl'
        | 'eventsSecretEnc'
        | 'eventsSecretPrevEnc'
        | 'eventsSecretPrevUntil'
        | 'eventTypes'
        | 'eventsTargetDisabled'
      >
    >,
  ): Promise<TenantEntity | null> {
    await this.repo.update({ id }, changes);
    return this.getById(id);
  }

  /** The target answered 410 Gone: stop delivering to it, unless the tenant moved to another URL meanwhile. */
  async disableEventsTarget(id: string, url: string): Promise<boolean> {
    const result = await this.repo
      .createQueryBuilder()
      .update(TenantEntity)
      .set({ eventsTargetDisabled: true })
      .where('id = :id AND events_target_url = :url AND NOT events_target_disabled', { id, url })
      .execute();
    return (result.affected ?? 0) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.repo.delete({ id });
    return (result.affected ?? 0) > 0;
  }
}
