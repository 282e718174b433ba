import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateWebhookReceivers1795313322858 implements MigrationInterface {
  name = 'CreateWebhookReceivers1795313322858';

  async up(q: QueryRunner): Promise<void> {
    // A self-targeted webhook's receiving end: the Authorization value the upstream must send, sealed
    // (vault ref {table: 'webhook_receivers', id, column: 'secret_enc'}).
    await q.query(`
      CREATE TABLE webhook_receivers (
        id          uuid PRIMARY KEY,
        tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        auth_method text NOT NULL CHECK (auth_method IN ('bearer', 'apiKey', 'basic')),
        secret_enc  text NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_webhook_receivers_tenant ON webhook_receivers (tenant_id)`);
    // The outbox relay hands each pending event to the job queue exactly once (enqueued_at set in the
    // same transaction as the job insert); later attempts are queued by the delivery itself.
    await q.query(`ALTER TABLE events ADD COLUMN enqueued_at timestamptz`);
    await q.query(`CREATE INDEX ix_events_unqueued ON events (seq) WHERE delivery_state = 'pending' AND enqueued_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX ix_events_unqueued`);
    await q.query(`ALTER TABLE events DROP COLUMN enqueued_at`);
    await q.query(`DROP TABLE webhook_receivers`);
  }
}
