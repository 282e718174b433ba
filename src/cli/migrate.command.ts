import { MIGRATION_NAMES } from '../database/migrate.js';
import type { CliCommand } from './cli-runtime.js';

/** The runtime migrates before every command; this one only reports what that did. */
export const migrateCommand: CliCommand = {
  name: 'migrate',
  summary: 'apply pending database migrations and list them',
  async run(runtime) {
    const applied = runtime.appliedMigrations;
    if (applied.length === 0) {
      console.log(`nothing to apply: the schema is up to date (${MIGRATION_NAMES.length} migrations)`);
    } else {
      console.log(`applied ${applied.length} migration${applied.length === 1 ? '' : 's'}:`);
      for (const name of applied) console.log(`  ${name}`);
    }
    return 0;
  },
};
