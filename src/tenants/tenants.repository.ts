import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import type pg from 'pg';
import { DataSource, type EntityManager, IsNull, Not, Repository } from 'typeorm';
import { EntityRows } from '../database/entity-rows.js';
import { preparedQuery } from '../database/pg-pool.js';
import { TenantEntity } from './tenant.entity.js';

/**
 * Takes the per-tenant lock, until the transaction ends, that serialises what counts toward ENDPOINTS_PER_TENANT: a new
 * event endpoint (EndpointsRepository.insertBounded) and a first eventsTargetUrl (TenantsRepository.updateWithinEndpoints).
 */
export async function lockEndpointCount(m: EntityManager, tenantId: string): Promise<void> {
  await m.query(`SELECT pg_advisory_xact_lock(hashtextextended('event-endpoints:' || $1, 0))`, [tenantId]);
}

/**
 * The tenants table. The reads on a request's path (a tenant by id, whether it exists, the console's pages) are
 * named prepared statements mapped by `EntityRows`; the rare writes stay with TypeORM.
 */
@Injectable()
export class TenantsRepository {
  private readonly rows: EntityRows<TenantEntity>;
  private readonly byId: string;
  private readonly firstPage: string;
  private readonly pageAfter: string;

  constructor(
    @InjectRepository(TenantEntity) private readonly repo: Repository<TenantEntity>,
    @InjectDataSource() private readonly db: DataSource,
  ) {
    this.rows = new EntityRows(db, TenantEntity, 't');
    this.byId = `SELECT ${this.rows.select} FROM tenants t WHERE t.id = $1 AND t.deleted_at IS NULL`;
    this.firstPage = `SELECT ${this.rows.select} FROM tenants t WHERE t.deleted_at IS NULL ORDER BY t.created_at, t.id LIMIT $1`;
    this.pageAfter = `SELECT ${this.rows.select} FROM tenants t
      WHERE t.deleted_at IS NULL AND (t.created_at, t.id) > (SELECT a.created_at, a.id FROM tenants a WHERE a.id = $2)
      ORDER BY t.created_at, t.id LIMIT $1`;
  }

  /** A tenant that is not deleted (a deleted one is gone for every caller, while its rows are removed). */
  async findById(id: string): Promise<TenantEntity | null> {
    const [r] = await preparedQuery(this.db, { name: 'cws_tenants_by_id', text: this.byId, values: [id] });
    return r ? this.rows.map(r) : null;
  }

  async exists(id: string): Promise<boolean> {
    const rows = await preparedQuery(this.db, {
      name: 'cws_tenants_exists',
      text: `SELECT 1 AS found FROM tenants WHERE id = $1 AND deleted_at IS NULL`,
      values: [id],
    });
    return rows.length > 0;
  }

  list(): Promise<TenantEntity[]> {
    return this.repo.find({ where: { deletedAt: IsNull() }, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /**
   * At most `limit` tenants after the tenant `after` (none: from the first), in list()'s order: a keyset read
   * on ix_tenants_created, so a page costs the same at any depth and with any number of tenants. A tenant
   * `after` that no longer exists starts nothing: the page is empty.
   */
  async listPage(limit: number, after: string | null): Promise<TenantEntity[]> {
    return (await preparedQuery(this.db, this.pageQuery(limit, after))).map((r) => this.rows.map(r));
  }

  /** listPage's statement (a named prepared statement) with its values. */
  pageQuery(limit: number, after: string | null): pg.QueryConfig {
    return after === null
      ? { name: 'cws_tenants_page', text: this.firstPage, values: [limit] }
      : { name: 'cws_tenants_page_after', text: this.pageAfter, values: [limit, after] };
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
        | 'eventRetentionDays'
        | 'quotas'
        | 'syncWorkflows'
      >
    >,
  ): Promise<TenantEntity | null> {
    await this.repo.update({ id }, changes);
    return this.findById(id);
  }

  /**
   * update(), when the change sets an eventsTargetUrl: where the tenant had none, that URL is its first event endpoint,
   * set only when `admits` (the event endpoints' count, read in this transaction) says there is room. Under
   * lockEndpointCount, so a creation and this cannot both take the last place. 'full': nothing changed.
   */
  async updateWithinEndpoints(
    id: string,
    changes: Parameters<TenantsRepository['update']>[1],
    admits: (m: EntityManager) => Promise<boolean>,
  ): Promise<TenantEntity | null | 'full'> {
    const full = await this.db.transaction(async (m) => {
      await lockEndpointCount(m, id);
      const [tenant] = (await m.query(`SELECT events_target_url IS NOT NULL AS has FROM tenants WHERE id = $1 AND deleted_at IS NULL`, [
        id,
      ])) as Array<{ has: boolean }>;
      if (tenant && !tenant.has && !(await admits(m))) return true;
      await m.getRepository(TenantEntity).update({ id }, changes);
      return false;
    });
    return full ? 'full' : this.findById(id);
  }

  /** Whether the tenant has an eventsTargetUrl, read in the caller's transaction (its first event endpoint). */
  async hasEventsTargetIn(m: EntityManager, id: string): Promise<boolean> {
    const rows = (await m.query(`SELECT 1 FROM tenants WHERE id = $1 AND events_target_url IS NOT NULL`, [id])) as unknown[];
    return rows.length > 0;
  }

  /**
   * The target answered 410 Gone: stop delivering to it, unless the tenant moved to another URL meanwhile. `within` runs
   * in the same transaction when it is disabled now (what announces it commits with it).
   */
  async disableEventsTarget(id: string, url: string, within: ((m: EntityManager) => Promise<void>) | null): Promise<boolean> {
    return this.db.transaction(async (m) => {
      const result = await m
        .createQueryBuilder()
        .update(TenantEntity)
        .set({ eventsTargetDisabled: true })
        .where('id = :id AND events_target_url = :url AND NOT events_target_disabled', { id, url })
        .execute();
      const disabled = (result.affected ?? 0) > 0;
      if (disabled && within) await within(m);
      return disabled;
    });
  }

  /** Marks the tenant deleted; false when there is no such tenant (or it is deleted already). */
  async markDeleted(id: string, at: Date): Promise<boolean> {
    const result = await this.repo.update({ id, deletedAt: IsNull() }, { deletedAt: at });
    return (result.affected ?? 0) > 0;
  }

  /** Tenants marked deleted whose rows are still being removed, oldest deletion first. */
  async listDeleted(limit: number): Promise<string[]> {
    const rows = await this.repo
      .createQueryBuilder('t')
      .select('t.id', 'id')
      .where('t.deleted_at IS NOT NULL')
      .orderBy('t.deleted_at')
      .limit(limit)
      .getRawMany<{ id: string }>();
    return rows.map((r) => r.id);
  }

  /**
   * The last step of a deletion: the tenant's row, once its rows elsewhere are gone (the foreign keys' cascade
   * then finds at most what a previous release wrote meanwhile).
   */
  async removeDeleted(id: string): Promise<void> {
    await this.repo.delete({ id, deletedAt: Not(IsNull()) });
  }

  /** The longest event retention window of any tenant (deleted ones included: their rows go anyway); null: none set its own. */
  async longestRetention(): Promise<number | null> {
    const rows = (await this.repo.query(`SELECT max(event_retention_days) AS days FROM tenants`)) as Array<{ days: number | null }>;
    return rows[0]?.days ?? null;
  }

  /** Live tenants whose window (their own, else `defaultDays`) is shorter than `keptDays`: their older events are swept. */
  async withRetentionBelow(defaultDays: number, keptDays: number): Promise<Array<{ id: string; days: number }>> {
    const rows = (await this.repo.query(
      `SELECT id, coalesce(event_retention_days, $1)::int AS days FROM tenants
        WHERE deleted_at IS NULL AND coalesce(event_retention_days, $1) < $2 ORDER BY id`,
      [defaultDays, keptDays],
    )) as Array<{ id: string; days: number }>;
    return rows.map((r) => ({ id: r.id, days: Number(r.days) }));
  }
}
