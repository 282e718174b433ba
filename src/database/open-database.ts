import type { AppConfig } from '../config/app-config.js';
import type { EmbeddedDatabase } from './embedded-postgres.js';

export interface OpenedDatabase {
  /** The configuration with DATABASE_URL resolved (the embedded database's when it was unset). */
  config: AppConfig;
  /** Names of the migrations this start applied. */
  applied: string[];
  /** The embedded database when this process started one; stop it last. */
  embedded: EmbeddedDatabase | null;
}

/**
 * The database, migrated: DATABASE_URL's, or the embedded one in DATA_DIR when it is unset. `launched` is called
 * as soon as what remains is mostly waiting on other processes (the embedded PostgreSQL's initdb or start, or
 * at once for DATABASE_URL's): main.ts loads the app's modules meanwhile.
 */
export async function openDatabase(
  base: AppConfig,
  log: (msg: string) => void,
  launched: () => void = () => undefined,
): Promise<OpenedDatabase> {
  let embedded: EmbeddedDatabase | null = null;
  try {
    let databaseUrl = base.databaseUrl;
    if (!databaseUrl) {
      // Imported only when needed (the CLI and DATABASE_URL's starts never run it).
      const { startEmbeddedPostgres } = await import('./embedded-postgres.js');
      embedded = await startEmbeddedPostgres(base.dataDir, log, launched);
      databaseUrl = embedded.url;
    } else launched();
    const config: AppConfig = Object.freeze({ ...base, databaseUrl });
    // Imported here, after the embedded server is under way: TypeORM is a large share of the modules a start loads.
    const { runMigrations } = await import('./migrate.js');
    const applied = await runMigrations(databaseUrl);
    return { config, applied, embedded };
  } catch (e) {
    await embedded?.stop().catch(() => undefined);
    throw e;
  }
}
