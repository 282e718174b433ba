import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The background re-seal of a tenant's values after `keys rotate --tenant` (docs/keys.md): one row per tenant, the
 * newest rotation's, reused by the next one. `version` is the data key version the values move to; the instance
 * holding the lease (`lease_owner` until `lease_until`, taken with SKIP LOCKED) stores its progress in
 * `column_index` (the position in SEALED_COLUMNS) and `after_id` (the last row id of that column it passed), so an
 * instance taking over after a kill goes on from there. `resealed_at`: no value of the tenant is under another
 * version; `finished_at`: the older versions are destroyed. Bounded by tenants ever rotated.
 *
 * `audit_log.details`: ids, versions and counts of an operation (key operations), never a secret; null for the
 * rows that carry none. New table and a new nullable column: release 0.2.0 reads and writes neither.
 */
export class TenantKeyReseals1798540000000 implements MigrationInterface {
  name = 'TenantKeyReseals1798540000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenant_key_reseals (
        tenant_id    text PRIMARY KEY,
        version      integer NOT NULL,
        requested_at timestamptz NOT NULL DEFAULT now(),
        column_index integer NOT NULL DEFAULT 0,
        after_id     text,
        resealed     bigint NOT NULL DEFAULT 0,
        resealed_at  timestamptz,
        finished_at  timestamptz,
        retired      integer[] NOT NULL DEFAULT '{}',
        lease_owner  text,
        lease_until  timestamptz
      )`);
    await q.query(`CREATE INDEX ix_tenant_key_reseals_open ON tenant_key_reseals (requested_at) WHERE finished_at IS NULL`);
    await q.query(`ALTER TABLE audit_log ADD COLUMN details jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE audit_log DROP COLUMN details`);
    await q.query(`DROP TABLE tenant_key_reseals`);
  }
}
