import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Where a paged listing of a user stands, so that another instance resumes it after a kill instead of starting over
 * (docs/records.md): `record_sync.listing_started_at` (when the listing began; with `resume_path`, the next page) and
 * `record_listing_ids`, the ids the listing has seen so far (a paged listing only: a one-page listing keeps them in
 * memory and writes nothing). Its rows are removed when the listing completes or a new one begins; they go with
 * their connection. Added only: the previous release reads neither.
 */
export class SyncListingProgress1798200000001 implements MigrationInterface {
  name = 'SyncListingProgress1798200000001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE record_sync ADD COLUMN IF NOT EXISTS listing_started_at timestamptz`);
    await q.query(`CREATE TABLE IF NOT EXISTS record_listing_ids (
      connection_id uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
      workflow_id text NOT NULL,
      CONSTRAINT pk_record_listing_ids PRIMARY KEY (connection_id, workflow_id)
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS record_listing_ids`);
    await q.query(`ALTER TABLE record_sync DROP COLUMN IF EXISTS listing_started_at`);
  }
}
