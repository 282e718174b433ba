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
