import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SEALED_COLUMNS, WRAPPED_KEYS } from '../src/vault/sealed-columns.js';
import { createTestDatabase } from './support/test-database.js';

/**
 * Re-encryption, key rotation and the start-up key check walk SEALED_COLUMNS only (src/vault/sealed-columns.ts): a
 * sealed column the list forgets keeps its values under a key that rotation then retires. Every column of the
 * migrated schema named `*_enc` is in the list, with its id and tenant columns present, and nothing else is
 * (but the key checks, sealed by each ring key on purpose).
 */
describe('the sealed columns of the schema are the ones the vault walks', () => {
  let db: pg.Pool;

  beforeAll(async () => {
    db = new pg.Pool({ connectionString: await createTestDatabase(), max: 1 });
  });

  afterAll(async () => {
    await db?.end();
  });

  it('lists every *_enc column of every table, and only those', async () => {
    const { rows } = await db.query<{ name: string }>(
      `SELECT c.table_name || '.' || c.column_name AS name
         FROM information_schema.columns c
         JOIN pg_class t ON t.relname = c.table_name AND t.relkind IN ('r', 'p') AND NOT t.relispartition
        WHERE c.table_schema = current_schema() AND c.column_name LIKE '%\\_enc'
        ORDER BY 1`,
    );
    // vault_key_checks holds one known value sealed with each ring key, by that key on purpose (the start-up check).
    const walked = rows.map((r) => r.name).filter((name) => name !== 'vault_key_checks.check_enc');
    expect(walked).toEqual(SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`).sort());
  });

  it('names, for each, an id column and a tenant column the table has', async () => {
    for (const col of [...SEALED_COLUMNS, WRAPPED_KEYS]) {
      const { rows } = await db.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`,
        [col.table],
      );
      const present = new Set(rows.map((r) => r.column_name));
      expect([col.table, present.has(col.idColumn), present.has(col.tenantColumn), present.has(col.column)]).toEqual([
        col.table,
        true,
        true,
        true,
      ]);
    }
  });
});
