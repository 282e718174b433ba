import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Pages of GET /v1/tenants?limit= (the console's tenants page) in creation order: a keyset read on
 * (created_at, id), so that a page costs the same with ten thousand tenants as with ten. Built
 * CONCURRENTLY (outside a transaction) so that the running release keeps writing tenants meanwhile; the
 * previous release never reads it.
 */
export class TenantsPaging1797300000000 implements MigrationInterface {
  name = 'TenantsPaging1797300000000';
  transaction = false as const;

  async up(q: QueryRunner): Promise<void> {
    // A build interrupted by a crash leaves an INVALID index under this name: drop it and build again.
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ix_tenants_created`);
    await q.query(`CREATE INDEX CONCURRENTLY ix_tenants_created ON tenants (created_at, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ix_tenants_created`);
  }
}
