import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The scheduler's claim (ConnectionsRepository.claimDueForRefresh) only takes leases, which are never announced,
 * yet the update trigger compared the batch's old and new rows to find that out: about 5 µs of PostgreSQL CPU per
 * claimed row. A statement trigger's WHEN cannot see the rows or the SET list, and a trigger with a column list
 * cannot have transition tables, so the claim says it itself: it sets `cws.lease_only_statement` to its own
 * statement_timestamp(), and the trigger is skipped when that setting equals the current statement's. The setting
 * is transaction-local and names one statement, so no other statement (in the same transaction or later on the
 * same session) is ever silenced by it. The lane's saves stay skipped by `cws.defer_change_notify` as before.
 */
export class QuietLeaseClaims1796900000000 implements MigrationInterface {
  name = 'QuietLeaseClaims1796900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT WHEN (current_setting('cws.defer_change_notify', true) IS DISTINCT FROM 'on'
                                AND current_setting('cws.lease_only_statement', true) IS DISTINCT FROM statement_timestamp()::text)
       EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT WHEN (current_setting('cws.defer_change_notify', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
  }
}
