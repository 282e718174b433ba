import pg from 'pg';
import type { DataSource } from 'typeorm';

/**
 * Runs `q` as a named prepared statement on TypeORM's own pg pool: each pooled connection parses and plans
 * it once instead of once per call. With another driver it runs as a plain query. Behind PgBouncer this
 * needs session pooling, or 1.21+ with max_prepared_statements.
 *
 * A name stands for one text (`cws_<table>_<what>`; pg refuses a name it has prepared with another text). PostgreSQL
 * plans the first five calls with their values, then keeps a generic plan unless it costs more: such a statement
 * names its columns (a `*` fails once a migration adds one) and is shaped so that its generic plan is good for
 * every value, which test/scale.e2e-spec.ts asserts (docs/architecture.md, "Prepared statements"; the figures in docs/benchmarks.md).
 */
export async function preparedQuery<Row extends Record<string, unknown>>(db: DataSource, q: pg.QueryConfig): Promise<Row[]> {
  const pool = (db.driver as { master?: unknown }).master;
  if (!(pool instanceof pg.Pool)) return (await db.query(q.text, q.values ?? [])) as Row[];
  return (await pool.query<Row>(q)).rows;
}
