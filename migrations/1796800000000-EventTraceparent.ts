import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * events.traceparent: the W3C trace context of the operation that received or created the event (null when
 * tracing was off), sent as `traceparent` with its deliveries so the partner can join our trace. No index:
 * it is only read with the event.
 */
export class EventTraceparent1796800000000 implements MigrationInterface {
  name = 'EventTraceparent1796800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN traceparent text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP COLUMN traceparent`);
  }
}
