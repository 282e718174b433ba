import pg from 'pg';
import type { DataSource } from 'typeorm';

/**
 * Runs `q` as a named prepared statement on TypeORM's own pg pool: each pooled connection parses and plans
 * it once instead of once per call. With another driver it runs as a plain query. Behind PgBouncer this
 * needs session pooling, or 1.21+ with max_prepared_statements.
 */
export async function preparedQuery<Row extends Record<string, unknown>>(db: DataSource, q: pg.QueryConfig): Promise<Row[]> {
  const pool = (db.driver as { master?: unknown }).master;
  if (!(pool instanceof pg.Pool)) return (await db.query(q.text, q.values ?? [])) as Row[];
  return (await pool.query<Row>(q)).rows;
}
