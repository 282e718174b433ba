import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Synced records (docs/records.md). `tenants.sync_workflows`: a tenant's own switch (null: SYNC_WORKFLOWS).
 *
 * `records`: one row per user connection and upstream workflow id, the upstream's object sealed with the vault
 * (`data_enc`, bound to tenant, user and workflow id, so a dump shows no content and a row cannot be moved), its
 * `version` (versionNumber), `last_modified`, and the SHA-256 `digest` of its canonical JSON (an unchanged object
 * writes nothing). `deleted_at`: a tombstone (the object left a complete listing), pruned after SYNC_TOMBSTONE_DAYS.
 *
 * `record_changes`: the change feed, one row per change, read in (writer_xid, seq) order below the oldest writer
 * still open, as the events outbox does (migration EventCommitOrder), so a cursor never passes a change whose
 * transaction commits later. Its rows are pruned after SYNC_TOMBSTONE_DAYS (plus a day of margin).
 *
 * `record_sync`: one row per user connection whose workflows are synced: its state, counts, times, the lease of
 * the instance listing it and where its listing stands.
 *
 * `record_sync_budget`: the upstream calls sync spent per tenant and budget window, shared by every instance, so
 * that sync never spends more than SYNC_BUDGET_SHARE of the company's read budget; rows of past windows are removed.
 *
 * Every table goes with its connection (connection deletion, user erasure, tenant purge: ON DELETE CASCADE).
 * All added: the previous release reads and writes none of them.
 */
export class CreateSyncedRecords1798200000000 implements MigrationInterface {
  name = 'CreateSyncedRecords1798200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants ADD COLUMN IF NOT EXISTS sync_workflows boolean`);
    await q.query(`CREATE TABLE IF NOT EXISTS records (
      connection_id uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
      workflow_id text NOT NULL,
      tenant_id text NOT NULL,
      user_id text NOT NULL,
      data_enc text,
      digest text,
      version bigint,
      last_modified timestamptz,
      synced_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz,
      sealed_id text GENERATED ALWAYS AS (tenant_id || '/' || user_id || '/' || workflow_id) STORED,
      CONSTRAINT pk_records PRIMARY KEY (connection_id, workflow_id)
    )`);
    // sealed_id is the id data_enc is bound to: re-encryption and key rotation walk the rows by it.
    await q.query(`CREATE INDEX IF NOT EXISTS ix_records_sealed_id ON records (sealed_id)`);
    await q.query(
      `CREATE INDEX IF NOT EXISTS ix_records_tenant_user ON records (tenant_id, user_id, workflow_id) WHERE deleted_at IS NULL`,
    );
    await q.query(`CREATE INDEX IF NOT EXISTS ix_records_tenant_workflow ON records (tenant_id, workflow_id) WHERE deleted_at IS NULL`);
    await q.query(`CREATE INDEX IF NOT EXISTS ix_records_deleted ON records (deleted_at) WHERE deleted_at IS NOT NULL`);
    await q.query(`CREATE TABLE IF NOT EXISTS record_changes (
      seq bigserial NOT NULL,
      writer_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      tenant_id text NOT NULL,
      connection_id uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
      user_id text NOT NULL,
      workflow_id text NOT NULL,
      action text NOT NULL,
      version bigint,
      last_modified timestamptz,
      data_enc text,
      changed_at timestamptz NOT NULL DEFAULT now(),
      sealed_id text GENERATED ALWAYS AS (tenant_id || '/' || user_id || '/' || workflow_id) STORED,
      CONSTRAINT pk_record_changes PRIMARY KEY (seq)
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS ix_record_changes_sealed_id ON record_changes (sealed_id)`);
    await q.query(`CREATE INDEX IF NOT EXISTS ix_record_changes_tenant_writer_seq ON record_changes (tenant_id, writer_xid, seq)`);
    await q.query(
      `CREATE INDEX IF NOT EXISTS ix_record_changes_tenant_user_writer_seq ON record_changes (tenant_id, user_id, writer_xid, seq)`,
    );
    await q.query(`CREATE INDEX IF NOT EXISTS ix_record_changes_connection ON record_changes (connection_id)`);
    await q.query(`CREATE INDEX IF NOT EXISTS ix_record_changes_changed_at ON record_changes (changed_at)`);
    await q.query(`CREATE TABLE IF NOT EXISTS record_sync (
      connection_id uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
      tenant_id text NOT NULL,
      user_id text NOT NULL,
      state text NOT NULL DEFAULT 'initial',
      records integer NOT NULL DEFAULT 0,
      last_listed_at timestamptz,
      last_change_at timestamptz,
      next_list_at timestamptz NOT NULL DEFAULT now(),
      last_error text,
      failing_since timestamptz,
      failing_announced boolean NOT NULL DEFAULT false,
      lease_owner text,
      lease_until timestamptz,
      resume_path text,
      calls bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT pk_record_sync PRIMARY KEY (connection_id)
    )`);
    await q.query(`CREATE UNIQUE INDEX IF NOT EXISTS ux_record_sync_tenant_user ON record_sync (tenant_id, user_id)`);
    await q.query(`CREATE INDEX IF NOT EXISTS ix_record_sync_due ON record_sync (next_list_at)`);
    await q.query(`CREATE TABLE IF NOT EXISTS record_sync_budget (
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      window_start timestamptz NOT NULL,
      calls integer NOT NULL DEFAULT 0,
      CONSTRAINT pk_record_sync_budget PRIMARY KEY (tenant_id, window_start)
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS record_sync_budget`);
    await q.query(`DROP TABLE IF EXISTS record_sync`);
    await q.query(`DROP TABLE IF EXISTS record_changes`);
    await q.query(`DROP TABLE IF EXISTS records`);
    await q.query(`ALTER TABLE tenants DROP COLUMN IF EXISTS sync_workflows`);
  }
}
