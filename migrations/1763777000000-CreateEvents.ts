import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateEvents1763777000000 implements MigrationInterface {
  name = 'CreateEvents1763777000000';

  async up(q: QueryRunner): Promise<void> {
    // One table for what the partner receives: upstream deliveries (inbox) and the service's own
    // connection.* events. A row is written in the same transaction as what caused it, then delivered.
    await q.query(`
      CREATE TABLE events (
        seq                 bigserial NOT NULL,
        id                  uuid PRIMARY KEY,
        tenant_id           text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        source              text NOT NULL CHECK (source IN ('upstream', 'service')),
        receiver_id         uuid,
        type                text NOT NULL,
        payload             jsonb NOT NULL,
        received_at         timestamptz NOT NULL DEFAULT now(),
        delivery_state      text NOT NULL DEFAULT 'pending' CHECK (delivery_state IN ('pending', 'delivered', 'dead', 'no_target')),
        delivery_attempts   integer NOT NULL DEFAULT 0,
        last_delivery_error text,
        next_attempt_at     timestamptz,
        delivered_at        timestamptz
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_events_seq ON events (seq)`);
    await q.query(`CREATE INDEX ix_events_tenant_seq ON events (tenant_id, seq)`);
    await q.query(`CREATE INDEX ix_events_pending ON events (next_attempt_at) WHERE delivery_state = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE events`);
  }
}
