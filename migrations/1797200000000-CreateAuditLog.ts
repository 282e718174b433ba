import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateAuditLog1797200000000 implements MigrationInterface {
  name = 'CreateAuditLog1797200000000';

  async up(q: QueryRunner): Promise<void> {
    // One row per change of credentials or data (docs/operations.md, "Audit trail"). No foreign key to
    // tenants: a tenant's trail outlives the tenant until AUDIT_RETENTION_DAYS removes it. Failures coalesce:
    // `bucket` (the minute) is set on failure rows only, and the unique index below makes a repeat of the same
    // failure in the same minute a `count + 1` on one row instead of a new row.
    await q.query(`
      CREATE TABLE audit_log (
        id          uuid PRIMARY KEY,
        at          timestamptz NOT NULL,
        actor_kind  text NOT NULL CHECK (actor_kind IN ('operator', 'tenant_key', 'console', 'connect_session')),
        actor_id    text,
        action      text NOT NULL,
        tenant_id   text,
        target      text,
        user_id     text,
        request_id  text,
        outcome     text NOT NULL CHECK (outcome IN ('success', 'failure')),
        count       integer NOT NULL DEFAULT 1 CHECK (count >= 1),
        bucket      timestamptz
      )`);
    // A new, empty table: its indexes are built with it in this transaction and lock nothing the previous release uses.
    // The operator's listing and the retention sweep (oldest first) read by time; a tenant's listing by tenant and time.
    await q.query(`CREATE INDEX ix_audit_log_at ON audit_log (at, id)`);
    await q.query(`CREATE INDEX ix_audit_log_tenant_at ON audit_log (tenant_id, at, id)`);
    await q.query(`CREATE INDEX ix_audit_log_tenant_user ON audit_log (tenant_id, user_id) WHERE user_id IS NOT NULL`);
    await q.query(`
      CREATE UNIQUE INDEX ux_audit_log_failure_bucket
        ON audit_log (bucket, action, actor_kind, COALESCE(actor_id, ''), COALESCE(tenant_id, ''))
        WHERE bucket IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE audit_log`);
  }
}
