import type { DataSource } from 'typeorm';

export type Row = Record<string, unknown>;

/** A statement's rows: TypeORM answers an UPDATE ... RETURNING with [rows, count] and a SELECT with rows. */
export async function queryRows(db: DataSource, sql: string, params: unknown[]): Promise<Row[]> {
  const result = (await db.query(sql, params)) as Row[] | [Row[], number];
  return Array.isArray(result[0]) ? (result[0] as Row[]) : (result as Row[]);
}
