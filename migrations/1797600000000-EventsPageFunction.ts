import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The events API's page (EventsRepository.listAfter) as a function, so that its plan is made once per
 * connection, with the plan PostgreSQL would pick for a big tenant. Sent as a statement, the page cost
 * PostgreSQL 1.8–2 ms of planning (events is partitioned by day: every partition and its indexes are
 * planned) against 0.3 of execution. As a named prepared statement its generic plan, costed for an average
 * tenant (a few rows), sorted the tenant's rows of every partition: 50,000 rows read for a page of 50 of the
 * big tenant at 100,000 events. In this function the page is planned once per connection
 * (`plan_cache_mode = force_generic_plan`) without a sort (`enable_sort = off`): a merge of each partition's
 * (tenant_id, writer_xid, seq) index in order, one page read whatever the tenant holds (asserted by
 * test/scale.e2e-spec.ts); the retention bound ($5) prunes partitions when the plan starts.
 *
 * STABLE: the page runs on its caller's snapshot, so the mark it reads below (pg_current_snapshot) and the
 * rows it reads are of the same snapshot, as in one statement. The columns are those of events when this was
 * written: a change to the page is a new function (a new name), so that the release before it keeps its own.
 * Expand only: nothing else changes, and the release before this one does not call it.
 */
export class EventsPageFunction1797600000000 implements MigrationInterface {
  name = 'EventsPageFunction1797600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION cws_events_page(p_tenant text, p_writer xid8, p_seq bigint, p_limit integer, p_kept timestamptz)
      RETURNS TABLE (seq bigint, writer_xid xid8, id uuid, tenant_id text, source text, receiver_id uuid, type text, payload jsonb,
                     received_at timestamptz, delivery_state text, delivery_attempts integer, last_delivery_error text,
                     delivered_at timestamptz, retry_from timestamptz, traceparent text, payload_digest text)
      LANGUAGE plpgsql STABLE
      SET enable_sort = off
      SET plan_cache_mode = force_generic_plan
      AS $$
      #variable_conflict use_column
      BEGIN
        RETURN QUERY
        SELECT e.seq, e.writer_xid, e.id, e.tenant_id, e.source, e.receiver_id, e.type, e.payload, e.received_at, e.delivery_state,
               e.delivery_attempts, e.last_delivery_error, e.delivered_at, e.retry_from, e.traceparent, e.payload_digest
          FROM events e
         WHERE e.tenant_id = p_tenant AND (e.writer_xid, e.seq) > (p_writer, p_seq) AND e.received_at >= p_kept
           AND e.writer_xid < (
             SELECT LEAST(pg_snapshot_xmax(s), (
                      SELECT min(x) FROM pg_snapshot_xip(s) x
                       WHERE x::text::bigint % 4294967296 NOT IN (
                               SELECT a.backend_xid::text::bigint FROM pg_stat_activity a
                                WHERE a.backend_xid IS NOT NULL AND a.datname <> current_database())))
               FROM pg_current_snapshot() s)
         ORDER BY e.writer_xid, e.seq
         LIMIT p_limit;
      END
      $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS cws_events_page(text, xid8, bigint, integer, timestamptz)`);
  }
}
