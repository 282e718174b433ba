import type { DataSource, ObjectLiteral } from 'typeorm';

interface MappedColumn {
  property: string;
  column: string;
  from: ((value: unknown) => unknown) | null;
}

/**
 * An entity's columns as a select list, and a raw row of that list back as the entity (or as the few properties
 * a read needs, `properties`), both derived from the entity's TypeORM metadata: the entity stays the one mapping
 * of a row, and a new column needs no change here. A hot read sends its own SQL as a named prepared statement
 * (pg-pool.ts) and maps its rows with this: TypeORM's query builder and hydration cost more of the app's CPU
 * than PostgreSQL spent executing the statement (docs/architecture.md, "Prepared statements"; the figures in docs/benchmarks.md). The pg driver
 * already parses what the entities hold (timestamptz, jsonb, bytea, boolean, integer); a column's transformer
 * (bigint to number) is applied here as TypeORM applies it.
 */
export class EntityRows<T extends ObjectLiteral, K extends keyof T = keyof T> {
  /** `<alias>."<column>"` of each mapped property, selected under its own column name. */
  readonly select: string;
  private readonly columns: MappedColumn[];

  constructor(
    db: DataSource,
    private readonly target: new () => T,
    alias: string,
    properties?: readonly K[],
  ) {
    const all = db.getMetadata(target).columns;
    const wanted = properties ? all.filter((c) => (properties as readonly string[]).includes(c.propertyName)) : all;
    if (properties && wanted.length !== properties.length)
      throw new Error(`${target.name}: not every property of ${properties.join(', ')} is a column`);
    this.columns = wanted.map((c) => {
      const transformer = c.transformer;
      if (Array.isArray(transformer)) throw new Error(`${target.name}.${c.propertyName}: a chain of transformers is not mapped`);
      return {
        property: c.propertyName,
        column: c.databaseName,
        from: transformer ? (v: unknown) => transformer.from(v) as unknown : null,
      };
    });
    this.select = this.columns.map((c) => `${alias}."${c.column}"`).join(', ');
  }

  map(row: Record<string, unknown>): Pick<T, K> {
    const entity = new this.target() as Record<string, unknown>;
    for (const c of this.columns) {
      const value = row[c.column];
      entity[c.property] = c.from ? c.from(value) : value;
    }
    return entity as Pick<T, K>;
  }
}
