import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Keyset paging of a tenant's connections in creation order, and each connection's renewal health.
 *
 * The health lives beside connections, not in it: a renewal writes it after the fact (not on the renewal's
 * compare-and-swap), and a change to it must not announce a connection change to every instance's cache.
 * The last 20 renewals are four parallel arrays, newest first: prepending and cutting arrays cost a fraction of
 * rebuilding a jsonb list (measured on this machine's PostgreSQL), and the row stays small enough for HOT updates
 * (fillfactor 70, no index but the key).
 */
export class ConnectionPagingAndHealth1796400000000 implements MigrationInterface {
  name = 'ConnectionPagingAndHealth1796400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX ix_connections_tenant_created ON connections (tenant_id, created_at, id)`);
    // status=reauth_required is rare: a partial index keeps its pages as cheap as the unfiltered ones.
    await q.query(
      `CREATE INDEX ix_connections_tenant_reauth_created ON connections (tenant_id, created_at, id) WHERE status = 'reauth_required'`,
    );
    await q.query(`
      CREATE TABLE connection_health (
        connection_id   uuid PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
        last_error_code text,
        last_error_at   timestamptz,
        renewal_at      timestamptz[] NOT NULL DEFAULT '{}',
        renewal_outcome text[] NOT NULL DEFAULT '{}',
        renewal_error   text[] NOT NULL DEFAULT '{}',
        renewal_ms      integer[] NOT NULL DEFAULT '{}',
        CONSTRAINT ck_connection_health_error CHECK ((last_error_code IS NULL) = (last_error_at IS NULL))
      ) WITH (fillfactor = 70)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE connection_health`);
    await q.query(`DROP INDEX ix_connections_tenant_reauth_created`);
    await q.query(`DROP INDEX ix_connections_tenant_created`);
  }
}
