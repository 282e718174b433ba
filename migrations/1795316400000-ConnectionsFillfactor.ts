import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every renewal updates a connection row twice: the lease, then the new pair. The lease changes no indexed
 * column, so with free room on the page PostgreSQL keeps it there (a HOT update) and writes no new index
 * entries: a claim of 100 rows wrote about a quarter of the WAL in our measurement (docs/renewal.md).
 */
export class ConnectionsFillfactor1795316400000 implements MigrationInterface {
  name = 'ConnectionsFillfactor1795316400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connections SET (fillfactor = 70)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connections RESET (fillfactor)`);
  }
}
