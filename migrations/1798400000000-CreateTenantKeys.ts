import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each tenant's data keys (envelope encryption, docs/security.md "Keys"): one row per tenant and key version,
 * the data key stored only wrapped by the key-encryption key of the key store (`kek_id` names which one). A
 * destroyed key (the tenant was deleted, or the version was retired) keeps its row with `wrapped_key` erased, so
 * nothing sealed under it opens again, while `keys status` can still say what happened. `id` is
 * `<tenant_id>/<version>`: the wrapped key is bound to it. Bounded by tenants ever created times their key
 * rotations. A new table only: the previous release never reads it.
 */
export class CreateTenantKeys1798400000000 implements MigrationInterface {
  name = 'CreateTenantKeys1798400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenant_keys (
        id           text PRIMARY KEY,
        tenant_id    text NOT NULL,
        version      integer NOT NULL,
        wrapped_key  text,
        kek_id       text NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        rewrapped_at timestamptz,
        destroyed_at timestamptz,
        CONSTRAINT tenant_keys_version UNIQUE (tenant_id, version)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE tenant_keys`);
  }
}
