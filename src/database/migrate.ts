import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations.js';

// Any fixed number: every instance takes the same lock, so that only one migrates at a time.
const MIGRATION_LOCK = 7_310_442_001;

/**
 * Applies pending migrations. Several instances may start at once: a session advisory lock serialises
 * them, and the late ones find nothing left to do.
 */
export async function runMigrations(databaseUrl: string): Promise<string[]> {
  const ds = new DataSource({ type: 'postgres', url: databaseUrl, migrations: MIGRATIONS, migrationsTableName: 'migrations', extra: { max: 2 } });
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await lock.release();
    await ds.destroy();
  }
}

export const MIGRATION_NAMES = MIGRATIONS.map((m) => m.name);
