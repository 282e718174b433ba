import pg from 'pg';
import type { DataSource } from 'typeorm';

/**
 * TypeORM's own pg pool, for the hot statements that go as named prepared statements (each pooled
 * connection parses and plans them once instead of once per call); null when the driver is not pg's.
 * Behind PgBouncer this needs session pooling, or 1.21+ with max_prepared_statements.
 */
export function pgPoolOf(db: DataSource): pg.Pool | null {
  const pool = (db.driver as { master?: unknown }).master;
  return pool instanceof pg.Pool ? pool : null;
}
