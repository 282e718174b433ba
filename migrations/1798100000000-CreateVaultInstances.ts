import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One row per live instance: the vault key ids it can open, and when it last said so (a heartbeat). A key seals
 * only once every live instance holds it, so a rolling restart that puts a new key first never seals a value an
 * instance still running cannot open. Bounded: a stopping instance deletes its row, and rows unseen for three
 * heartbeats are ignored and deleted by the others. A new table only: the previous release never reads it.
 */
export class CreateVaultInstances1798100000000 implements MigrationInterface {
  name = 'CreateVaultInstances1798100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE vault_instances (
        instance_id text PRIMARY KEY,
        key_ids     text[] NOT NULL,
        last_seen   timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE vault_instances`);
  }
}
