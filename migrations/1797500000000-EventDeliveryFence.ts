import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The fence on an event's delivery (docs/webhooks.md, "One attempt at a time"): `delivery_fence` counts the
 * attempts that claimed the event, `delivery_lease_until` says until when the last one may still be running. An
 * attempt claims the row (fence + 1, lease set) before it forwards and records its outcome only while the fence is
 * still its own, so a job offered again while its attempt runs (a handler past its job's expiry, an instance that
 * drained with attempts in flight) waits instead of forwarding the event a second time.
 *
 * Expand only: two columns added, the fence with a constant default (no table rewrite, on every partition); the
 * previous release neither reads nor writes them and keeps delivering as before (without the fence). No index:
 * both are read and written with the row, by id.
 */
export class EventDeliveryFence1797500000000 implements MigrationInterface {
  name = 'EventDeliveryFence1797500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN IF NOT EXISTS delivery_fence bigint NOT NULL DEFAULT 0`);
    await q.query(`ALTER TABLE events ADD COLUMN IF NOT EXISTS delivery_lease_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP COLUMN IF EXISTS delivery_lease_until`);
    await q.query(`ALTER TABLE events DROP COLUMN IF EXISTS delivery_fence`);
  }
}
