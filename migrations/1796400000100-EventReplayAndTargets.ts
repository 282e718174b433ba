import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Getting events back, and what the tenant says about its target:
 * - event_attempts: one row per delivery attempt (when, HTTP status or error kind, duration), never a body or a URL;
 * - events.retry_from: the retry span of a redelivered event starts at its redelivery, not at its receipt;
 * - delivery state `filtered`: stored and listed, not delivered (the tenant's eventTypes leave its type out);
 * - tenants.event_types (null: every type), events_target_disabled (the target answered 410 Gone), and the
 *   previous events secret with the end of its overlap (both sign each delivery until then).
 */
export class EventReplayAndTargets1796400000100 implements MigrationInterface {
  name = 'EventReplayAndTargets1796400000100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE event_attempts (
        id          bigserial PRIMARY KEY,
        event_id    uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
        at          timestamptz NOT NULL,
        status      integer,
        duration_ms integer NOT NULL,
        error       text
      )`);
    await q.query(`CREATE INDEX ix_event_attempts_event ON event_attempts (event_id, id)`);
    await q.query(`ALTER TABLE events ADD COLUMN retry_from timestamptz`);
    await q.query(`ALTER TABLE events DROP CONSTRAINT events_delivery_state_check`);
    await q.query(
      `ALTER TABLE events ADD CONSTRAINT events_delivery_state_check CHECK (delivery_state IN ('pending', 'delivered', 'dead', 'no_target', 'filtered'))`,
    );
    // Bulk redelivery selects a tenant's events by receipt time.
    await q.query(`CREATE INDEX ix_events_tenant_received ON events (tenant_id, received_at, seq)`);
    await q.query(`ALTER TABLE tenants ADD COLUMN event_types jsonb`);
    await q.query(`ALTER TABLE tenants ADD COLUMN events_target_disabled boolean NOT NULL DEFAULT false`);
    await q.query(`ALTER TABLE tenants ADD COLUMN events_secret_prev_enc text`);
    await q.query(`ALTER TABLE tenants ADD COLUMN events_secret_prev_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants DROP COLUMN events_secret_prev_until`);
    await q.query(`ALTER TABLE tenants DROP COLUMN events_secret_prev_enc`);
    await q.query(`ALTER TABLE tenants DROP COLUMN events_target_disabled`);
    await q.query(`ALTER TABLE tenants DROP COLUMN event_types`);
    await q.query(`DROP INDEX ix_events_tenant_received`);
    await q.query(`UPDATE events SET delivery_state = 'no_target' WHERE delivery_state = 'filtered'`);
    await q.query(`ALTER TABLE events DROP CONSTRAINT events_delivery_state_check`);
    await q.query(
      `ALTER TABLE events ADD CONSTRAINT events_delivery_state_check CHECK (delivery_state IN ('pending', 'delivered', 'dead', 'no_target'))`,
    );
    await q.query(`ALTER TABLE events DROP COLUMN retry_from`);
    await q.query(`DROP TABLE event_attempts`);
  }
}
