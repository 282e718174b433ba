import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A tenant data key destroyed (its tenant deleted, a version retired) is announced on `cws_changes` as a change of
 * its tenant (`tenants:<tenant_id>:<tenant_id>`, the payload of migration ConnectionChangeNotify's trigger on
 * tenants), after the destruction commits: every instance then drops what it holds of the tenant, its unwrapped
 * data keys included (src/tenants/tenant-keys-revocation.ts). A rewrap (`keys rotate-kek`) changes no key and stays
 * silent. Expand only: release 0.2.0 already reads this payload (it drops the tenant's cached routes).
 */
export class TenantKeyDestroyNotify1798510000000 implements MigrationInterface {
  name = 'TenantKeyDestroyNotify1798510000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION cws_notify_tenant_key_destroyed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('cws_changes', 'tenants:' || NEW.tenant_id || ':' || NEW.tenant_id);
        RETURN NULL;
      END
      $$`);
    await q.query(
      `CREATE TRIGGER tr_tenant_keys_destroyed_notify AFTER UPDATE OF wrapped_key ON tenant_keys FOR EACH ROW
       WHEN (OLD.wrapped_key IS NOT NULL AND NEW.wrapped_key IS NULL) EXECUTE FUNCTION cws_notify_tenant_key_destroyed()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_tenant_keys_destroyed_notify ON tenant_keys`);
    await q.query(`DROP FUNCTION cws_notify_tenant_key_destroyed()`);
  }
}
