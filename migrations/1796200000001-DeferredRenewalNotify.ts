import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A NOTIFY takes a database-wide lock at COMMIT and holds it through the WAL flush, so transactions that
 * notify commit one after another. Renewals commit one pair per statement, at once (docs/renewal.md), on
 * connections of their own that set `cws.defer_change_notify = on`; for those the statement trigger stays
 * silent and the repository announces the renewed ids itself right after, grouped, in a transaction that
 * holds nothing else. Every other UPDATE announces as before.
 */
export class DeferredRenewalNotify1796200000001 implements MigrationInterface {
  name = 'DeferredRenewalNotify1796200000001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT WHEN (current_setting('cws.defer_change_notify', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
  }
}
