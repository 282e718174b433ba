import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * events.payload_digest: SHA-256 (base64url) of an upstream delivery's body as received, for the partner to
 * recognise the same delivery posted again (the upstream shows no delivery id). Nullable and only added, so the
 * previous release keeps running on it (it neither reads nor writes the column); null for service events and
 * rows older than the column. No index: it is only read with the event.
 */
export class EventPayloadDigest1797400000000 implements MigrationInterface {
  name = 'EventPayloadDigest1797400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN IF NOT EXISTS payload_digest text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP COLUMN IF EXISTS payload_digest`);
  }
}
