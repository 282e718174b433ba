import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A tenant's own key-encryption key (docs/keys.md, "A tenant's own KEK"): `keys set-kek --tenant <id> --kek <name>`
 * records here the key of the key store (a PKCS#11 label, a Transit key name) that wraps that tenant's data keys
 * instead of the store's shared KEK; each `tenant_keys` row still names the KEK that wraps it (`kek_id`). The row
 * stays after the tenant's deletion: it names the key the operator destroys so that backups cannot open the tenant's
 * data either. Bounded by the tenants ever given a KEK of their own. A new table only: the previous release never
 * reads it.
 */
export class CreateTenantKeks1798500000000 implements MigrationInterface {
  name = 'CreateTenantKeks1798500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenant_keks (
        tenant_id text PRIMARY KEY,
        kek       text NOT NULL,
        set_at    timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE tenant_keks`);
  }
}
