import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every change to a connection, a tenant or a tenant API key is announced on the channel `cws_changes`
 * as `<table>:<tenant_id>:<id>`, so that each instance can drop what it cached (src/changes). NOTIFY is
 * transactional: listeners hear of a change when, and only if, it commits.
 */
export class ConnectionChangeNotify1795313268226 implements MigrationInterface {
  name = 'ConnectionChangeNotify1795313268226';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION cws_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        r record;
        tenant text;
      BEGIN
        IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
        IF TG_TABLE_NAME = 'tenants' THEN tenant := r.id; ELSE tenant := r.tenant_id; END IF;
        PERFORM pg_notify('cws_changes', TG_TABLE_NAME || ':' || tenant || ':' || r.id::text);
        RETURN NULL;
      END
      $$`);
    // INSERT too on connections: a cache may remember that a user had no connection.
    await q.query(
      `CREATE TRIGGER tr_connections_notify AFTER INSERT OR UPDATE OR DELETE ON connections FOR EACH ROW EXECUTE FUNCTION cws_notify_change()`,
    );
    await q.query(`CREATE TRIGGER tr_tenants_notify AFTER UPDATE OR DELETE ON tenants FOR EACH ROW EXECUTE FUNCTION cws_notify_change()`);
    await q.query(
      `CREATE TRIGGER tr_tenant_api_keys_notify AFTER UPDATE OR DELETE ON tenant_api_keys FOR EACH ROW EXECUTE FUNCTION cws_notify_change()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_tenant_api_keys_notify ON tenant_api_keys`);
    await q.query(`DROP TRIGGER tr_tenants_notify ON tenants`);
    await q.query(`DROP TRIGGER tr_connections_notify ON connections`);
    await q.query(`DROP FUNCTION cws_notify_change()`);
  }
}
