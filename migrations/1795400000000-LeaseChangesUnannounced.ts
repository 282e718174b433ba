import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every column of connections except the renewal lease (lease_owner, lease_until). An UPDATE that changes none
 * of them (taking, extending or giving back a lease) is not announced on `cws_changes`: no cache holds the
 * lease, and it was half of all the notifications a renewal sent (every instance parsed each one and dropped its
 * cached token for nothing). A column added to connections must be added here, in a new migration;
 * test/changes.e2e-spec.ts fails until it is.
 */
const ANNOUNCED_CONNECTION_COLUMNS = [
  'id',
  'tenant_id',
  'kind',
  'user_id',
  'upstream_user_id',
  'upstream_email',
  'upstream_username',
  'is_admin',
  'status',
  'status_reason',
  'scopes',
  'access_token_enc',
  'refresh_token_enc',
  'access_token_expires_at',
  'refresh_due_at',
  'last_refreshed_at',
  'refresh_failures',
  'version',
  'created_at',
  'updated_at',
] as const;

const row = (alias: 'OLD' | 'NEW') => `ROW(${ANNOUNCED_CONNECTION_COLUMNS.map((c) => `${alias}.${c}`).join(', ')})`;

export class LeaseChangesUnannounced1795400000000 implements MigrationInterface {
  name = 'LeaseChangesUnannounced1795400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify ON connections`);
    await q.query(`CREATE TRIGGER tr_connections_notify AFTER INSERT OR DELETE ON connections FOR EACH ROW EXECUTE FUNCTION cws_notify_change()`);
    // The condition is evaluated without calling the function, so a lease-only UPDATE costs no PL/pgSQL call either.
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections FOR EACH ROW
        WHEN (${row('OLD')} IS DISTINCT FROM ${row('NEW')})
        EXECUTE FUNCTION cws_notify_change()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(`DROP TRIGGER tr_connections_notify ON connections`);
    await q.query(`CREATE TRIGGER tr_connections_notify AFTER INSERT OR UPDATE OR DELETE ON connections FOR EACH ROW EXECUTE FUNCTION cws_notify_change()`);
  }
}
