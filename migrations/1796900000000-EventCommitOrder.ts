import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * events.writer_xid: the transaction that inserted the row. The events API pages in (writer_xid, seq)
 * order and reads only below the oldest writer still open (docs/webhooks.md, "Commit order"), so that
 * transactions inserting events may commit in any order without a reader passing a row that commits
 * later with a lower seq. Rows from before this migration read first, in seq order (writer_xid 0).
 * The index replaces ix_events_tenant_seq for the events API's pages.
 */
export class EventCommitOrder1796900000000 implements MigrationInterface {
  name = 'EventCommitOrder1796900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN writer_xid xid8 NOT NULL DEFAULT '0'`);
    await q.query(`ALTER TABLE events ALTER COLUMN writer_xid SET DEFAULT pg_current_xact_id()`);
    await q.query(`CREATE INDEX ix_events_tenant_writer_seq ON events (tenant_id, writer_xid, seq)`);
    await q.query(`DROP INDEX ix_events_tenant_seq`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX ix_events_tenant_seq ON events (tenant_id, seq)`);
    await q.query(`DROP INDEX ix_events_tenant_writer_seq`);
    await q.query(`ALTER TABLE events DROP COLUMN writer_xid`);
  }
}
