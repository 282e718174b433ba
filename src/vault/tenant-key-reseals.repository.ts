import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** A tenant's re-seal after `keys rotate --tenant` (the tenant_key_reseals row). */
export interface TenantKeyReseal {
  tenantId: string;
  /** The data key version the tenant's values move to. */
  version: number;
  requestedAt: Date;
  /** Where the walk stands: the position in the existing sealed columns, and the last row id of that column passed. */
  columnIndex: number;
  afterId: string | null;
  /** Values re-sealed so far by this rotation. */
  resealed: number;
  /** No value of the tenant is under another version (set once). */
  resealedAt: Date | null;
  /** The older versions are destroyed: nothing left to do. */
  finishedAt: Date | null;
  retired: number[];
  leaseOwner: string | null;
  leaseUntil: Date | null;
}

const COLUMNS = `tenant_id AS "tenantId", version, requested_at AS "requestedAt", column_index AS "columnIndex",
  after_id AS "afterId", resealed::float8 AS resealed, resealed_at AS "resealedAt", finished_at AS "finishedAt", retired,
  lease_owner AS "leaseOwner", lease_until AS "leaseUntil"`;

/** `now() + ms`, for a lease. */
const LEASE = (ms: string) => `now() + make_interval(secs => ${ms}::double precision / 1000)`;

/** Rows an UPDATE touched: TypeORM answers [rows, count] for an UPDATE. */
function touched(result: unknown): number {
  return Array.isArray(result) && result.length === 2 && typeof result[1] === 'number' ? result[1] : 0;
}

/**
 * The tenant_key_reseals table (docs/keys.md, "Rotating a tenant's data key"): one row per tenant, the newest
 * rotation's. Instances take a tenant's re-seal with a lease (FOR UPDATE SKIP LOCKED, as the records' sync does):
 * one worker per tenant across every instance, and a killed instance's re-seal is taken over once its lease runs out.
 * Every write of progress checks the lease and the version: a worker that lost either stops.
 */
@Injectable()
export class TenantKeyResealsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * The tenant's values must move to `version`: a new rotation starts from the beginning (its progress and lease
   * reset); the same version again keeps what was done (a resumed re-seal), reopened if it had finished.
   */
  async request(tenantId: string, version: number): Promise<void> {
    await this.db.query(
      `INSERT INTO tenant_key_reseals (tenant_id, version) VALUES ($1, $2)
       ON CONFLICT (tenant_id) DO UPDATE SET
         requested_at = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.requested_at ELSE now() END,
         column_index = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.column_index ELSE 0 END,
         after_id = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.after_id ELSE NULL END,
         resealed = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.resealed ELSE 0 END,
         resealed_at = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.resealed_at ELSE NULL END,
         retired = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.retired ELSE '{}' END,
         lease_owner = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.lease_owner ELSE NULL END,
         lease_until = CASE WHEN tenant_key_reseals.version = $2 THEN tenant_key_reseals.lease_until ELSE NULL END,
         finished_at = NULL, version = $2`,
      [tenantId, version],
    );
  }

  /**
   * Takes the oldest open re-seal that no live lease holds (or that `owner` held: a restart under the same
   * INSTANCE_ID) for `owner`, until `leaseMs` from now. A re-seal that is done but waits to destroy the older
   * versions is due only once its version is older than `settleMs` (KEY_CACHE_TTL). Null: nothing to do.
   */
  async claim(owner: string, leaseMs: number, settleMs: number): Promise<TenantKeyReseal | null> {
    const rows = await this.db.query<TenantKeyReseal[]>(
      `WITH due AS (
         SELECT r.tenant_id AS due_tenant FROM tenant_key_reseals r
           LEFT JOIN tenant_keys k ON k.tenant_id = r.tenant_id AND k.version = r.version
          WHERE r.finished_at IS NULL AND (r.lease_until IS NULL OR r.lease_until < now() OR r.lease_owner = $1)
            AND (r.resealed_at IS NULL OR k.created_at IS NULL
                 OR k.created_at < now() - make_interval(secs => $3::double precision / 1000))
          ORDER BY r.requested_at LIMIT 1 FOR UPDATE OF r SKIP LOCKED)
       UPDATE tenant_key_reseals r SET lease_owner = $1, lease_until = ${LEASE('$2')}
         FROM due WHERE r.tenant_id = due.due_tenant
       RETURNING ${COLUMNS}`,
      [owner, leaseMs, settleMs],
    );
    return first(rows);
  }

  /** Takes the tenant's open re-seal for `owner` (the command line's foreground run); null: none, or another holds it. */
  async claimTenant(tenantId: string, owner: string, leaseMs: number): Promise<TenantKeyReseal | null> {
    const rows = await this.db.query<TenantKeyReseal[]>(
      `UPDATE tenant_key_reseals SET lease_owner = $2, lease_until = ${LEASE('$3')}
        WHERE tenant_id = $1 AND finished_at IS NULL AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $2)
       RETURNING ${COLUMNS}`,
      [tenantId, owner, leaseMs],
    );
    return first(rows);
  }

  /** Stores where the walk stands and extends the lease; false: `owner` lost the lease, or a newer rotation replaced it. */
  async progress(
    job: Pick<TenantKeyReseal, 'tenantId' | 'version'>,
    owner: string,
    at: { columnIndex: number; afterId: string | null },
    resealed: number,
    leaseMs: number,
  ): Promise<boolean> {
    return (
      touched(
        await this.db.query(
          `UPDATE tenant_key_reseals SET column_index = $4, after_id = $5, resealed = resealed + $6, lease_until = ${LEASE('$7')}
            WHERE tenant_id = $1 AND version = $2 AND lease_owner = $3`,
          [job.tenantId, job.version, owner, at.columnIndex, at.afterId, resealed, leaseMs],
        ),
      ) === 1
    );
  }

  /** No value of the tenant is under another version any more; false: the lease or the version was lost. */
  async markResealed(job: Pick<TenantKeyReseal, 'tenantId' | 'version'>, owner: string): Promise<boolean> {
    return (
      touched(
        await this.db.query(
          `UPDATE tenant_key_reseals SET resealed_at = COALESCE(resealed_at, now()) WHERE tenant_id = $1 AND version = $2 AND lease_owner = $3`,
          [job.tenantId, job.version, owner],
        ),
      ) === 1
    );
  }

  /** The older versions are destroyed (`retired`, added to those of earlier runs): the re-seal is over, its lease let go. */
  async finish(job: Pick<TenantKeyReseal, 'tenantId' | 'version'>, owner: string, retired: readonly number[]): Promise<boolean> {
    return (
      touched(
        await this.db.query(
          `UPDATE tenant_key_reseals SET finished_at = now(), retired = retired || $4::int[], lease_owner = NULL, lease_until = NULL
            WHERE tenant_id = $1 AND version = $2 AND lease_owner = $3`,
          [job.tenantId, job.version, owner, retired],
        ),
      ) === 1
    );
  }

  /** Lets go of `owner`'s lease on the tenant's re-seal (stopped, or waiting for KEY_CACHE_TTL). */
  async release(tenantId: string, owner: string): Promise<void> {
    await this.db.query(`UPDATE tenant_key_reseals SET lease_owner = NULL, lease_until = NULL WHERE tenant_id = $1 AND lease_owner = $2`, [
      tenantId,
      owner,
    ]);
  }

  async find(tenantId: string): Promise<TenantKeyReseal | null> {
    return first(await this.db.query<TenantKeyReseal[]>(`SELECT ${COLUMNS} FROM tenant_key_reseals WHERE tenant_id = $1`, [tenantId]));
  }

  /** Every tenant's newest re-seal (keys status). */
  async all(): Promise<TenantKeyReseal[]> {
    return this.db.query<TenantKeyReseal[]>(`SELECT ${COLUMNS} FROM tenant_key_reseals ORDER BY tenant_id`);
  }
}

/** The first row of a SELECT or a RETURNING (TypeORM answers [rows, count] for an UPDATE ... RETURNING). */
function first(result: unknown): TenantKeyReseal | null {
  const rows = Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) ? (result[0] as unknown[]) : (result as unknown[]);
  return (rows[0] as TenantKeyReseal | undefined) ?? null;
}
