import { DataSource } from 'typeorm';
import { LOCKS, withAdvisoryLock } from './advisory-lock.js';
import { MIGRATIONS } from './migrations.js';

/**
 * Applies pending migrations. Several instances may start at once: a session advisory lock serialises
 * them, and the late ones find nothing left to do.
 */
export async function runMigrations(databaseUrl: string): Promise<string[]> {
  const ds = new DataSource({
    type: 'postgres',
    url: databaseUrl,
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    extra: { max: 2 },
  });
  await ds.initialize();
  try {
    const applied = await withAdvisoryLock(ds, LOCKS.migrations, () => ds.runMigrations({ transaction: 'each' }));
    return applied.map((m) => m.name);
  } finally {
    await ds.destroy();
  }
}

export const MIGRATION_NAMES = MIGRATIONS.map((m) => m.name);
