import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every column of connections except the renewal lease (lease_owner, lease_until), as in migration
 * GroupedConnectionChanges. A column added to connections must be added here, in a new migration that recreates
 * the function and the trigger; test/changes.e2e-spec.ts fails until it is.
 */
const ANNOUNCED_COLUMNS = [
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
].join(', ');

const IDS_PER_NOTIFICATION = 100;

/** The update trigger's function, as GroupedConnectionChanges wrote it; `reset` first clears the mark (below). */
const updatesFunction = (reset: string) => `
  CREATE OR REPLACE FUNCTION cws_notify_connection_updates() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    msg text;
  BEGIN${reset}
    FOR msg IN
      SELECT 'connections:' || tenant_id || ':' || string_agg(id::text, ',')
        FROM (SELECT tenant_id, id, (row_number() OVER (PARTITION BY tenant_id) - 1) / ${IDS_PER_NOTIFICATION} AS chunk
                FROM (SELECT ${ANNOUNCED_COLUMNS} FROM new_rows EXCEPT ALL SELECT ${ANNOUNCED_COLUMNS} FROM old_rows) changed) r
       GROUP BY tenant_id, chunk
    LOOP
      PERFORM pg_notify('cws_changes', msg);
    END LOOP;
    RETURN NULL;
  END
  $$`;

const NOT_DEFERRED = `current_setting('cws.defer_change_notify', true) IS DISTINCT FROM 'on'`;

/**
 * The update trigger compared the old and new rows of every UPDATE of connections (EXCEPT ALL over the transition
 * tables) to leave out the lease's own updates: the scheduler's claim, whose 100 rows differ only in the lease,
 * paid about 0.23 ms a statement for a comparison that never found anything. PostgreSQL refuses transition
 * tables on a trigger with a column list (`UPDATE OF ...`), so the column list goes on a row trigger of its own:
 * it fires only for an UPDATE that names an announced column in its SET, and marks the transaction
 * (`cws.connections_changed`, local, once per statement: its WHEN skips the rows after the first). The statement
 * trigger runs only when marked, and clears the mark before it compares. An UPDATE of the lease alone (the claim,
 * taking, extending or giving back a lease) fires neither: no comparison, no function call. A change to the
 * claim that sets another column fires both again, as it must; nothing silences the trigger but the columns an
 * UPDATE names. Every other UPDATE is compared and announced as before. Expand only: the release before this one
 * runs on it unchanged.
 */
export class LeaseUpdatesSkipChangeCompare1797600000001 implements MigrationInterface {
  name = 'LeaseUpdatesSkipChangeCompare1797600000001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION cws_mark_connections_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('cws.connections_changed', 'on', true);
        RETURN NEW;
      END
      $$`);
    await q.query(updatesFunction(`\n    PERFORM set_config('cws.connections_changed', 'off', true);`));
    await q.query(
      `CREATE TRIGGER tr_connections_changed BEFORE UPDATE OF ${ANNOUNCED_COLUMNS} ON connections FOR EACH ROW
       WHEN (${NOT_DEFERRED} AND current_setting('cws.connections_changed', true) IS DISTINCT FROM 'on')
       EXECUTE FUNCTION cws_mark_connections_changed()`,
    );
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT WHEN (${NOT_DEFERRED} AND current_setting('cws.connections_changed', true) = 'on')
       EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER tr_connections_notify_update ON connections`);
    await q.query(
      `CREATE TRIGGER tr_connections_notify_update AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT WHEN (${NOT_DEFERRED}) EXECUTE FUNCTION cws_notify_connection_updates()`,
    );
    await q.query(`DROP TRIGGER tr_connections_changed ON connections`);
    await q.query(`DROP FUNCTION cws_mark_connections_changed()`);
    await q.query(updatesFunction(''));
  }
}
