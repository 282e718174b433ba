import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateTenants1763776800000 implements MigrationInterface {
  name = 'CreateTenants1763776800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenants (
        id                  text PRIMARY KEY,
        name                text NOT NULL,
        environment         text NOT NULL CHECK (environment IN ('na', 'eu', 'demo', 'sandbox')),
        design              text NOT NULL DEFAULT 'admin+users' CHECK (design IN ('admin', 'users', 'admin+users')),
        allowed_return_urls jsonb NOT NULL DEFAULT '[]'::jsonb,
        events_target_url   text,
        events_secret_enc   text NOT NULL,
        created_at          timestamptz NOT NULL DEFAULT now(),
        updated_at          timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE tenant_api_keys (
        id           uuid PRIMARY KEY,
        tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name         text,
        key_prefix   text NOT NULL,
        key_hash     bytea NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        last_used_at timestamptz,
        revoked_at   timestamptz
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_tenant_api_keys_key_hash ON tenant_api_keys (key_hash)`);
    await q.query(`CREATE INDEX ix_tenant_api_keys_tenant ON tenant_api_keys (tenant_id)`);
    await q.query(`CREATE INDEX ix_tenant_api_keys_prefix ON tenant_api_keys (key_prefix)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE tenant_api_keys`);
    await q.query(`DROP TABLE tenants`);
  }
}
