import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export interface TenantKeyRow {
  tenantId: string;
  version: number;
  /** null: destroyed. */
  wrapped: string | null;
  kekId: string;
  createdAt: Date;
  destroyedAt: Date | null;
}

/** Rows an UPDATE touched: TypeORM answers [rows, count] for an UPDATE (a plain pg client, in tests, its rows). */
function updated(result: unknown): number {
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') return result[1];
  return Array.isArray(result) ? result.length : 0;
}

const COLUMNS = `tenant_id AS "tenantId", version, wrapped_key AS wrapped, kek_id AS "kekId", created_at AS "createdAt", destroyed_at AS "destroyedAt"`;

/**
 * The tenant_keys table: each tenant's data keys, wrapped by the key store's KEK (tenant-keys.service.ts); and
 * tenant_keks, the KEK of its own a tenant may have in the key store (keys set-kek).
 */
@Injectable()
export class TenantKeysRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async find(tenantId: string, version: number): Promise<TenantKeyRow | null> {
    const rows = await this.db.query<TenantKeyRow[]>(`SELECT ${COLUMNS} FROM tenant_keys WHERE tenant_id = $1 AND version = $2`, [
      tenantId,
      version,
    ]);
    return rows[0] ?? null;
  }

  /** The newest version of the tenant's key, destroyed or not (a destroyed newest key means: the tenant was deleted). */
  async newest(tenantId: string): Promise<TenantKeyRow | null> {
    const rows = await this.db.query<TenantKeyRow[]>(
      `SELECT ${COLUMNS} FROM tenant_keys WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1`,
      [tenantId],
    );
    return rows[0] ?? null;
  }

  /**
   * Inserts version `version` unless another instance was first, or the tenant is deleted (a seal in flight at its
   * deletion must not give it a key again): false then.
   */
  async insert(tenantId: string, version: number, wrapped: string, kekId: string): Promise<boolean> {
    const rows = await this.db.query<unknown[]>(
      `INSERT INTO tenant_keys (id, tenant_id, version, wrapped_key, kek_id)
       SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE id = $2 AND deleted_at IS NOT NULL)
       ON CONFLICT DO NOTHING RETURNING 1`,
      [`${tenantId}/${version}`, tenantId, version, wrapped, kekId],
    );
    return rows.length === 1;
  }

  /** Erases the wrapped form of every live key of the tenant: nothing sealed under them opens again. Returns how many. */
  async destroyAll(tenantId: string): Promise<number> {
    return updated(
      await this.db.query(
        `UPDATE tenant_keys SET wrapped_key = NULL, destroyed_at = now() WHERE tenant_id = $1 AND wrapped_key IS NOT NULL`,
        [tenantId],
      ),
    );
  }

  /** Erases one version's wrapped form (a retired version no row uses any more). */
  async destroy(tenantId: string, version: number): Promise<boolean> {
    const result: unknown = await this.db.query(
      `UPDATE tenant_keys SET wrapped_key = NULL, destroyed_at = now() WHERE tenant_id = $1 AND version = $2 AND wrapped_key IS NOT NULL`,
      [tenantId, version],
    );
    return updated(result) === 1;
  }

  /**
   * Live keys not wrapped by `kekId`, by id (a resumable walk: rewrapped rows no longer match); tenants with a KEK of
   * their own are left to it.
   */
  async notWrappedBy(kekId: string, limit: number): Promise<TenantKeyRow[]> {
    return this.db.query<TenantKeyRow[]>(
      `SELECT ${COLUMNS} FROM tenant_keys
        WHERE wrapped_key IS NOT NULL AND kek_id <> $1 AND tenant_id NOT IN (SELECT tenant_id FROM tenant_keks)
        ORDER BY id LIMIT $2`,
      [kekId, limit],
    );
  }

  /** The tenant's live keys not wrapped by `kekId`, by version (keys set-kek's resumable walk). */
  async ofTenantNotWrappedBy(tenantId: string, kekId: string, limit: number): Promise<TenantKeyRow[]> {
    return this.db.query<TenantKeyRow[]>(
      `SELECT ${COLUMNS} FROM tenant_keys WHERE tenant_id = $1 AND wrapped_key IS NOT NULL AND kek_id <> $2 ORDER BY version LIMIT $3`,
      [tenantId, kekId, limit],
    );
  }

  /** The KEK of its own the tenant has in the key store (a label or key name), or null: the store's shared KEK. */
  async kekOf(tenantId: string): Promise<string | null> {
    const rows = await this.db.query<Array<{ kek: string }>>(`SELECT kek FROM tenant_keks WHERE tenant_id = $1`, [tenantId]);
    return rows[0]?.kek ?? null;
  }

  /** Gives the tenant a KEK of its own (or another one): new data key versions are wrapped by it from now on. */
  async setKek(tenantId: string, kek: string): Promise<void> {
    await this.db.query(
      `INSERT INTO tenant_keks (tenant_id, kek) VALUES ($1, $2) ON CONFLICT (tenant_id) DO UPDATE SET kek = $2, set_at = now()`,
      [tenantId, kek],
    );
  }

  /** Every tenant with a KEK of its own (keys status). */
  async keks(): Promise<Map<string, string>> {
    const rows = await this.db.query<Array<{ tenantId: string; kek: string }>>(`SELECT tenant_id AS "tenantId", kek FROM tenant_keks`);
    return new Map(rows.map((r) => [r.tenantId, r.kek]));
  }

  /** Compare-and-swap: the new wrapped form only if the row still holds the one that was read. */
  async rewrap(row: TenantKeyRow, next: { wrapped: string; kekId: string }): Promise<boolean> {
    const result: unknown = await this.db.query(
      `UPDATE tenant_keys SET wrapped_key = $3, kek_id = $4, rewrapped_at = now()
        WHERE tenant_id = $1 AND version = $2 AND wrapped_key = $5`,
      [row.tenantId, row.version, next.wrapped, next.kekId, row.wrapped],
    );
    return updated(result) === 1;
  }

  /** Every version of the tenant's key, live or destroyed, oldest first. */
  async versionsOf(tenantId: string): Promise<TenantKeyRow[]> {
    return this.db.query<TenantKeyRow[]>(`SELECT ${COLUMNS} FROM tenant_keys WHERE tenant_id = $1 ORDER BY version`, [tenantId]);
  }

  /** Which of these key rows (`<tenant>/<version>`) are destroyed (or gone): what an instance must stop holding. */
  async destroyedAmong(ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db.query<Array<{ id: string }>>(
      `SELECT i.id FROM unnest($1::text[]) AS i(id) LEFT JOIN tenant_keys k ON k.id = i.id WHERE k.wrapped_key IS NULL`,
      [ids],
    );
    return rows.map((r) => r.id);
  }

  /** Every key row, by tenant then version (keys status). */
  async all(): Promise<TenantKeyRow[]> {
    return this.db.query<TenantKeyRow[]>(`SELECT ${COLUMNS} FROM tenant_keys ORDER BY tenant_id, version`);
  }
}
