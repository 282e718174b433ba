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

/** The update trigger's function, as GroupedConnectionChanges wrote it; `skip` first (below). */
const updatesFunction = (skip: string) => `
  CREATE OR REPLACE FUNCTION cws_notify_connection_updates() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    msg text;
  BEGIN${skip}
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

/** Unless a row of the statement was marked, nothing to compare; else the mark is cleared for the next statement. */
const SKIP_UNMARKED = `
    IF current_setting('cws.connections_changed', true) IS DISTINCT FROM 'on' THEN
      RETURN NULL;
    END IF;
    PERFORM set_config('cws.connections_changed', 'off', true);`;

/**
 * The update trigger compared the old and new rows of every UPDATE of connections (EXCEPT ALL over the transition
 * tables) to leave out the lease's own updates: the scheduler's claim, whose 100 rows differ only in the lease,
 * paid about 0.23 ms a statement for a comparison that never found anything. PostgreSQL refuses transition
 * tables on a trigger with a column list (`UPDATE OF ...`), so the column list goes on a row trigger of its own
 * (`tr_connections_changed`): it fires only for a row of an UPDATE that names an announced column in its SET, and
 * marks the transaction (`cws.connections_changed`, local). Row triggers fire before statement triggers at the
 * statement's end, so the statement trigger's function finds the mark when a row of its statement set it: it
 * clears it and compares as before; without it, it returns at once. An UPDATE of the lease alone (the claim,
 * taking, extending or giving back a lease) queues no row trigger and compares nothing. A change to the claim
 * that sets another column is compared and announced again, as it must: nothing decides but the columns an
 * UPDATE names. The row trigger is an AFTER trigger: a BEFORE one would fetch and lock every updated row (the
 * claim's and the save's too) before PostgreSQL looks at its column list. Sessions that defer their notifications
 * (renewal's commit lane) fire neither, as before. Expand only: the release before this one runs on it unchanged.
 */
export class LeaseUpdatesSkipChangeCompare1797600000001 implements MigrationInterface {
  name = 'LeaseUpdatesSkipChangeCompare1797600000001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION cws_mark_connections_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('cws.connections_changed', 'on', true);
        RETURN NULL;
      END
      $$`);
    await q.query(
      `CREATE TRIGGER tr_connections_changed AFTER UPDATE OF ${ANNOUNCED_COLUMNS} ON connections FOR EACH ROW
       WHEN (current_setting('cws.defer_change_notify', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION cws_mark_connections_changed()`,
    );
    await q.query(updatesFunction(SKIP_UNMARKED));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(updatesFunction(''));
    await q.query(`DROP TRIGGER tr_connections_changed ON connections`);
    await q.query(`DROP FUNCTION cws_mark_connections_changed()`);
  }
}
